// framework/kernels/cuda/cwise_kernels.cu
//
// Device code of the elementwise GPU kernels (cwise_kernels.cc): unary ops, same-shape
// backward ops, broadcasting binary ops, fills and float32 <-> bfloat16 conversion.
// One thread per element in grid-stride loops; bfloat16 elements are computed in
// float32. The formulas are the CPU kernels' (cwise_unary.cc, cwise_binary.cc,
// nn_activation_kernels.cc).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "framework/kernels/cuda/cuda_launchers.h"

namespace tandem::gpu {
namespace {

__device__ __forceinline__ float Load(float v) { return v; }
__device__ __forceinline__ float Load(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void Store(float* p, float v) { *p = v; }
__device__ __forceinline__ void Store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// ---- Unary ----

__device__ __forceinline__ float ApplyUnary(UnaryOp op, float x) {
  switch (op) {
    case UnaryOp::kNeg:
      return -x;
    case UnaryOp::kAbs:
      return x < 0.0f ? -x : x;
    case UnaryOp::kSign:
      return static_cast<float>((0.0f < x) - (x < 0.0f));
    case UnaryOp::kSquare:
      return x * x;
    case UnaryOp::kSqrt:
      return sqrtf(x);
    case UnaryOp::kRsqrt:
      return 1.0f / sqrtf(x);
    case UnaryOp::kExp:
      return expf(x);
    case UnaryOp::kLog:
      return logf(x);
    case UnaryOp::kReciprocal:
      return 1.0f / x;
    case UnaryOp::kSigmoid:
      return 1.0f / (1.0f + expf(-x));
    case UnaryOp::kTanh:
      return tanhf(x);
    case UnaryOp::kRelu:
      return x > 0.0f ? x : 0.0f;
    case UnaryOp::kRelu6: {
      const float a = x < 0.0f ? 0.0f : x;  // std::max(x, 0.0f)
      return 6.0f < a ? 6.0f : a;           // std::min(a, 6.0f)
    }
    case UnaryOp::kElu:
      return x < 0.0f ? expm1f(x) : x;
    case UnaryOp::kSoftplus:
      return (x < 0.0f ? 0.0f : x) + log1pf(expf(-fabsf(x)));
  }
  return x;
}

template <typename T>
__global__ void UnaryKernel(UnaryOp op, const T* x, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    Store(y + i, ApplyUnary(op, Load(x[i])));
  }
}

// ---- Same-shape backward ops ----

__device__ __forceinline__ float ApplyGrad(GradOp op, float a, float b) {
  switch (op) {
    case GradOp::kSigmoidGrad:  // (y, dy)
      return b * a * (1.0f - a);
    case GradOp::kTanhGrad:  // (y, dy)
      return b * (1.0f - a * a);
    case GradOp::kSqrtGrad:  // (y, dy)
      return 0.5f * b / a;
    case GradOp::kRsqrtGrad:  // (y, dy)
      return -0.5f * b * a * a * a;
    case GradOp::kReciprocalGrad:  // (y, dy)
      return -b * a * a;
    case GradOp::kReluGrad:  // (g, x)
      return b > 0.0f ? a : 0.0f;
    case GradOp::kRelu6Grad:  // (g, x)
      return (b > 0.0f && b < 6.0f) ? a : 0.0f;
    case GradOp::kEluGrad:  // (g, y)
      return b < 0.0f ? a * (b + 1.0f) : a;
    case GradOp::kSoftplusGrad:  // (g, x)
      return a / (1.0f + expf(-b));
  }
  return a;
}

template <typename T>
__global__ void GradKernel(GradOp op, const T* a, const T* b, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    Store(out + i, ApplyGrad(op, Load(a[i]), Load(b[i])));
  }
}

// ---- Broadcasting binary ops ----

__device__ __forceinline__ float ApplyBinary(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::kAdd:
      return a + b;
    case BinaryOp::kSub:
      return a - b;
    case BinaryOp::kMul:
      return a * b;
    case BinaryOp::kRealDiv:
      return a / b;
    case BinaryOp::kMaximum:
      return a > b ? a : b;
    case BinaryOp::kMinimum:
      return a < b ? a : b;
    case BinaryOp::kSquaredDifference:
      return (a - b) * (a - b);
    case BinaryOp::kPow:
      return powf(a, b);
  }
  return a;
}

__global__ void BinaryKernel(BinaryOp op, BroadcastIndex index, const float* x, const float* y,
                             float* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = i;
    int64_t xo = 0, yo = 0;
    for (int d = index.rank - 1; d >= 0; --d) {
      const int64_t coord = rest % index.dims[d];
      rest /= index.dims[d];
      xo += coord * index.x_strides[d];
      yo += coord * index.y_strides[d];
    }
    out[i] = ApplyBinary(op, x[xo], y[yo]);
  }
}

// ---- Fill and conversions ----

template <typename T>
__global__ void FillKernel(T* p, int64_t n, float value) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    Store(p + i, value);
  }
}

template <typename S, typename D>
__global__ void ConvertKernel(const S* x, D* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    Store(y + i, Load(x[i]));
  }
}

}  // namespace

cudaError_t LaunchUnary(UnaryOp op, const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  UnaryKernel<float><<<LaunchGrid(n), kLaunchThreads, 0, stream>>>(op, x, y, n);
  return cudaGetLastError();
}

cudaError_t LaunchUnaryBf16(UnaryOp op, const __nv_bfloat16* x, __nv_bfloat16* y, int64_t n,
                            cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  UnaryKernel<__nv_bfloat16><<<LaunchGrid(n), kLaunchThreads, 0, stream>>>(op, x, y, n);
  return cudaGetLastError();
}

cudaError_t LaunchGrad(GradOp op, const float* a, const float* b, float* out, int64_t n,
                       cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  GradKernel<float><<<LaunchGrid(n), kLaunchThreads, 0, stream>>>(op, a, b, out, n);
  return cudaGetLastError();
}

cudaError_t LaunchGradBf16(GradOp op, const __nv_bfloat16* a, const __nv_bfloat16* b,
                           __nv_bfloat16* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  GradKernel<__nv_bfloat16><<<LaunchGrid(n), kLaunchThreads, 0, stream>>>(op, a, b, out, n);
  return cudaGetLastError();
}

cudaError_t LaunchBinary(BinaryOp op, const BroadcastIndex& index, const float* x, const float* y,
                         float* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  BinaryKernel<<<LaunchGrid(n), kLaunchThreads, 0, stream>>>(op, index, x, y, out, n);
  return cudaGetLastError();
}

template <typename T>
__global__ void FillFromScalarKernel(T* p, int64_t n, const T* value) {
  const T v = *value;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    p[i] = v;
  }
}

cudaError_t LaunchFillFromScalar(float* p, int64_t n, const float* value, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  FillFromScalarKernel<float><<<LaunchGrid(n), kLaunchThreads, 0, stream>>>(p, n, value);
  return cudaGetLastError();
}

cudaError_t LaunchFillFromScalarBf16(__nv_bfloat16* p, int64_t n, const __nv_bfloat16* value,
                                     cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  FillFromScalarKernel<__nv_bfloat16><<<LaunchGrid(n), kLaunchThreads, 0, stream>>>(p, n, value);
  return cudaGetLastError();
}

cudaError_t LaunchFill(float* p, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  FillKernel<float><<<LaunchGrid(n), kLaunchThreads, 0, stream>>>(p, n, value);
  return cudaGetLastError();
}

cudaError_t LaunchFillBf16(__nv_bfloat16* p, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  FillKernel<__nv_bfloat16><<<LaunchGrid(n), kLaunchThreads, 0, stream>>>(p, n, value);
  return cudaGetLastError();
}

cudaError_t LaunchFloatToBf16(const float* x, __nv_bfloat16* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ConvertKernel<float, __nv_bfloat16><<<LaunchGrid(n), kLaunchThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t LaunchBf16ToFloat(const __nv_bfloat16* x, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ConvertKernel<__nv_bfloat16, float><<<LaunchGrid(n), kLaunchThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

}  // namespace tandem::gpu

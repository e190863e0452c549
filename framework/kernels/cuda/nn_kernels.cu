// framework/kernels/cuda/nn_kernels.cu
//
// Device code of the nn GPU kernels (nn_kernels.cc, matmul_kernels.cc): BiasAdd with
// an optional ReLU (also the epilogue of _FusedMatMul), and the row-wise Softmax,
// LogSoftmax and SparseSoftmaxCrossEntropyWithLogits, one block per row with
// shared-memory reductions; the formulas are the CPU kernels' (softmax_kernels.cc:
// subtract the row max, exponentiate, divide by the sum).
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

// ---- BiasAdd ----

template <typename X, typename B, typename Y>
__global__ void BiasAddKernel(const X* x, const B* bias, Y* y, int64_t n, int64_t c, bool relu) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float v = Load(x[i]) + Load(bias[i % c]);
    if (relu) v = v > 0.0f ? v : 0.0f;
    Store(y + i, v);
  }
}

template <typename X, typename B, typename Y>
cudaError_t BiasAdd(const X* x, const B* bias, Y* y, int64_t rows, int64_t c, bool relu,
                    cudaStream_t stream) {
  const int64_t n = rows * c;
  if (n <= 0) return cudaSuccess;
  BiasAddKernel<X, B, Y><<<LaunchGrid(n), kLaunchThreads, 0, stream>>>(x, bias, y, n, c, relu);
  return cudaGetLastError();
}

// ---- Row reductions ----

// The sum (or max) of `v` over the block's kLaunchThreads threads, returned to every
// thread. Every thread of the block must call it.
template <bool kMax>
__device__ float BlockReduce(float v) {
  __shared__ float smem[kLaunchThreads];
  smem[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = kLaunchThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      const float a = smem[threadIdx.x], b = smem[threadIdx.x + s];
      smem[threadIdx.x] = kMax ? fmaxf(a, b) : a + b;
    }
    __syncthreads();
  }
  const float total = smem[0];
  __syncthreads();  // smem may be reused by the next call.
  return total;
}

// The max of row x[0..c) and the sum of exp(x[j] - max), over the block.
struct RowStats {
  float max;
  float sum;
};
__device__ RowStats RowMaxAndSum(const float* x, int64_t c) {
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) m = fmaxf(m, x[j]);
  m = BlockReduce<true>(m);
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) s += expf(x[j] - m);
  s = BlockReduce<false>(s);
  return {m, s};
}

// One block (kLaunchThreads threads) per row; the row loop is uniform across a block.
__global__ void SoftmaxKernel(const float* x, float* y, int64_t rows, int64_t c, bool log) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * c;
    float* yr = y + r * c;
    const RowStats st = RowMaxAndSum(xr, c);
    if (log) {
      const float log_sum = logf(st.sum);
      for (int64_t j = threadIdx.x; j < c; j += blockDim.x) yr[j] = (xr[j] - st.max) - log_sum;
    } else {
      const float inv = 1.0f / st.sum;
      for (int64_t j = threadIdx.x; j < c; j += blockDim.x) yr[j] = expf(xr[j] - st.max) * inv;
    }
  }
}

__global__ void SparseXentKernel(const float* x, const int64_t* labels, float* loss, float* back,
                                 int64_t rows, int64_t c) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * c;
    float* br = back + r * c;
    const int64_t label = labels[r];
    const RowStats st = RowMaxAndSum(xr, c);
    const float inv = 1.0f / st.sum;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      float v = expf(xr[j] - st.max) * inv;
      if (j == label) v -= 1.0f;
      br[j] = v;
    }
    if (threadIdx.x == 0) loss[r] = (st.max + logf(st.sum)) - xr[label];
  }
}

int RowBlocks(int64_t rows) { return static_cast<int>(rows < 65535 ? rows : 65535); }

}  // namespace

cudaError_t LaunchBiasAdd(const float* x, const float* bias, float* y, int64_t rows, int64_t c,
                          bool relu, cudaStream_t stream) {
  return BiasAdd(x, bias, y, rows, c, relu, stream);
}

cudaError_t LaunchBiasAddBf16(const __nv_bfloat16* x, const __nv_bfloat16* bias, __nv_bfloat16* y,
                              int64_t rows, int64_t c, bool relu, cudaStream_t stream) {
  return BiasAdd(x, bias, y, rows, c, relu, stream);
}

cudaError_t LaunchBiasAddFloatToBf16(const float* x, const __nv_bfloat16* bias, __nv_bfloat16* y,
                                     int64_t rows, int64_t c, bool relu, cudaStream_t stream) {
  return BiasAdd(x, bias, y, rows, c, relu, stream);
}

cudaError_t LaunchSoftmax(const float* x, float* y, int64_t rows, int64_t c, bool log,
                          cudaStream_t stream) {
  if (rows <= 0 || c <= 0) return cudaSuccess;
  SoftmaxKernel<<<RowBlocks(rows), kLaunchThreads, 0, stream>>>(x, y, rows, c, log);
  return cudaGetLastError();
}

cudaError_t LaunchSparseXent(const float* logits, const int64_t* labels, float* loss,
                             float* backprop, int64_t rows, int64_t c, cudaStream_t stream) {
  if (rows <= 0 || c <= 0) return cudaSuccess;
  SparseXentKernel<<<RowBlocks(rows), kLaunchThreads, 0, stream>>>(logits, labels, loss, backprop,
                                                                   rows, c);
  return cudaGetLastError();
}

// Philox4x32-10 of the 128-bit counter (c0 + c1 * 2^32 + block, c2, c3) under key
// (k0, k1): framework/core/random.cc's PhiloxRandom, block for block.
__device__ void Philox(uint64_t block, uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                       uint32_t k0, uint32_t k1, uint32_t out[4]) {
  const uint64_t lo = (static_cast<uint64_t>(c1) << 32 | c0) + block;
  if (lo < block) {  // Carry into the high 64 bits.
    if (++c2 == 0) ++c3;
  }
  uint32_t x0 = static_cast<uint32_t>(lo), x1 = static_cast<uint32_t>(lo >> 32), x2 = c2, x3 = c3;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * x0;
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * x2;
    const uint32_t y0 = static_cast<uint32_t>(p1 >> 32) ^ x1 ^ k0;
    const uint32_t y2 = static_cast<uint32_t>(p0 >> 32) ^ x3 ^ k1;
    x1 = static_cast<uint32_t>(p1);
    x3 = static_cast<uint32_t>(p0);
    x0 = y0;
    x2 = y2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = x0;
  out[1] = x1;
  out[2] = x2;
  out[3] = x3;
}

__global__ void DropoutKernel(const float* x, float* y, float* mask, int64_t n, PhiloxState s,
                              float rate, float keep_scale) {
  const int64_t blocks = (n + 3) / 4;
  for (int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; b < blocks;
       b += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint32_t bits[4];
    Philox(static_cast<uint64_t>(b), s.counter[0], s.counter[1], s.counter[2], s.counter[3],
           s.key[0], s.key[1], bits);
    for (int j = 0; j < 4; ++j) {
      const int64_t i = b * 4 + j;
      if (i >= n) break;
      const float u = static_cast<float>(bits[j] >> 8) * (1.0f / 16777216.0f);
      const float m = u >= rate ? keep_scale : 0.0f;
      mask[i] = m;
      y[i] = x[i] * m;
    }
  }
}

cudaError_t LaunchDropout(const float* x, float* y, float* mask, int64_t n, PhiloxState state,
                          float rate, float keep_scale, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  DropoutKernel<<<LaunchGrid((n + 3) / 4), kLaunchThreads, 0, stream>>>(x, y, mask, n, state, rate,
                                                                        keep_scale);
  return cudaGetLastError();
}

}  // namespace tandem::gpu

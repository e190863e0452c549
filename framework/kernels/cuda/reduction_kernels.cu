// framework/kernels/cuda/reduction_kernels.cu
//
// Device code of the sum reductions (Sum, Mean: reduction_kernels.cc; BiasAddGrad:
// nn_kernels.cc) over the middle dimension of [outer, reduce, inner], in two passes
// with float32 accumulation (see LaunchReduceSum in cuda_launchers.h):
//   1. partial sums over chunks of rows: when inner == 1 (a contiguous run per chunk)
//      one block per (outer, chunk) with a shared-memory tree; otherwise one thread
//      per (outer, chunk, inner) element, consecutive threads reading consecutive
//      addresses;
//   2. one thread per output summing its chunks in order and dividing by `divisor`.
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

// The sum of `v` over the block's kLaunchThreads threads, returned to every thread.
// Every thread of the block must call it.
__device__ float BlockSum(float v) {
  __shared__ float smem[kLaunchThreads];
  smem[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = kLaunchThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) smem[threadIdx.x] += smem[threadIdx.x + s];
    __syncthreads();
  }
  const float total = smem[0];
  __syncthreads();  // smem may be reused by the next call.
  return total;
}

// Pass 1 for inner == 1: partial[o * chunks + k] = sum of x[o * reduce + r] over the
// rows r of chunk k. Launched with kLaunchThreads threads per block.
template <typename T>
__global__ void PartialContiguousKernel(const T* x, float* partial, int64_t outer, int64_t reduce,
                                        int64_t chunks, int64_t per) {
  const int64_t pairs = outer * chunks;
  for (int64_t p = blockIdx.x; p < pairs; p += gridDim.x) {  // Uniform across the block.
    const int64_t o = p / chunks, k = p % chunks;
    const int64_t r0 = k * per;
    const int64_t r1 = r0 + per < reduce ? r0 + per : reduce;
    const T* row = x + o * reduce;
    float acc = 0.0f;
    for (int64_t r = r0 + threadIdx.x; r < r1; r += blockDim.x) acc += Load(row[r]);
    acc = BlockSum(acc);
    if (threadIdx.x == 0) partial[p] = acc;
  }
}

// Pass 1 for inner > 1: partial[(o * chunks + k) * inner + i] = sum of
// x[(o * reduce + r) * inner + i] over the rows r of chunk k.
template <typename T>
__global__ void PartialStridedKernel(const T* x, float* partial, int64_t outer, int64_t reduce,
                                     int64_t inner, int64_t chunks, int64_t per) {
  const int64_t n = outer * chunks * inner;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = t % inner;
    const int64_t ok = t / inner;
    const int64_t k = ok % chunks, o = ok / chunks;
    const int64_t r0 = k * per;
    const int64_t r1 = r0 + per < reduce ? r0 + per : reduce;
    const T* base = x + o * reduce * inner + i;
    float acc = 0.0f;
    for (int64_t r = r0; r < r1; ++r) acc += Load(base[r * inner]);
    partial[t] = acc;
  }
}

// Pass 2: out[o * inner + i] = (sum over k of partial[(o * chunks + k) * inner + i]) /
// divisor.
template <typename T>
__global__ void FinishKernel(const float* partial, T* out, int64_t outer, int64_t chunks,
                             int64_t inner, float divisor) {
  const int64_t n = outer * inner;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = t / inner, i = t % inner;
    const float* p = partial + o * chunks * inner + i;
    float acc = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) acc += p[k * inner];
    Store(out + t, acc / divisor);
  }
}

template <typename T>
cudaError_t ReduceSum(const T* x, float* partial, T* out, int64_t outer, int64_t reduce,
                      int64_t inner, int64_t chunks, float divisor, cudaStream_t stream) {
  if (outer <= 0 || reduce <= 0 || inner <= 0 || chunks <= 0) return cudaErrorInvalidValue;
  const int64_t per = (reduce + chunks - 1) / chunks;
  if (inner == 1) {
    const int64_t pairs = outer * chunks;
    const int blocks = static_cast<int>(pairs < 65535 ? pairs : 65535);
    PartialContiguousKernel<T>
        <<<blocks, kLaunchThreads, 0, stream>>>(x, partial, outer, reduce, chunks, per);
  } else {
    const int64_t n = outer * chunks * inner;
    PartialStridedKernel<T><<<LaunchGrid(n), kLaunchThreads, 0, stream>>>(x, partial, outer, reduce,
                                                                          inner, chunks, per);
  }
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  FinishKernel<T><<<LaunchGrid(outer * inner), kLaunchThreads, 0, stream>>>(partial, out, outer,
                                                                            chunks, inner, divisor);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchReduceSum(const float* x, float* partial, float* out, int64_t outer,
                            int64_t reduce, int64_t inner, int64_t chunks, float divisor,
                            cudaStream_t stream) {
  return ReduceSum<float>(x, partial, out, outer, reduce, inner, chunks, divisor, stream);
}

cudaError_t LaunchReduceSumBf16(const __nv_bfloat16* x, float* partial, __nv_bfloat16* out,
                                int64_t outer, int64_t reduce, int64_t inner, int64_t chunks,
                                float divisor, cudaStream_t stream) {
  return ReduceSum<__nv_bfloat16>(x, partial, out, outer, reduce, inner, chunks, divisor, stream);
}

}  // namespace tandem::gpu

// framework/kernels/cuda/conv_layout.cu
//
// The layout kernels of conv_layout.h: grid-stride loops over the destination, so that
// writes are coalesced (reads of the transpose are strided; filters are small, so a
// tiled transpose would not pay for its complexity).
#include "framework/kernels/cuda/conv_layout.h"

namespace tandem::gpu {
namespace {

constexpr int kThreads = 256;

unsigned BlocksFor(int64_t n) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks > 65535 ? 65535 : blocks);
}

__device__ int64_t FirstIndex() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ int64_t Step() { return static_cast<int64_t>(blockDim.x) * gridDim.x; }

__global__ void TransposeKernel(const float* __restrict__ src, float* __restrict__ dst,
                                int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t k = FirstIndex(); k < n; k += Step()) {
    // dst is [cols, rows]: element k is (j, i) = (k / rows, k % rows).
    const int64_t j = k / rows;
    const int64_t i = k - j * rows;
    dst[k] = src[i * cols + j];
  }
}

__global__ void PadEndKernel(const float* __restrict__ src, float* __restrict__ dst, int64_t n,
                             int64_t h, int64_t w, int64_t c, int64_t ph, int64_t pw, float fill) {
  const int64_t total = n * ph * pw * c;
  for (int64_t k = FirstIndex(); k < total; k += Step()) {
    // dst element k is (b, y, x, ch) of [n, ph, pw, c].
    const int64_t ch = k % c;
    const int64_t x = (k / c) % pw;
    const int64_t y = (k / (c * pw)) % ph;
    const int64_t b = k / (c * pw * ph);
    dst[k] = (y < h && x < w) ? src[((b * h + y) * w + x) * c + ch] : fill;
  }
}

__global__ void CropEndKernel(const float* __restrict__ src, float* __restrict__ dst, int64_t n,
                              int64_t h, int64_t w, int64_t c, int64_t ph, int64_t pw) {
  const int64_t total = n * h * w * c;
  for (int64_t k = FirstIndex(); k < total; k += Step()) {
    // dst element k is (b, y, x, ch) of [n, h, w, c].
    const int64_t ch = k % c;
    const int64_t x = (k / c) % w;
    const int64_t y = (k / (c * w)) % h;
    const int64_t b = k / (c * w * h);
    dst[k] = src[((b * ph + y) * pw + x) * c + ch];
  }
}

// Pixels of [start, start + k) inside [0, size).
__device__ int64_t Inside(int64_t start, int64_t k, int64_t size) {
  const int64_t lo = start < 0 ? 0 : start;
  const int64_t hi = start + k < size ? start + k : size;
  return hi > lo ? hi - lo : 0;
}

__global__ void ScaleByWindowCountKernel(const float* src, float* dst, int64_t n, int64_t oh,
                                         int64_t ow, int64_t c, PoolWindow win) {
  const int64_t total = n * oh * ow * c;
  for (int64_t k = FirstIndex(); k < total; k += Step()) {
    const int64_t ox = (k / c) % ow;
    const int64_t oy = (k / (c * ow)) % oh;
    const int64_t count = Inside(oy * win.stride_h - win.pad_h, win.kh, win.h) *
                          Inside(ox * win.stride_w - win.pad_w, win.kw, win.w);
    // A window with no pixel inside (impossible with TensorFlow's padding) keeps 0.
    dst[k] = count > 0 ? src[k] * (static_cast<float>(win.kh * win.kw) / static_cast<float>(count))
                       : 0.0f;
  }
}

}  // namespace

cudaError_t LaunchTransposeFloat(const float* src, float* dst, int64_t rows, int64_t cols,
                                 cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n <= 0) return cudaSuccess;
  TransposeKernel<<<BlocksFor(n), kThreads, 0, stream>>>(src, dst, rows, cols);
  return cudaGetLastError();
}

cudaError_t LaunchPadNhwcEnd(const float* src, float* dst, int64_t n, int64_t h, int64_t w,
                             int64_t c, int64_t padded_h, int64_t padded_w, float fill,
                             cudaStream_t stream) {
  const int64_t total = n * padded_h * padded_w * c;
  if (total <= 0) return cudaSuccess;
  PadEndKernel<<<BlocksFor(total), kThreads, 0, stream>>>(src, dst, n, h, w, c, padded_h, padded_w,
                                                          fill);
  return cudaGetLastError();
}

cudaError_t LaunchCropNhwcEnd(const float* src, float* dst, int64_t n, int64_t h, int64_t w,
                              int64_t c, int64_t padded_h, int64_t padded_w, cudaStream_t stream) {
  const int64_t total = n * h * w * c;
  if (total <= 0) return cudaSuccess;
  CropEndKernel<<<BlocksFor(total), kThreads, 0, stream>>>(src, dst, n, h, w, c, padded_h,
                                                           padded_w);
  return cudaGetLastError();
}

cudaError_t LaunchScaleByWindowCount(const float* src, float* dst, int64_t n, int64_t oh,
                                     int64_t ow, int64_t c, const PoolWindow& window,
                                     cudaStream_t stream) {
  const int64_t total = n * oh * ow * c;
  if (total <= 0) return cudaSuccess;
  ScaleByWindowCountKernel<<<BlocksFor(total), kThreads, 0, stream>>>(src, dst, n, oh, ow, c,
                                                                      window);
  return cudaGetLastError();
}

}  // namespace tandem::gpu

// framework/kernels/cuda/conv_layout.h
//
// Launchers of the layout kernels of conv_layout.cu that the cuDNN convolution and
// pooling kernels need around cuDNN, plain C++ over the CUDA runtime API so that both
// nvcc and the host compiler read it (no abseil, no glog):
//  - filter transposes: tandem's filters are HWIO [kh, kw, in, out] (TensorFlow's);
//    cuDNN's NHWC filter format is OHWI (KRSC). Both are row-major, so HWIO is a
//    [kh*kw*in, out] matrix and OHWI its transpose: one 2-D transpose converts either
//    way;
//  - explicit end padding of NHWC tensors and the matching crop: TensorFlow's SAME may
//    pad one more pixel after than before, which cuDNN (equal padding on both sides)
//    cannot express, so the input is extended at its bottom/right and cuDNN pads the
//    rest symmetrically;
//  - the rescaling of average pooling from "divide by the window size" (what cuDNN
//    computes on the padded input) to "divide by the window's pixels inside the input"
//    (TensorFlow's).
//
// All pointers are device memory; every launch is queued on `stream` and returns the
// launch's error (cudaSuccess, launching nothing, when there is no element).
//
// Thread safety: callable from any thread.
#ifndef TANDEM_FRAMEWORK_KERNELS_CUDA_CONV_LAYOUT_H_
#define TANDEM_FRAMEWORK_KERNELS_CUDA_CONV_LAYOUT_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::gpu {

// dst[j * rows + i] = src[i * cols + j] for the row-major rows x cols float matrix
// `src`; `dst` must not overlap it.
cudaError_t LaunchTransposeFloat(const float* src, float* dst, int64_t rows, int64_t cols,
                                 cudaStream_t stream);

// dst [n, padded_h, padded_w, c] = src [n, h, w, c] in its top-left corner and `fill`
// in the rows and columns after it. REQUIRES: padded_h >= h, padded_w >= w.
cudaError_t LaunchPadNhwcEnd(const float* src, float* dst, int64_t n, int64_t h, int64_t w,
                             int64_t c, int64_t padded_h, int64_t padded_w, float fill,
                             cudaStream_t stream);

// dst [n, h, w, c] = the top-left corner of src [n, padded_h, padded_w, c].
cudaError_t LaunchCropNhwcEnd(const float* src, float* dst, int64_t n, int64_t h, int64_t w,
                              int64_t c, int64_t padded_h, int64_t padded_w, cudaStream_t stream);

// Geometry of a pooling window over an h x w input: window kh x kw, strides, and the
// padding before (the window of output (oy, ox) starts at row oy*stride_h - pad_h).
struct PoolWindow {
  int64_t h, w, kh, kw, stride_h, stride_w, pad_h, pad_w;
};

// dst[b, oy, ox, ch] = src[b, oy, ox, ch] * (kh*kw) / (pixels of window (oy, ox)
// inside the input), over [n, oh, ow, c]; `dst` may equal `src`.
cudaError_t LaunchScaleByWindowCount(const float* src, float* dst, int64_t n, int64_t oh,
                                     int64_t ow, int64_t c, const PoolWindow& window,
                                     cudaStream_t stream);

}  // namespace tandem::gpu

#endif  // TANDEM_FRAMEWORK_KERNELS_CUDA_CONV_LAYOUT_H_

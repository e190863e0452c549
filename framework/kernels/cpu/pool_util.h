// framework/kernels/cpu/pool_util.h
//
// What the CPU pooling kernels share besides the geometry of window_geometry.h
// (PoolGeometry): AvgPool runs on oneDNN (pool_kernels.cc), MaxPool and MaxPoolGrad on
// loops (pool_max_kernels.cc), whose entry points are here.
//
// Thread safety: pure functions.
#ifndef TANDEM_FRAMEWORK_KERNELS_CPU_POOL_UTIL_H_
#define TANDEM_FRAMEWORK_KERNELS_CPU_POOL_UTIL_H_

#include "framework/kernels/cpu/nn_kernel_util.h"
#include "framework/kernels/window_geometry.h"

namespace tandem::nn {

// Reads "ksize", "strides", "padding" at Init.
using PoolKernelBase = WindowKernel<OpKernel, WindowOp::kPool>;

// MaxPool (pool_max_kernels.cc): `out` (s's pooled shape) gets each window's maximum of
// `input`, NaNs skipped. float32, or bfloat16 in and out; images on the calling
// thread's OpenMP team. REQUIRES: input and out of one dtype, with s's shapes.
void MaxPoolInto(const PoolGeometry& s, const Tensor& input, Tensor* out);

// MaxPoolGrad's routing (pool_max_kernels.cc): `out` [n,h,w,c] gets each window's value
// of `grad` (s's pooled shape) at the window's first maximum of `input`, added where
// windows overlap, and zero elsewhere. float32, or bfloat16 in and out; images on the
// calling thread's OpenMP team. REQUIRES: input, grad and out of one dtype, with s's
// shapes.
void MaxPoolGradInto(const PoolGeometry& s, const Tensor& input, const Tensor& grad, Tensor* out);

// The argmax of 2x2 windows of stride 2 with no padding before (TensorFlow's SAME and
// VALID both pad at the end only): `out` as MaxPoolInto, and `argmax` (uint8, out's
// shape) each window's first maximum as its code (pool_2x2.h: 2 * dy + dx from the
// window's origin, kNoArgmax where every element is NaN). MaxPoolGradByArgmaxInto routes
// `grad` by those codes into `out` [n,h,w,c], zero elsewhere: MaxPoolGradInto's result,
// without the pool's input. Images on the calling thread's OpenMP team. REQUIRES: s's
// windows as above; input, out and grad float32, or bfloat16, with s's shapes.
void MaxPoolArgmaxInto(const PoolGeometry& s, const Tensor& input, Tensor* out, Tensor* argmax);
void MaxPoolGradByArgmaxInto(const PoolGeometry& s, const Tensor& argmax, const Tensor& grad,
                             Tensor* out);

// Whether MaxPoolArgmaxInto takes `s`: 2x2 windows of stride 2, no padding before.
bool PoolsByArgmax(const PoolGeometry& s);

// MaxPool and MaxPoolGrad (pool_max_kernels.cc).
void RegisterCpuMaxPoolKernels(KernelRegistry* r);

}  // namespace tandem::nn

#endif  // TANDEM_FRAMEWORK_KERNELS_CPU_POOL_UTIL_H_

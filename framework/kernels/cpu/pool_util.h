// framework/kernels/cpu/pool_util.h
//
// The geometry of a 2-D NHWC pooling (TensorFlow's SAME/VALID windows) shared by the
// pooling kernels (not for use outside framework/kernels/cpu): AvgPool runs on oneDNN
// (pool_kernels.cc), MaxPool and MaxPoolGrad on loops (pool_max_kernels.cc).
//
// Thread safety: value types.
#ifndef TANDEM_FRAMEWORK_KERNELS_CPU_POOL_UTIL_H_
#define TANDEM_FRAMEWORK_KERNELS_CPU_POOL_UTIL_H_

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/status/statusor.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/nn_kernel_util.h"

namespace tandem::nn {

// Input [n,h,w,c] -> output [n,oh,ow,c]; attrs.second_h/second_w is the window.
struct PoolShape {
  int64_t n, h, w, c, oh, ow;
  WindowDim dim_h, dim_w;
  WindowAttrs attrs;

  TensorShape input_shape() const { return TensorShape({n, h, w, c}); }
  TensorShape output_shape() const { return TensorShape({n, oh, ow, c}); }
  // The window of output (oy, ox) clipped to the input: rows [y0, y1), columns [x0, x1).
  void Window(int64_t oy, int64_t ox, int64_t* y0, int64_t* y1, int64_t* x0, int64_t* x1) const {
    const int64_t ys = oy * attrs.stride_h - dim_h.pad_before;
    const int64_t xs = ox * attrs.stride_w - dim_w.pad_before;
    *y0 = ys < 0 ? 0 : ys;
    *y1 = ys + attrs.second_h < h ? ys + attrs.second_h : h;
    *x0 = xs < 0 ? 0 : xs;
    *x1 = xs + attrs.second_w < w ? xs + attrs.second_w : w;
  }
};

// Validates `input` (rank 4, window fits) and computes the geometry; errors name the
// node and the shape.
absl::StatusOr<PoolShape> MakePoolShape(const OpKernelContext& ctx, const WindowAttrs& attrs,
                                        const TensorShape& input);

// An error naming the node unless the inputs `orig_output_and_grad` have s's pooled
// shape (MaxPoolGrad's orig_output and grad).
absl::Status ExpectPooledShape(const OpKernelContext& ctx, const PoolShape& s,
                               std::initializer_list<int> orig_output_and_grad);

// Reads "ksize", "strides", "padding" at Init.
class PoolKernelBase : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(attrs_, ParseWindowAttrs(node, "ksize"));
    return absl::OkStatus();
  }

 protected:
  WindowAttrs attrs_;
};

// MaxPool (pool_max_kernels.cc): `out` (s's pooled shape) gets each window's maximum of
// `input`, NaNs skipped. float32, or bfloat16 in and out; images on the calling
// thread's OpenMP team. REQUIRES: input and out of one dtype, with s's shapes.
void MaxPoolInto(const PoolShape& s, const Tensor& input, Tensor* out);

// MaxPoolGrad's routing (pool_max_kernels.cc): `out` [n,h,w,c] gets each window's value
// of `grad` (s's pooled shape) at the window's first maximum of `input`, added where
// windows overlap, and zero elsewhere. float32, or bfloat16 in and out; images on the
// calling thread's OpenMP team. REQUIRES: input, grad and out of one dtype, with s's
// shapes.
void MaxPoolGradInto(const PoolShape& s, const Tensor& input, const Tensor& grad, Tensor* out);

// The argmax of 2x2 windows of stride 2 with no padding before (TensorFlow's SAME and
// VALID both pad at the end only): `out` as MaxPoolInto, and `argmax` (uint8, out's
// shape) each window's first maximum as its code (pool_2x2.h: 2 * dy + dx from the
// window's origin, kNoArgmax where every element is NaN). MaxPoolGradByArgmaxInto routes
// `grad` by those codes into `out` [n,h,w,c], zero elsewhere: MaxPoolGradInto's result,
// without the pool's input. Images on the calling thread's OpenMP team. REQUIRES: s's
// windows as above; input, out and grad float32, or bfloat16, with s's shapes.
void MaxPoolArgmaxInto(const PoolShape& s, const Tensor& input, Tensor* out, Tensor* argmax);
void MaxPoolGradByArgmaxInto(const PoolShape& s, const Tensor& argmax, const Tensor& grad,
                             Tensor* out);

// Whether MaxPoolArgmaxInto takes `s`: 2x2 windows of stride 2, no padding before.
bool PoolsByArgmax(const PoolShape& s);

// MaxPool and MaxPoolGrad (pool_max_kernels.cc).
void RegisterCpuMaxPoolKernels(KernelRegistry* r);

}  // namespace tandem::nn

#endif  // TANDEM_FRAMEWORK_KERNELS_CPU_POOL_UTIL_H_

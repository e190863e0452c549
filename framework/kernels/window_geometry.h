// framework/kernels/window_geometry.h
//
// The host-side shape code of the 2-D window ops (Conv2D and its gradients, MaxPool,
// AvgPool and theirs), shared by every device's kernels so that the CPU and the GPU
// agree on shapes and errors: TensorFlow's SAME/VALID window rule, the window attrs
// read at Init, the NHWC convolution and pooling geometry validated per step, and the
// 4-sizes inputs (input_sizes, filter_sizes, orig_input_shape). Each backend adds its
// own layout (oneDNN memory descriptors, cuDNN's padded input) on top.
//
// Thread safety: pure functions and value types.
#ifndef TANDEM_FRAMEWORK_KERNELS_WINDOW_GEOMETRY_H_
#define TANDEM_FRAMEWORK_KERNELS_WINDOW_GEOMETRY_H_

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/graph/graph.h"
#include "framework/kernels/op_kernel.h"
#include "framework/tensor/tensor_shape.h"

namespace tandem::nn {

// One spatial dimension of a conv/pool window, as TensorFlow computes it: SAME pads
// (out-1)*stride + effective_k - in in total, half before (rounded down), the rest after.
struct WindowDim {
  int64_t out = 0;
  int64_t pad_before = 0;
  int64_t pad_after = 0;
};
// Errors when a VALID window does not fit.
absl::StatusOr<WindowDim> ComputeWindowDim(int64_t in, int64_t k, int64_t stride, int64_t dilation,
                                           bool same);

// Attrs of Conv2D* (dilations) and pool ops (ksize), read at kernel Init: `second`,
// prefix + "strides" and prefix + "padding" (a fused op's second window has a prefix).
struct WindowAttrs {
  int64_t stride_h = 1, stride_w = 1;
  int64_t second_h = 1, second_w = 1;  // dilation (conv) or window size (pool)
  bool same = false;
};
absl::StatusOr<WindowAttrs> ParseWindowAttrs(const Node& node, const std::string& second,
                                             const std::string& prefix = "");

// A convolution: input [n,h,w,c] by filter [kh,kw,c,o] gives output [n,oh,ow,o].
struct ConvGeometry {
  int64_t n, h, w, c, kh, kw, o, oh, ow;
  WindowDim dim_h, dim_w;
  WindowAttrs attrs;

  TensorShape input_shape() const { return TensorShape({n, h, w, c}); }
  TensorShape filter_shape() const { return TensorShape({kh, kw, c, o}); }
  TensorShape output_shape() const { return TensorShape({n, oh, ow, o}); }
  bool empty() const {
    return n == 0 || h == 0 || w == 0 || c == 0 || o == 0 || oh == 0 || ow == 0;
  }

  // Validates an NHWC `input` and HWIO `filter` (rank 4, channels agree, a filter of
  // positive height and width, the window fits) and computes the geometry; errors name
  // the node and both shapes.
  static absl::StatusOr<ConvGeometry> Make(const OpKernelContext& ctx, const WindowAttrs& attrs,
                                           const TensorShape& input, const TensorShape& filter);
};
// "[2,3] x [4,5]"-style list of the input shapes of a kernel invocation, for errors.
std::string InputShapes(const OpKernelContext& ctx);

// An error naming the node unless `out_backprop` has g's output shape.
absl::Status CheckOutBackprop(const OpKernelContext& ctx, const ConvGeometry& g,
                              const Tensor& out_backprop);

// A pooling: input [n,h,w,c] gives output [n,oh,ow,c]; attrs.second_h/second_w is the
// window.
struct PoolGeometry {
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

  // Validates `input` (rank 4, the window fits) and computes the geometry; errors name
  // the node and the shape.
  static absl::StatusOr<PoolGeometry> Make(const OpKernelContext& ctx, const WindowAttrs& attrs,
                                           const TensorShape& input);
};
// An error naming the node unless the inputs `orig_output_and_grad` have g's output
// shape (MaxPoolGrad's orig_output and grad).
absl::Status ExpectPooledShape(const OpKernelContext& ctx, const PoolGeometry& g,
                               std::initializer_list<int> orig_output_and_grad);
// An error naming the node unless `grad` has g's output shape (AvgPoolGrad).
absl::Status CheckPoolGrad(const OpKernelContext& ctx, const PoolGeometry& g, const Tensor& grad);

// The shape held by input `i`, an int32/int64 vector of 4 sizes in host memory
// (Conv2DBackpropInput's input_sizes, Conv2DBackpropFilter's filter_sizes,
// AvgPoolGrad's orig_input_shape); errors name the node and the input.
absl::StatusOr<TensorShape> ShapeFromSizesInput(const OpKernelContext& ctx, int i);

// Which attr holds a window op's second window parameter.
enum class WindowOp {
  kConv,  // "dilations"
  kPool,  // "ksize"
};

// The base of a window op's kernel on any device (Base: OpKernel, or a device's
// subclass of it): reads the window attrs at Init into attrs_. A device whose library
// takes them in a narrower type sets kMaxAttr; larger attrs are UNIMPLEMENTED there.
template <typename Base, WindowOp kOp, int64_t kMaxAttr = std::numeric_limits<int64_t>::max()>
class WindowKernel : public Base {
 public:
  absl::Status Init(const Node& node) override {
    const char* second = kOp == WindowOp::kConv ? "dilations" : "ksize";
    TANDEM_ASSIGN_OR_RETURN(attrs_, ParseWindowAttrs(node, second));
    for (int64_t v : {attrs_.stride_h, attrs_.stride_w, attrs_.second_h, attrs_.second_w}) {
      if (v > kMaxAttr) {
        return absl::UnimplementedError(absl::StrCat("this device's kernel takes strides and '",
                                                     second, "' up to ", kMaxAttr, ", got ", v));
      }
    }
    return absl::OkStatus();
  }

 protected:
  WindowAttrs attrs_;
};

}  // namespace tandem::nn

#endif  // TANDEM_FRAMEWORK_KERNELS_WINDOW_GEOMETRY_H_

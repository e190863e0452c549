// framework/kernels/window_geometry.cc
//
// The window rule, attr parsing and geometry of window_geometry.h.
#include "framework/kernels/window_geometry.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_join.h"

namespace tandem::nn {

absl::StatusOr<WindowDim> ComputeWindowDim(int64_t in, int64_t k, int64_t stride, int64_t dilation,
                                           bool same) {
  WindowDim w;
  const int64_t eff = (k - 1) * dilation + 1;
  if (same) {
    w.out = (in + stride - 1) / stride;
    const int64_t total = std::max<int64_t>((w.out - 1) * stride + eff - in, 0);
    w.pad_before = total / 2;
    w.pad_after = total - w.pad_before;
  } else {
    if (in < eff) {
      return absl::InvalidArgumentError(absl::StrCat("window of effective size ", eff,
                                                     " is larger than the input dimension ", in,
                                                     " with VALID padding"));
    }
    w.out = (in - eff) / stride + 1;
  }
  return w;
}

namespace {

absl::StatusOr<std::vector<int64_t>> FourInts(const Node& node, const std::string& name) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> v,
                          GetAttr<std::vector<int64_t>>(node.attrs(), name));
  if (v.size() != 4 || v[0] != 1 || v[3] != 1 || v[1] < 1 || v[2] < 1) {
    return absl::InvalidArgumentError(absl::StrCat("attr '", name,
                                                   "' must be 4 positive ints [1, h, w, 1], got [",
                                                   absl::StrJoin(v, ","), "]"));
  }
  return v;
}

// Sets g's windows (dim_h, dim_w, oh, ow) for windows of kh x kw taps dilated by
// dil_h x dil_w over g's input; where one does not fit, an error naming the input's
// shape (and the filter's, when there is one).
template <typename G>
absl::Status SetWindows(const OpKernelContext& ctx, int64_t kh, int64_t kw, int64_t dil_h,
                        int64_t dil_w, const TensorShape* filter, G* g) {
  const WindowAttrs& a = g->attrs;
  const absl::StatusOr<WindowDim> dh = ComputeWindowDim(g->h, kh, a.stride_h, dil_h, a.same);
  const absl::StatusOr<WindowDim> dw = ComputeWindowDim(g->w, kw, a.stride_w, dil_w, a.same);
  if (!dh.ok() || !dw.ok()) {
    return ctx.Error(absl::StrCat(
        (dh.ok() ? dw : dh).status().message(), " (input ", g->input_shape().DebugString(),
        filter == nullptr ? "" : absl::StrCat(", filter ", filter->DebugString()), ")"));
  }
  g->dim_h = *dh;
  g->dim_w = *dw;
  g->oh = dh->out;
  g->ow = dw->out;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<WindowAttrs> ParseWindowAttrs(const Node& node, const std::string& second,
                                             const std::string& prefix) {
  WindowAttrs a;
  TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> strides, FourInts(node, prefix + "strides"));
  TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> other, FourInts(node, second));
  a.stride_h = strides[1];
  a.stride_w = strides[2];
  a.second_h = other[1];
  a.second_w = other[2];
  TANDEM_ASSIGN_OR_RETURN(std::string padding,
                          GetAttr<std::string>(node.attrs(), prefix + "padding"));
  if (padding != "SAME" && padding != "VALID") {
    return absl::InvalidArgumentError(
        absl::StrCat("padding must be SAME or VALID, got '", padding, "'"));
  }
  a.same = padding == "SAME";
  std::string format = GetAttrOr<std::string>(node.attrs(), "data_format", "NHWC");
  if (format != "NHWC") {
    return absl::UnimplementedError(
        absl::StrCat("only data_format NHWC is supported, got '", format, "'"));
  }
  return a;
}

std::string InputShapes(const OpKernelContext& ctx) {
  std::vector<std::string> shapes;
  for (int i = 0; i < ctx.num_inputs(); ++i) shapes.push_back(ctx.input(i).shape().DebugString());
  return absl::StrJoin(shapes, " x ");
}

absl::StatusOr<ConvGeometry> ConvGeometry::Make(const OpKernelContext& ctx,
                                                const WindowAttrs& attrs, const TensorShape& input,
                                                const TensorShape& filter) {
  if (input.rank() != 4 || filter.rank() != 4) {
    return ctx.Error(absl::StrCat("input must be NHWC and filter HWIO (rank 4), got input ",
                                  input.DebugString(), " and filter ", filter.DebugString()));
  }
  if (input.dim(3) != filter.dim(2)) {
    return ctx.Error(absl::StrCat("input channels ", input.dim(3),
                                  " differ from filter in-channels ", filter.dim(2), " (input ",
                                  input.DebugString(), ", filter ", filter.DebugString(), ")"));
  }
  if (filter.dim(0) < 1 || filter.dim(1) < 1) {
    return ctx.Error(
        absl::StrCat("filter height and width must be positive, got ", filter.DebugString()));
  }
  ConvGeometry g{input.dim(0),
                 input.dim(1),
                 input.dim(2),
                 input.dim(3),
                 filter.dim(0),
                 filter.dim(1),
                 filter.dim(3),
                 0,
                 0,
                 {},
                 {},
                 attrs};
  TANDEM_RETURN_IF_ERROR(SetWindows(ctx, g.kh, g.kw, attrs.second_h, attrs.second_w, &filter, &g));
  return g;
}

absl::Status CheckOutBackprop(const OpKernelContext& ctx, const ConvGeometry& g,
                              const Tensor& out_backprop) {
  if (out_backprop.shape() == g.output_shape()) return absl::OkStatus();
  return ctx.Error(absl::StrCat("out_backprop has shape ", out_backprop.shape().DebugString(),
                                " but the convolution of ", g.input_shape().DebugString(), " by ",
                                g.filter_shape().DebugString(), " gives ",
                                g.output_shape().DebugString()));
}

absl::StatusOr<PoolGeometry> PoolGeometry::Make(const OpKernelContext& ctx,
                                                const WindowAttrs& attrs,
                                                const TensorShape& input) {
  if (input.rank() != 4) {
    return ctx.Error(absl::StrCat("input must be NHWC (rank 4), got ", input.DebugString()));
  }
  PoolGeometry g{input.dim(0), input.dim(1), input.dim(2), input.dim(3), 0, 0, {}, {}, attrs};
  TANDEM_RETURN_IF_ERROR(SetWindows(ctx, attrs.second_h, attrs.second_w, 1, 1, nullptr, &g));
  return g;
}

absl::Status ExpectPooledShape(const OpKernelContext& ctx, const PoolGeometry& g,
                               std::initializer_list<int> orig_output_and_grad) {
  for (int i : orig_output_and_grad) {
    if (ctx.input(i).shape() != g.output_shape()) {
      return ctx.Error(absl::StrCat("orig_output and grad must have the pooled shape ",
                                    g.output_shape().DebugString(), ": ", InputShapes(ctx)));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPoolGrad(const OpKernelContext& ctx, const PoolGeometry& g, const Tensor& grad) {
  if (grad.shape() == g.output_shape()) return absl::OkStatus();
  return ctx.Error(absl::StrCat("grad has shape ", grad.shape().DebugString(), " but pooling ",
                                g.input_shape().DebugString(), " gives ",
                                g.output_shape().DebugString()));
}

absl::StatusOr<TensorShape> ShapeFromSizesInput(const OpKernelContext& ctx, int i) {
  const Tensor& t = ctx.input(i);
  if ((t.dtype() != DType::kInt32 && t.dtype() != DType::kInt64) || t.rank() != 1 ||
      t.NumElements() != 4) {
    return ctx.Error(absl::StrCat("input ", i, " must be an int32/int64 vector of 4 sizes, got ",
                                  DTypeName(t.dtype()), t.shape().DebugString()));
  }
  if (!t.on_host()) {
    return ctx.Error(absl::StrCat("input ", i, " (sizes) must be in host memory"));
  }
  std::vector<int64_t> dims;
  for (int k = 0; k < 4; ++k) dims.push_back(static_cast<int64_t>(t.ValueAsDouble(k)));
  auto shape = TensorShape::Create(dims);
  if (!shape.ok()) return ctx.Annotate(shape.status());
  return *shape;
}

}  // namespace tandem::nn

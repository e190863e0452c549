// framework/kernels/cpu/conv_kernels.cc
//
// Conv2D, Conv2DBackpropInput and Conv2DBackpropFilter on oneDNN convolution
// primitives. Activations stay in plain NHWC (wrapped without copies); filters are
// HWIO tensors, which oneDNN sees as OIHW dims in the "hwio" format tag. The weights
// layout is left to oneDNN ("any"): when it picks a blocked layout, the filter (or
// filter gradient) goes through a cached reorder each step, which costs far less than
// a convolution on plain weights. SAME padding is TensorFlow's (extra row/column at the
// end). One cached entry per shape, attrs and dtype.
//
// float32 runs in float32; bfloat16 (the mixed-precision path) runs oneDNN's bf16
// convolutions, which accumulate in float32, with every tensor (filter gradients
// included) in bfloat16. Where oneDNN has no bf16 kernels for the CPU (below AVX-512),
// the bf16 ops run in float32 on widened copies and round once at the end.
// Conv2DBackpropFilter with attr Tout = float32 writes a float32 filter gradient from
// bfloat16 operands; it runs on oneDNN's backward-weights primitive or as a forward
// convolution (conv_filter_grad.h). _FusedConv2D adds a bias and, with activation
// "relu", a ReLU post-op to the forward primitive: one pass over the output instead of
// three. Conv2DBackpropInput with stride 1 runs as the forward convolution of the
// output gradient by the flipped filter (TransposedConvShape); else, or as
// TANDEM_CONV_INPUT_GRAD=onednn asks, on oneDNN's backward-data primitive. A bfloat16
// forward convolution with few input channels runs on AMX tiles (conv_forward_amx.h).
// _Conv2DBackpropFilterOfMaxPoolGrad is Conv2DBackpropFilter of a MaxPoolGrad, which the
// remapper makes (remapper.h), as it makes the _...Argmax forms, which route by the
// pool's argmax codes.
#include <cstring>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/conv_filter_grad.h"
#include "framework/kernels/cpu/conv_forward_amx.h"
#include "framework/kernels/cpu/fused_bias.h"
#include "framework/kernels/cpu/nn_kernel_util.h"
#include "framework/kernels/cpu/onednn_util.h"
#include "framework/kernels/cpu/pool_2x2.h"
#include "framework/kernels/cpu/pool_util.h"

namespace tandem::nn {
namespace {

using dnnl::memory;
using Tag = dnnl::memory::format_tag;

// One convolution's geometry (window_geometry.h) and how oneDNN sees it.
struct ConvShape : ConvGeometry {
  // The operands' type, set by the kernel for the tensors the primitive sees (float32
  // on the widened fallback).
  memory::data_type dt = memory::data_type::f32;
  Fusion fusion;  // Of the forward primitive (_FusedConv2D); none for the gradients.

  std::string Key(absl::string_view kind) const {
    return absl::StrCat(kind, ":", static_cast<int>(dt), ",", n, ",", h, ",", w, ",", c, ",", kh,
                        ",", kw, ",", o, ",", attrs.stride_h, ",", attrs.stride_w, ",",
                        attrs.second_h, ",", attrs.second_w, ",", attrs.same, ",", fusion.bias,
                        fusion.relu, ",", dim_h.pad_before, ",", dim_h.pad_after, ",",
                        dim_w.pad_before, ",", dim_w.pad_after);
  }
  memory::desc src_md() const { return onednn::TagDesc({n, c, h, w}, Tag::nhwc, dt); }
  memory::desc dst_md() const { return onednn::TagDesc({n, o, oh, ow}, Tag::nhwc, dt); }
  memory::desc user_weights_md() const { return onednn::TagDesc({o, c, kh, kw}, Tag::hwio, dt); }
  memory::desc any_weights_md() const { return onednn::TagDesc({o, c, kh, kw}, Tag::any, dt); }
  memory::desc bias_md() const { return onednn::TagDesc({o}, Tag::a, dt); }
  memory::dims strides() const { return {attrs.stride_h, attrs.stride_w}; }
  memory::dims dilates() const { return {attrs.second_h - 1, attrs.second_w - 1}; }
  memory::dims pad_l() const { return {dim_h.pad_before, dim_w.pad_before}; }
  memory::dims pad_r() const { return {dim_h.pad_after, dim_w.pad_after}; }

  dnnl::convolution_forward::primitive_desc ForwardPd() const {
    using Desc = dnnl::convolution_forward::desc;
    const auto prop = dnnl::prop_kind::forward_training;
    const auto alg = dnnl::algorithm::convolution_direct;
    const Desc d = fusion.bias ? Desc(prop, alg, src_md(), any_weights_md(), bias_md(), dst_md(),
                                      strides(), dilates(), pad_l(), pad_r())
                               : Desc(prop, alg, src_md(), any_weights_md(), dst_md(), strides(),
                                      dilates(), pad_l(), pad_r());
    return dnnl::convolution_forward::primitive_desc(d, onednn::AttrWithRelu(fusion.relu),
                                                     onednn::CpuEngine());
  }
};

absl::StatusOr<ConvShape> MakeConvShape(const OpKernelContext& ctx, const WindowAttrs& attrs,
                                        const TensorShape& input, const TensorShape& filter) {
  TANDEM_ASSIGN_OR_RETURN(ConvGeometry g, ConvGeometry::Make(ctx, attrs, input, filter));
  return ConvShape{g};
}

// The geometry the hand-written CPU paths (conv_filter_grad.h, conv_forward_amx.h) take.
FilterGradGeometry Geometry(const ConvShape& s) {
  FilterGradGeometry g{s.n, s.h, s.w, s.c, s.kh, s.kw, s.o, s.oh, s.ow};
  g.stride_h = s.attrs.stride_h;
  g.stride_w = s.attrs.stride_w;
  g.dilation_h = s.attrs.second_h;
  g.dilation_w = s.attrs.second_w;
  g.pad_top = s.dim_h.pad_before;
  g.pad_left = s.dim_w.pad_before;
  return g;
}

// Checks that the float inputs `a` and `b` of a kernel share one dtype.
absl::Status ExpectSameFloatDType(const OpKernelContext& ctx, int a, int b) {
  TANDEM_RETURN_IF_ERROR(ExpectFloatOrBf16Input(ctx, a));
  TANDEM_RETURN_IF_ERROR(ExpectFloatOrBf16Input(ctx, b));
  if (ctx.input(a).dtype() == ctx.input(b).dtype()) return absl::OkStatus();
  return ctx.Error(absl::StrCat("inputs ", a, " and ", b,
                                " differ in dtype: ", DTypeName(ctx.input(a).dtype()), " and ",
                                DTypeName(ctx.input(b).dtype())));
}

// All-zero bits are 0.0 in float32 and bfloat16.
void Zero(Tensor* t) { std::memset(t->raw_data(), 0, t->TotalBytes()); }

using ConvKernelBase = WindowKernel<OpKernel, WindowOp::kConv>;

// What the forward and backward-data entries share: the layouts of the activations
// (plain NHWC), of the user's HWIO filter and of the primitive's weights, and the
// reorder between the two weight layouts when they differ.
struct ConvEntryBase {
  memory::desc src_md, dst_md, user_weights_md, weights_md;
  std::optional<dnnl::reorder> weights_reorder;

  void SetLayouts(const ConvShape& s, const memory::desc& primitive_weights) {
    src_md = s.src_md();
    dst_md = s.dst_md();
    user_weights_md = s.user_weights_md();
    weights_md = primitive_weights;
    weights_reorder = onednn::ReorderIfNeeded(user_weights_md, weights_md);
  }
};

// The filter in the primitive's layout: the filter's own buffer, or `scratch` holding
// its reordered copy.
const void* PrepareWeights(const ConvEntryBase& e, const Tensor& filter, Tensor* scratch) {
  return onednn::InLayout(e.weights_reorder, e.user_weights_md, filter.raw_data(), e.weights_md,
                          scratch);
}

struct ConvFwdEntry : ConvEntryBase {
  dnnl::convolution_forward prim;
  memory::desc bias_md;  // Used by _FusedConv2D only.
};

// Runs the forward convolution of `s` (its fusion included) into `out`, and with
// `pooled` its 2x2 pool, on AMX tiles (conv_forward_amx.h) where that path takes it;
// whether it did. The env's choice is checked at every call.
absl::StatusOr<bool> ForwardConvOnAmx(const OpKernelContext& ctx, const ConvShape& s,
                                      const Tensor& input, const Tensor& filter, Tensor* out,
                                      Tensor* pooled = nullptr, Tensor* argmax = nullptr) {
  const FilterGradGeometry g = Geometry(s);
  absl::StatusOr<bool> amx = ForwardConvByAmx(g);
  if (!amx.ok()) return ctx.Annotate(amx.status());
  if (!*amx || input.dtype() != DType::kBFloat16) return false;
  const Tensor bias = s.fusion.bias ? BiasAs(ctx.input(2), input.dtype()) : Tensor();
  TANDEM_RETURN_IF_ERROR(ConvForwardAmx(g, input, filter, s.fusion.bias ? &bias : nullptr,
                                        s.fusion.relu, out, pooled, argmax));
  return true;
}

// The forward convolution of `s` (its fusion included) into `out`.
absl::Status ForwardConv(const OpKernelContext& ctx, const ConvShape& s, const Tensor& input,
                         const Tensor& filter, Tensor* out) {
  TANDEM_ASSIGN_OR_RETURN(const bool done, ForwardConvOnAmx(ctx, s, input, filter, out));
  if (done) return absl::OkStatus();
  TANDEM_ASSIGN_OR_RETURN(auto e, onednn::Cached<ConvFwdEntry>(ctx, s.Key("conv_fwd"), [&] {
                            ConvFwdEntry e;
                            auto pd = s.ForwardPd();
                            e.prim = dnnl::convolution_forward(pd);
                            e.SetLayouts(s, pd.weights_desc());
                            e.bias_md = s.bias_md();
                            return e;
                          }));
  return onednn::Guard(ctx, [&]() {
    Tensor scratch;
    const void* weights = PrepareWeights(*e, filter, &scratch);
    if (!s.fusion.bias) {
      onednn::ExecuteCached(e->prim, {{DNNL_ARG_SRC, e->src_md, input.raw_data()},
                                      {DNNL_ARG_WEIGHTS, e->weights_md, weights},
                                      {DNNL_ARG_DST, e->dst_md, out->raw_data()}});
      return absl::OkStatus();
    }
    const Tensor bias = BiasAs(ctx.input(2), input.dtype());
    onednn::ExecuteCached(e->prim, {{DNNL_ARG_SRC, e->src_md, input.raw_data()},
                                    {DNNL_ARG_WEIGHTS, e->weights_md, weights},
                                    {DNNL_ARG_BIAS, e->bias_md, bias.raw_data()},
                                    {DNNL_ARG_DST, e->dst_md, out->raw_data()}});
    return absl::OkStatus();
  });
}

// The output of Conv2D (and _FusedConv2D's bias and activation, s.fusion) of inputs 0
// and 1 into `out`, on the widened copies where oneDNN has no bfloat16 kernels.
absl::Status Convolve(const OpKernelContext& ctx, ConvShape s, Tensor* out) {
  if (s.empty()) {
    Zero(out);
    if (s.fusion.bias) FillWithBias(ctx.input(2), s.fusion.relu, out);
    return absl::OkStatus();
  }
  return onednn::RunWidenedIfNeeded(ctx.input(0), ctx.input(1), out,
                                    [&](const Tensor& x, const Tensor& f, Tensor* y) {
                                      s.dt = onednn::DataType(x.dtype());
                                      return ForwardConv(ctx, s, x, f, y);
                                    });
}

// Conv2D(input, filter), and _FusedConv2D(input, filter, bias) with attr activation.
class Conv2DKernel : public ConvKernelBase {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_RETURN_IF_ERROR(ConvKernelBase::Init(node));
    TANDEM_ASSIGN_OR_RETURN(fusion_, ParseFusion(node, "_FusedConv2D"));
    return absl::OkStatus();
  }

  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_ASSIGN_OR_RETURN(ConvShape s, Shape(ctx));
    return Convolve(ctx, s, ctx.allocate_output(0, s.output_shape()));
  }

 protected:
  // The convolution of the inputs, with the node's fusion; checks dtypes and the bias.
  absl::StatusOr<ConvShape> Shape(const OpKernelContext& ctx) const {
    TANDEM_RETURN_IF_ERROR(ExpectSameFloatDType(ctx, 0, 1));
    TANDEM_ASSIGN_OR_RETURN(ConvShape s,
                            MakeConvShape(ctx, attrs_, ctx.input(0).shape(), ctx.input(1).shape()));
    s.fusion = fusion_;
    if (fusion_.bias) TANDEM_RETURN_IF_ERROR(CheckBias(ctx, s.o));
    return s;
  }

  Fusion fusion_;
};

// _FusedConv2DWithMaxPool(input, filter, bias): _FusedConv2D's output (0) and its max
// pool (1), the pool's window in attrs pool_ksize, pool_strides and pool_padding
// (remapper.h). Where the AMX forward takes the layer (conv_forward_amx.h) and the pool
// is 2x2 of stride 2 inside its input, each image is pooled as it leaves the tiles,
// while it is in cache; else the pool runs after the convolution. Either way the bits
// are the two ops'. _FusedConv2DWithMaxPoolArgmax: the pool (0) and its argmax codes (1,
// uint8: MaxPoolArgmaxInto), for 2x2 windows of stride 2 only; the convolution's output
// is not kept (on the AMX forward, each image lives in a thread's scratch).
class FusedConv2DWithMaxPoolKernel : public Conv2DKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_RETURN_IF_ERROR(ConvKernelBase::Init(node));
    TANDEM_ASSIGN_OR_RETURN(fusion_, ParseFusion(node, node.op()));
    TANDEM_ASSIGN_OR_RETURN(pool_, ParseWindowAttrs(node, "pool_ksize", "pool_"));
    argmax_ = node.op() == "_FusedConv2DWithMaxPoolArgmax";
    return absl::OkStatus();
  }

  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_ASSIGN_OR_RETURN(ConvShape s, Shape(ctx));
    TANDEM_ASSIGN_OR_RETURN(PoolGeometry p, PoolGeometry::Make(ctx, pool_, s.output_shape()));
    if (argmax_ && !PoolsByArgmax(p)) {
      return ctx.Error("the argmax is kept for 2x2 windows of stride 2 only");
    }
    Tensor conv;  // The convolution's output where the op does not return it.
    Tensor* out = argmax_ ? nullptr : ctx.allocate_output(0, s.output_shape());
    Tensor* pooled = ctx.allocate_output(argmax_ ? 0 : 1, p.output_shape());
    Tensor* argmax = argmax_ ? ctx.allocate_output(1, p.output_shape()) : nullptr;
    if (!s.empty() && IsFull2x2(p)) {
      TANDEM_ASSIGN_OR_RETURN(const bool done, ForwardConvOnAmx(ctx, s, ctx.input(0), ctx.input(1),
                                                                out, pooled, argmax));
      if (done) return absl::OkStatus();
    }
    if (out == nullptr) {
      conv = Tensor(ctx.input(0).dtype(), s.output_shape());
      out = &conv;
    }
    TANDEM_RETURN_IF_ERROR(Convolve(ctx, s, out));
    if (argmax != nullptr) {
      MaxPoolArgmaxInto(p, *out, pooled, argmax);
    } else {
      MaxPoolInto(p, *out, pooled);
    }
    return absl::OkStatus();
  }

 private:
  WindowAttrs pool_;
  bool argmax_ = false;
};

struct ConvBwdDataEntry : ConvEntryBase {
  dnnl::convolution_backward_data prim;
};

// With stride 1, the input gradient is a forward convolution. From
//   dX[b, y, x, c] = sum over taps (i, j) and o of
//                    dY[b, y + pad_top - i*dh, x + pad_left - j*dw, o] * W[i, j, c, o],
// with i' = kh-1-i and j' = kw-1-j it is the convolution of dY, padded by
// (kh-1)*dh - pad_top rows above (and h - oh + pad_top below), by the filter flipped
// in both spatial axes with its in- and out-channels swapped. The shape of that
// convolution, or none where the stride is not 1.
std::optional<ConvShape> TransposedConvShape(const ConvShape& s) {
  if (s.attrs.stride_h != 1 || s.attrs.stride_w != 1) return std::nullopt;
  ConvShape t = s;
  t.h = s.oh;
  t.w = s.ow;
  t.c = s.o;
  t.o = s.c;
  t.oh = s.h;
  t.ow = s.w;
  t.dim_h = {s.h, (s.kh - 1) * s.attrs.second_h - s.dim_h.pad_before,
             s.h - s.oh + s.dim_h.pad_before};
  t.dim_w = {s.w, (s.kw - 1) * s.attrs.second_w - s.dim_w.pad_before,
             s.w - s.ow + s.dim_w.pad_before};
  t.fusion = Fusion{};
  if (t.dim_h.pad_before < 0 || t.dim_h.pad_after < 0 || t.dim_w.pad_before < 0 ||
      t.dim_w.pad_after < 0) {
    return std::nullopt;
  }
  return t;
}

// `w` [kh, kw, c, o] flipped in both spatial axes, c and o swapped: [kh, kw, o, c].
template <typename T>
Tensor FlippedTransposedFilter(const Tensor& w) {
  const int64_t kh = w.dim(0), kw = w.dim(1), c = w.dim(2), o = w.dim(3);
  Tensor f(w.dtype(), TensorShape({kh, kw, o, c}));
  const T* src = w.data<T>();
  T* dst = f.data<T>();
  for (int64_t i = 0; i < kh; ++i) {
    for (int64_t j = 0; j < kw; ++j) {
      const T* tap = src + ((kh - 1 - i) * kw + (kw - 1 - j)) * c * o;
      T* out = dst + (i * kw + j) * o * c;
      for (int64_t ch = 0; ch < c; ++ch) {
        for (int64_t oc = 0; oc < o; ++oc) out[oc * c + ch] = tap[ch * o + oc];
      }
    }
  }
  return f;
}

// Whether Conv2DBackpropInput runs as the forward convolution above where it applies:
// by default, or as TANDEM_CONV_INPUT_GRAD=onednn|forward says; an unknown value is an
// error. Measured on an AMX Xeon (fashion_cnn's 32-to-64-channel 5x5 layer, 128 images,
// 2 threads, steps alternating the two): bfloat16 2.47 and 3.43 ms against 2.74 and
// 3.92 ms in oneDNN's backward-data kernel, float32 8.0 and 9.3 against 9.0 and 10.9;
// float32 on AVX2 within 2% either way.
absl::StatusOr<bool> InputGradByForwardConv() {
  TANDEM_ASSIGN_OR_RETURN(const std::string choice,
                          KernelChoiceFromEnv("TANDEM_CONV_INPUT_GRAD", {"onednn", "forward"}));
  return choice != "onednn";
}

// Conv2DBackpropInput(input_sizes, filter, out_backprop).
class Conv2DBackpropInputKernel : public ConvKernelBase {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_RETURN_IF_ERROR(ExpectSameFloatDType(ctx, 1, 2));
    TANDEM_ASSIGN_OR_RETURN(TensorShape input_shape, ShapeFromSizesInput(ctx, 0));
    const Tensor& filter = ctx.input(1);
    const Tensor& grad = ctx.input(2);
    TANDEM_ASSIGN_OR_RETURN(ConvShape s, MakeConvShape(ctx, attrs_, input_shape, filter.shape()));
    TANDEM_RETURN_IF_ERROR(CheckOutBackprop(ctx, s, grad));
    Tensor* out = ctx.allocate_output(0, input_shape);
    if (s.empty()) {
      Zero(out);
      return absl::OkStatus();
    }
    return onednn::RunWidenedIfNeeded(filter, grad, out,
                                      [&](const Tensor& f, const Tensor& g, Tensor* dx) {
                                        s.dt = onednn::DataType(f.dtype());
                                        return BackwardData(ctx, s, f, g, dx);
                                      });
  }

 private:
  static absl::Status BackwardData(const OpKernelContext& ctx, const ConvShape& s,
                                   const Tensor& filter, const Tensor& grad, Tensor* out) {
    absl::StatusOr<bool> by_forward = InputGradByForwardConv();
    if (!by_forward.ok()) return ctx.Annotate(by_forward.status());
    if (std::optional<ConvShape> t = TransposedConvShape(s); *by_forward && t.has_value()) {
      const Tensor flipped = filter.dtype() == DType::kFloat
                                 ? FlippedTransposedFilter<float>(filter)
                                 : FlippedTransposedFilter<bfloat16>(filter);
      return ForwardConv(ctx, *t, grad, flipped, out);
    }
    TANDEM_ASSIGN_OR_RETURN(
        auto e, onednn::Cached<ConvBwdDataEntry>(ctx, s.Key("conv_bwd_data"), [&] {
          ConvBwdDataEntry e;
          dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, s.src_md(),
                                                  s.any_weights_md(), s.dst_md(), s.strides(),
                                                  s.dilates(), s.pad_l(), s.pad_r());
          dnnl::convolution_backward_data::primitive_desc pd(d, onednn::Attr(), onednn::CpuEngine(),
                                                             s.ForwardPd());
          e.prim = dnnl::convolution_backward_data(pd);
          e.SetLayouts(s, pd.weights_desc());
          return e;
        }));
    return onednn::Guard(ctx, [&]() {
      Tensor scratch;
      const void* weights = PrepareWeights(*e, filter, &scratch);
      onednn::ExecuteCached(e->prim, {{DNNL_ARG_DIFF_DST, e->dst_md, grad.raw_data()},
                                      {DNNL_ARG_WEIGHTS, e->weights_md, weights},
                                      {DNNL_ARG_DIFF_SRC, e->src_md, out->raw_data()}});
      return absl::OkStatus();
    });
  }
};

struct ConvBwdWeightsEntry {
  dnnl::convolution_backward_weights prim;
  memory::desc src_md, dst_md, user_weights_md, diff_weights_md;
  std::optional<dnnl::reorder> to_user;  // blocked diff_weights -> HWIO
};

absl::Status BackwardWeights(const OpKernelContext& ctx, const ConvShape& s, const Tensor& input,
                             const Tensor& grad, Tensor* out) {
  const FilterGradGeometry g = Geometry(s);
  absl::StatusOr<FilterGradPath> path = FilterGradPathFor(g, input.dtype());
  if (!path.ok()) return ctx.Annotate(path.status());
  if (*path == FilterGradPath::kForwardConv) {
    return FilterGradByForwardConv(ctx, g, input, grad, out);
  }
  if (*path == FilterGradPath::kDirect) return FilterGradDirect(g, input, grad, out);
  if (*path == FilterGradPath::kAmxPositions) return FilterGradAmx(g, input, grad, out);
  if (*path == FilterGradPath::kAmxImages) return FilterGradAmxByImages(g, input, grad, out);
  if (*path == FilterGradPath::kAmxUnfolded) return FilterGradAmxUnfolded(g, input, grad, out);
  ConvShape w = s;  // The filter gradient's layouts, in the output's dtype.
  w.dt = onednn::DataType(out->dtype());
  const std::string key = absl::StrCat(s.Key("conv_bwd_weights"), ",", static_cast<int>(w.dt));
  TANDEM_ASSIGN_OR_RETURN(auto e, onednn::Cached<ConvBwdWeightsEntry>(ctx, key, [&] {
                            ConvBwdWeightsEntry e;
                            dnnl::convolution_backward_weights::desc d(
                                dnnl::algorithm::convolution_direct, s.src_md(), w.any_weights_md(),
                                s.dst_md(), s.strides(), s.dilates(), s.pad_l(), s.pad_r());
                            dnnl::convolution_backward_weights::primitive_desc pd(
                                d, onednn::Attr(), onednn::CpuEngine(), s.ForwardPd());
                            e.prim = dnnl::convolution_backward_weights(pd);
                            e.src_md = s.src_md();
                            e.dst_md = s.dst_md();
                            e.user_weights_md = w.user_weights_md();
                            e.diff_weights_md = pd.diff_weights_desc();
                            e.to_user =
                                onednn::ReorderIfNeeded(e.diff_weights_md, w.user_weights_md());
                            return e;
                          }));
  return onednn::Guard(ctx, [&]() {
    Tensor scratch;
    void* diff_weights = out->raw_data();
    if (e->to_user) {
      scratch = onednn::ScratchFor(e->diff_weights_md);
      diff_weights = scratch.raw_data();
    }
    onednn::ExecuteCached(e->prim, {{DNNL_ARG_SRC, e->src_md, input.raw_data()},
                                    {DNNL_ARG_DIFF_DST, e->dst_md, grad.raw_data()},
                                    {DNNL_ARG_DIFF_WEIGHTS, e->diff_weights_md, diff_weights}});
    if (e->to_user) {
      onednn::ExecuteCached(*e->to_user, {{DNNL_ARG_FROM, e->diff_weights_md, diff_weights},
                                          {DNNL_ARG_TO, e->user_weights_md, out->raw_data()}});
    }
    return absl::OkStatus();
  });
}

// The filter gradient of `s` for `input` and output gradient `grad` into `out`, on the
// widened copies where oneDNN has no bfloat16 kernels.
absl::Status FilterGradOf(const OpKernelContext& ctx, ConvShape s, const Tensor& input,
                          const Tensor& grad, Tensor* out) {
  return onednn::RunWidenedIfNeeded(input, grad, out,
                                    [&](const Tensor& x, const Tensor& g, Tensor* df) {
                                      s.dt = onednn::DataType(x.dtype());
                                      return BackwardWeights(ctx, s, x, g, df);
                                    });
}

// Conv2DBackpropFilter(input, filter_sizes, out_backprop).
class Conv2DBackpropFilterKernel : public ConvKernelBase {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_RETURN_IF_ERROR(ExpectSameFloatDType(ctx, 0, 2));
    const Tensor& input = ctx.input(0);
    TANDEM_ASSIGN_OR_RETURN(TensorShape filter_shape, ShapeFromSizesInput(ctx, 1));
    const Tensor& grad = ctx.input(2);
    TANDEM_ASSIGN_OR_RETURN(ConvShape s, MakeConvShape(ctx, attrs_, input.shape(), filter_shape));
    TANDEM_RETURN_IF_ERROR(CheckOutBackprop(ctx, s, grad));
    Tensor* out = ctx.allocate_output(0, filter_shape);
    if (s.empty()) {
      Zero(out);
      return absl::OkStatus();
    }
    return FilterGradOf(ctx, s, input, grad, out);
  }
};

// TANDEM_POOL_GRAD_ROUTING: per_image (unset: the default) or whole, which writes the
// routed gradient whole first wherever (to time the two in one process).
absl::StatusOr<bool> RoutesPerImage() {
  TANDEM_ASSIGN_OR_RETURN(const std::string choice,
                          KernelChoiceFromEnv("TANDEM_POOL_GRAD_ROUTING", {"per_image", "whole"}));
  return choice != "whole";
}

// _Conv2DBackpropFilterOfMaxPoolGrad(input, filter_sizes, orig_input, orig_output, grad):
// Conv2DBackpropFilter(input, filter_sizes, MaxPoolGrad(orig_input, orig_output, grad)),
// the pool's window in attrs pool_ksize, pool_strides and pool_padding (remapper.h).
// _Conv2DBackpropFilterOfMaxPoolArgmax(input, filter_sizes, argmax, grad): the same with
// the pool's argmax codes (MaxPoolArgmaxInto) in place of orig_input and orig_output,
// for 2x2 windows of stride 2 only.
// Where the unfolded AMX path takes the layer (conv_filter_grad.h) and the pool is 2x2 of
// stride 2 inside its input, each image's routed gradient is made as the path reads it
// (FilterGradAmxUnfoldedOfMaxPool[Argmax]), never written whole; else the routed
// gradient is written (MaxPoolGradInto, MaxPoolGradByArgmaxInto) and goes through
// Conv2DBackpropFilter's paths, as TANDEM_POOL_GRAD_ROUTING=whole asks everywhere.
// Either way the bits are the two ops'. On the AMX Xeon (fashion_cnn, bfloat16, 2
// threads, alternated in one process) the first layer's took 0.82 and 1.02 ms per image
// against 1.05 and 1.19 ms whole.
class Conv2DBackpropFilterOfMaxPoolGradKernel : public ConvKernelBase {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_RETURN_IF_ERROR(ConvKernelBase::Init(node));
    TANDEM_ASSIGN_OR_RETURN(pool_, ParseWindowAttrs(node, "pool_ksize", "pool_"));
    argmax_ = node.op() == "_Conv2DBackpropFilterOfMaxPoolArgmax";
    return absl::OkStatus();
  }

  absl::Status Compute(OpKernelContext& ctx) override {
    // Inputs: the pool's input (or codes) and its gradient.
    const int pool_input_at = 2, grad_at = argmax_ ? 3 : 4;
    TANDEM_RETURN_IF_ERROR(ExpectSameFloatDType(ctx, 0, grad_at));
    if (!argmax_) {
      for (int i : {2, 3}) TANDEM_RETURN_IF_ERROR(ExpectSameFloatDType(ctx, 0, i));
    }
    const Tensor& input = ctx.input(0);
    TANDEM_ASSIGN_OR_RETURN(TensorShape filter_shape, ShapeFromSizesInput(ctx, 1));
    const Tensor& pool_input = ctx.input(pool_input_at);
    const Tensor& pool_grad = ctx.input(grad_at);
    TANDEM_ASSIGN_OR_RETURN(ConvShape s, MakeConvShape(ctx, attrs_, input.shape(), filter_shape));
    TANDEM_ASSIGN_OR_RETURN(PoolGeometry p, PoolGeometry::Make(ctx, pool_, s.output_shape()));
    if (argmax_) {
      TANDEM_RETURN_IF_ERROR(CheckCodes(ctx, p, pool_input));
      TANDEM_RETURN_IF_ERROR(ExpectPooledShape(ctx, p, {grad_at}));
    } else {
      TANDEM_RETURN_IF_ERROR(CheckOutBackprop(ctx, s, pool_input));
      TANDEM_RETURN_IF_ERROR(ExpectPooledShape(ctx, p, {3, 4}));
    }
    Tensor* out = ctx.allocate_output(0, filter_shape);
    if (s.empty()) {
      Zero(out);
      return absl::OkStatus();
    }
    absl::StatusOr<bool> per_image = RoutesPerImage();
    if (!per_image.ok()) return ctx.Annotate(per_image.status());
    if (*per_image && input.dtype() == DType::kBFloat16 && IsFull2x2(p)) {
      const FilterGradGeometry g = Geometry(s);
      absl::StatusOr<FilterGradPath> path = FilterGradPathFor(g, input.dtype());
      if (!path.ok()) return ctx.Annotate(path.status());
      if (*path == FilterGradPath::kAmxUnfolded) {
        return argmax_ ? FilterGradAmxUnfoldedOfMaxPoolArgmax(g, input, pool_input, pool_grad, out)
                       : FilterGradAmxUnfoldedOfMaxPool(g, input, pool_input, pool_grad, out);
      }
    }
    Tensor routed(pool_grad.dtype(), s.output_shape());
    if (argmax_) {
      MaxPoolGradByArgmaxInto(p, pool_input, pool_grad, &routed);
    } else {
      MaxPoolGradInto(p, pool_input, pool_grad, &routed);
    }
    return FilterGradOf(ctx, s, input, routed, out);
  }

 private:
  // An error naming the node unless `codes` are uint8 codes of p's pooled shape, for
  // windows MaxPoolArgmaxInto takes.
  static absl::Status CheckCodes(const OpKernelContext& ctx, const PoolGeometry& p,
                                 const Tensor& codes) {
    if (!PoolsByArgmax(p)) return ctx.Error("the argmax routes 2x2 windows of stride 2 only");
    if (codes.dtype() != DType::kUInt8 || codes.shape() != p.output_shape()) {
      return ctx.Error(absl::StrCat("argmax must be uint8 of the pool's shape ",
                                    p.output_shape().DebugString(), ", not ",
                                    DTypeName(codes.dtype()), codes.shape().DebugString()));
    }
    return absl::OkStatus();
  }

  WindowAttrs pool_;
  bool argmax_ = false;
};

}  // namespace

void RegisterCpuConvKernels(KernelRegistry* r) {
  r->Register<Conv2DKernel>("Conv2D", kDeviceCpu);
  r->Register<Conv2DKernel>("_FusedConv2D", kDeviceCpu);
  r->Register<FusedConv2DWithMaxPoolKernel>("_FusedConv2DWithMaxPool", kDeviceCpu);
  r->Register<FusedConv2DWithMaxPoolKernel>("_FusedConv2DWithMaxPoolArgmax", kDeviceCpu);
  r->Register<Conv2DBackpropInputKernel>("Conv2DBackpropInput", kDeviceCpu);
  r->Register<Conv2DBackpropFilterKernel>("Conv2DBackpropFilter", kDeviceCpu);
  r->Register<Conv2DBackpropFilterOfMaxPoolGradKernel>("_Conv2DBackpropFilterOfMaxPoolGrad",
                                                       kDeviceCpu);
  r->Register<Conv2DBackpropFilterOfMaxPoolGradKernel>("_Conv2DBackpropFilterOfMaxPoolArgmax",
                                                       kDeviceCpu);
}

}  // namespace tandem::nn

// framework/ops/nn_ops.cc
//
// Op definitions (with shape inference) and builders for the neural-network ops of
// nn_ops.h, plus MatMul (declared in math_ops.h). Semantics and attr names follow
// TensorFlow. Convolution and pooling are NHWC only ("data_format" other than "NHWC" is
// an error at graph-building time); filters are HWIO.
//
// FusedBatchNorm's outputs 3 and 4 are (saved_mean, saved_inv_std) = (mean used,
// 1/sqrt(variance used + epsilon)); FusedBatchNormGrad takes them in that form.
#include "framework/ops/nn_ops.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/random.h"
#include "framework/core/status.h"
#include "framework/ops/internal/build.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/standard_ops.h"

namespace tandem::ops {
namespace {

using ::tandem::ops::internal::Build;
using ::tandem::ops::internal::BuildNode;

// ---------------------------------------------------------------------------------------
// Inference helpers.

absl::Status ExpectFloat(const InferenceContext& ctx, int i) {
  if (IsFloating(ctx.input_dtype(i))) return absl::OkStatus();
  return ctx.Error(absl::StrCat("input ", i, " must be a floating-point tensor, got ",
                                DTypeName(ctx.input_dtype(i))));
}

// Checks every input in [0, n) is floating point and all share input 0's dtype.
absl::Status ExpectFloats(const InferenceContext& ctx, int n) {
  for (int i = 0; i < n; ++i) {
    TANDEM_RETURN_IF_ERROR(ExpectFloat(ctx, i));
    if (i > 0) TANDEM_RETURN_IF_ERROR(ctx.ExpectSameDType(0, i));
  }
  return absl::OkStatus();
}

absl::Status ExpectMinRank(const InferenceContext& ctx, int i, int rank) {
  const PartialShape& s = ctx.input_shape(i);
  if (!s.known_rank() || s.rank() >= rank) return absl::OkStatus();
  return ctx.Error(
      absl::StrCat("input ", i, " must have rank >= ", rank, ", has shape ", s.DebugString()));
}

// Dim `d` of input i, or -1 when unknown (negative d counts from the end).
int64_t DimOf(const InferenceContext& ctx, int i, int d) {
  const PartialShape& s = ctx.input_shape(i);
  if (!s.known_rank()) return -1;
  if (d < 0) d += s.rank();
  if (d < 0 || d >= s.rank()) return -1;
  return s.dim(d);
}

// Checks two (possibly unknown) dims agree.
absl::Status ExpectDimsEqual(const InferenceContext& ctx, int64_t a, int64_t b,
                             absl::string_view what) {
  if (a < 0 || b < 0 || a == b) return absl::OkStatus();
  return ctx.Error(absl::StrCat(what, " differ: ", a, " vs ", b));
}

absl::Status UnchangedFloat(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectFloats(ctx, ctx.num_inputs()));
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.input_shape(0).IsCompatibleWith(ctx.input_shape(i))) {
      return ctx.Error(absl::StrCat("input shapes differ: ", ctx.input_shape(0).DebugString(),
                                    " vs ", ctx.input_shape(i).DebugString()));
    }
  }
  auto merged = ctx.input_shape(0);
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    auto m = merged.Merge(ctx.input_shape(i));
    if (m.ok()) merged = *m;
  }
  ctx.AddOutput(ctx.input_dtype(0), merged);
  return absl::OkStatus();
}

// The spatial geometry of a window op along one dimension: TensorFlow's rules.
struct WindowDim {
  int64_t out = -1;
  int64_t pad_before = 0;
};

absl::StatusOr<WindowDim> ComputeWindowDim(const InferenceContext& ctx, int64_t in, int64_t k,
                                           int64_t stride, int64_t dilation, bool same) {
  WindowDim w;
  if (in < 0 || k < 0) return w;
  const int64_t eff = (k - 1) * dilation + 1;
  if (same) {
    w.out = (in + stride - 1) / stride;
    const int64_t total = std::max<int64_t>((w.out - 1) * stride + eff - in, 0);
    w.pad_before = total / 2;
  } else {
    if (in < eff) {
      return ctx.Error(absl::StrCat("window of effective size ", eff,
                                    " is larger than the input dimension ", in,
                                    " with VALID padding"));
    }
    w.out = (in - eff) / stride + 1;
  }
  return w;
}

// Parsed "strides", "dilations"/"ksize", "padding" and "data_format" attrs.
struct WindowAttrs {
  std::vector<int64_t> strides;
  std::vector<int64_t> second;  // dilations (conv) or ksize (pool)
  bool same = false;
};

absl::StatusOr<std::vector<int64_t>> FourInts(const InferenceContext& ctx, absl::string_view name) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> v, ctx.GetAttr<std::vector<int64_t>>(name));
  if (v.size() != 4 || v[0] != 1 || v[3] != 1 || v[1] < 1 || v[2] < 1) {
    return ctx.Error(absl::StrCat("attr '", name, "' must be 4 positive ints [1, h, w, 1], got [",
                                  absl::StrJoin(v, ","), "]"));
  }
  return v;
}

// `second`, prefix + "strides" and prefix + "padding" (a fused op's second window has a
// prefix), and data_format.
absl::StatusOr<WindowAttrs> ParseWindowAttrs(const InferenceContext& ctx, absl::string_view second,
                                             absl::string_view prefix = "") {
  WindowAttrs a;
  TANDEM_ASSIGN_OR_RETURN(a.strides, FourInts(ctx, absl::StrCat(prefix, "strides")));
  TANDEM_ASSIGN_OR_RETURN(a.second, FourInts(ctx, second));
  TANDEM_ASSIGN_OR_RETURN(std::string padding,
                          ctx.GetAttr<std::string>(absl::StrCat(prefix, "padding")));
  if (padding != "SAME" && padding != "VALID") {
    return ctx.Error(absl::StrCat("padding must be SAME or VALID, got '", padding, "'"));
  }
  a.same = padding == "SAME";
  TANDEM_ASSIGN_OR_RETURN(std::string format, ctx.GetAttr<std::string>("data_format"));
  if (format != "NHWC") {
    return ctx.Error(absl::StrCat("only data_format NHWC is supported, got '", format, "'"));
  }
  return a;
}

// Output shape [N, OH, OW, C] of a conv/pool over input `in` (rank 4 or unknown).
absl::StatusOr<PartialShape> WindowOutput(const InferenceContext& ctx, const PartialShape& in,
                                          int64_t kh, int64_t kw, int64_t out_channels,
                                          const WindowAttrs& a, bool conv) {
  if (!in.known_rank()) return PartialShape({-1, -1, -1, out_channels});
  const int64_t dh = conv ? a.second[1] : 1, dw = conv ? a.second[2] : 1;
  TANDEM_ASSIGN_OR_RETURN(WindowDim h,
                          ComputeWindowDim(ctx, in.dim(1), kh, a.strides[1], dh, a.same));
  TANDEM_ASSIGN_OR_RETURN(WindowDim w,
                          ComputeWindowDim(ctx, in.dim(2), kw, a.strides[2], dw, a.same));
  return PartialShape({in.dim(0), h.out, w.out, out_channels});
}

// A shape given as the value of an int32/int64 vector input (e.g. input_sizes), when it
// is a constant; else rank-`rank` unknown.
absl::StatusOr<PartialShape> ShapeFromInput(const InferenceContext& ctx, int i, int rank) {
  if (!IsInteger(ctx.input_dtype(i)) || ctx.input_dtype(i) == DType::kUInt8) {
    return ctx.Error(absl::StrCat("input ", i, " must be an int32 or int64 shape vector"));
  }
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(i, 1));
  const Tensor* t = ctx.input_constant(i);
  if (t == nullptr) return PartialShape::Unknown(rank);
  if (t->NumElements() != rank) {
    return ctx.Error(
        absl::StrCat("input ", i, " must hold ", rank, " sizes, has ", t->NumElements()));
  }
  std::vector<int64_t> dims;
  for (int64_t k = 0; k < rank; ++k) {
    int64_t v = static_cast<int64_t>(t->ValueAsDouble(k));
    if (v < 0) return ctx.Error(absl::StrCat("input ", i, " holds a negative size ", v));
    dims.push_back(v);
  }
  return PartialShape(absl::MakeConstSpan(dims));
}

// ---------------------------------------------------------------------------------------
// Inference functions.

// The output dtype of MatMul and Conv2DBackpropFilter: the inputs', or the optional
// attr "Tout" = float32 for bfloat16 inputs (the mixed-precision rewrite's weight
// gradients, accumulated in float32 and never rounded to bfloat16).
absl::StatusOr<DType> OutputDType(const InferenceContext& ctx, DType in) {
  const DType out = GetAttrOr<DType>(ctx.attrs(), "Tout", in);
  if (out == in || (in == DType::kBFloat16 && out == DType::kFloat)) return out;
  return ctx.Error(absl::StrCat("Tout ", DTypeName(out), " is not allowed for ", DTypeName(in),
                                " inputs (only float32 from bfloat16)"));
}

absl::Status MatMulInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectFloats(ctx, 2));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(0, 2));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(1, 2));
  TANDEM_ASSIGN_OR_RETURN(bool ta, ctx.GetAttr<bool>("transpose_a"));
  TANDEM_ASSIGN_OR_RETURN(bool tb, ctx.GetAttr<bool>("transpose_b"));
  const int64_t m = DimOf(ctx, 0, ta ? 1 : 0), k1 = DimOf(ctx, 0, ta ? 0 : 1);
  const int64_t k2 = DimOf(ctx, 1, tb ? 1 : 0), n = DimOf(ctx, 1, tb ? 0 : 1);
  if (k1 >= 0 && k2 >= 0 && k1 != k2) {
    return ctx.Error(absl::StrCat(
        "inner dimensions differ: ", k1, " vs ", k2, " (", ctx.input_shape(0).DebugString(), " x ",
        ctx.input_shape(1).DebugString(), ", transpose_a=", ta, ", transpose_b=", tb, ")"));
  }
  TANDEM_ASSIGN_OR_RETURN(DType out, OutputDType(ctx, ctx.input_dtype(0)));
  ctx.AddOutput(out, PartialShape({m, n}));
  return absl::OkStatus();
}

absl::Status BiasAddInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectFloats(ctx, 2));
  TANDEM_RETURN_IF_ERROR(ExpectMinRank(ctx, 0, 1));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(1, 1));
  TANDEM_ASSIGN_OR_RETURN(std::string format, ctx.GetAttr<std::string>("data_format"));
  if (format != "NHWC") {
    return ctx.Error(absl::StrCat("only data_format NHWC is supported, got '", format, "'"));
  }
  TANDEM_RETURN_IF_ERROR(
      ExpectDimsEqual(ctx, DimOf(ctx, 0, -1), DimOf(ctx, 1, 0), "last dimension and bias size"));
  PartialShape out = ctx.input_shape(0);
  if (out.known_rank() && out.dim(out.rank() - 1) < 0 && DimOf(ctx, 1, 0) >= 0) {
    Dims d = out.dims();
    d.back() = DimOf(ctx, 1, 0);
    out = PartialShape(absl::MakeConstSpan(d));
  }
  ctx.AddOutput(ctx.input_dtype(0), out);
  return absl::OkStatus();
}

absl::Status BiasAddGradInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectFloats(ctx, 1));
  TANDEM_RETURN_IF_ERROR(ExpectMinRank(ctx, 0, 1));
  ctx.AddOutput(ctx.input_dtype(0), PartialShape({DimOf(ctx, 0, -1)}));
  return absl::OkStatus();
}

absl::Status SoftmaxInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectFloats(ctx, 1));
  TANDEM_RETURN_IF_ERROR(ExpectMinRank(ctx, 0, 1));
  ctx.AddOutput(ctx.input_dtype(0), ctx.input_shape(0));
  return absl::OkStatus();
}

absl::Status SparseXentInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectFloats(ctx, 1));
  if (ctx.input_dtype(1) != DType::kInt32 && ctx.input_dtype(1) != DType::kInt64) {
    return ctx.Error(
        absl::StrCat("labels must be int32 or int64, got ", DTypeName(ctx.input_dtype(1))));
  }
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(0, 2));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(1, 1));
  int64_t batch = DimOf(ctx, 0, 0);
  TANDEM_RETURN_IF_ERROR(ExpectDimsEqual(ctx, batch, DimOf(ctx, 1, 0), "batch sizes"));
  if (batch < 0) batch = DimOf(ctx, 1, 0);
  ctx.AddOutput(ctx.input_dtype(0), PartialShape({batch}));
  ctx.AddOutput(ctx.input_dtype(0), PartialShape({batch, DimOf(ctx, 0, 1)}));
  return absl::OkStatus();
}

absl::Status XentInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectFloats(ctx, 2));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(0, 2));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(1, 2));
  if (!ctx.input_shape(0).IsCompatibleWith(ctx.input_shape(1))) {
    return ctx.Error(absl::StrCat(
        "logits and labels must have the same shape: ", ctx.input_shape(0).DebugString(), " vs ",
        ctx.input_shape(1).DebugString()));
  }
  PartialShape s = ctx.input_shape(0).Merge(ctx.input_shape(1)).value_or(ctx.input_shape(0));
  ctx.AddOutput(ctx.input_dtype(0), PartialShape({s.known_rank() ? s.dim(0) : -1}));
  ctx.AddOutput(ctx.input_dtype(0), s);
  return absl::OkStatus();
}

absl::Status Conv2DInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectFloats(ctx, 2));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(0, 4));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(1, 4));
  TANDEM_ASSIGN_OR_RETURN(WindowAttrs a, ParseWindowAttrs(ctx, "dilations"));
  TANDEM_RETURN_IF_ERROR(ExpectDimsEqual(ctx, DimOf(ctx, 0, 3), DimOf(ctx, 1, 2),
                                         "input channels and filter in-channels"));
  TANDEM_ASSIGN_OR_RETURN(PartialShape out,
                          WindowOutput(ctx, ctx.input_shape(0), DimOf(ctx, 1, 0), DimOf(ctx, 1, 1),
                                       DimOf(ctx, 1, 3), a, /*conv=*/true));
  ctx.AddOutput(ctx.input_dtype(0), out);
  return absl::OkStatus();
}

// _FusedConv2D / _FusedMatMul(x, w, bias): the base op's output plus a bias over its
// last dimension, then `activation` ("none" or "relu").
template <absl::Status (*kBase)(InferenceContext&)>
absl::Status FusedInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(kBase(ctx));
  TANDEM_RETURN_IF_ERROR(ExpectFloats(ctx, 3));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(2, 1));
  if (ctx.outputs().empty() || ctx.outputs()[0].dtype != ctx.input_dtype(0)) {
    return ctx.Error("a fused op writes its inputs' dtype (no Tout)");
  }
  const PartialShape& out = ctx.outputs()[0].shape;
  const int64_t channels = out.known_rank() ? out.dim(out.rank() - 1) : -1;
  TANDEM_RETURN_IF_ERROR(
      ExpectDimsEqual(ctx, channels, DimOf(ctx, 2, 0), "output channels and bias size"));
  TANDEM_ASSIGN_OR_RETURN(std::string activation, ctx.GetAttr<std::string>("activation"));
  if (activation != "none" && activation != "relu") {
    return ctx.Error(
        absl::StrCat("activation must be \"none\" or \"relu\", got \"", activation, "\""));
  }
  return absl::OkStatus();
}

// _FusedConv2DWithMaxPool(x, w, bias): _FusedConv2D's output and its max pool, the
// pool's window in attrs pool_ksize, pool_strides and pool_padding.
absl::Status FusedConvWithMaxPoolInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(FusedInfer<Conv2DInfer>(ctx));
  TANDEM_ASSIGN_OR_RETURN(WindowAttrs a, ParseWindowAttrs(ctx, "pool_ksize", "pool_"));
  const PartialShape conv = ctx.outputs()[0].shape;
  const int64_t channels = conv.known_rank() ? conv.dim(3) : -1;
  TANDEM_ASSIGN_OR_RETURN(PartialShape pooled,
                          WindowOutput(ctx, conv, a.second[1], a.second[2], channels, a,
                                       /*conv=*/false));
  ctx.AddOutput(ctx.input_dtype(0), pooled);
  return absl::OkStatus();
}

// _FusedConv2DWithMaxPoolArgmax(x, w, bias): the pool of _FusedConv2DWithMaxPool and
// its argmax codes (uint8, the pool's shape), for 2x2 windows of stride 2.
absl::Status FusedConvWithMaxPoolArgmaxInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(FusedConvWithMaxPoolInfer(ctx));
  TANDEM_ASSIGN_OR_RETURN(WindowAttrs a, ParseWindowAttrs(ctx, "pool_ksize", "pool_"));
  if (a.second[1] != 2 || a.second[2] != 2 || a.strides[1] != 2 || a.strides[2] != 2) {
    return ctx.Error("the argmax is kept for 2x2 windows of stride 2 only");
  }
  ctx.EraseOutput(0);
  ctx.AddOutput(DType::kUInt8, ctx.outputs()[0].shape);
  return absl::OkStatus();
}

// Conv2DBackpropInput(input_sizes, filter, out_backprop).
absl::Status Conv2DBackpropInputInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectFloat(ctx, 1));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectSameDType(1, 2));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(1, 4));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(2, 4));
  TANDEM_RETURN_IF_ERROR(ParseWindowAttrs(ctx, "dilations").status());
  TANDEM_RETURN_IF_ERROR(ExpectDimsEqual(ctx, DimOf(ctx, 1, 3), DimOf(ctx, 2, 3),
                                         "filter out-channels and out_backprop channels"));
  TANDEM_ASSIGN_OR_RETURN(PartialShape out, ShapeFromInput(ctx, 0, 4));
  if (!out.IsFullyDefined()) out = PartialShape({DimOf(ctx, 2, 0), -1, -1, DimOf(ctx, 1, 2)});
  ctx.AddOutput(ctx.input_dtype(1), out);
  return absl::OkStatus();
}

// Conv2DBackpropFilter(input, filter_sizes, out_backprop).
absl::Status Conv2DBackpropFilterInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectFloat(ctx, 0));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectSameDType(0, 2));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(0, 4));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(2, 4));
  TANDEM_RETURN_IF_ERROR(ParseWindowAttrs(ctx, "dilations").status());
  TANDEM_RETURN_IF_ERROR(ExpectDimsEqual(ctx, DimOf(ctx, 0, 0), DimOf(ctx, 2, 0), "batch sizes"));
  TANDEM_ASSIGN_OR_RETURN(PartialShape out, ShapeFromInput(ctx, 1, 4));
  if (!out.IsFullyDefined()) out = PartialShape({-1, -1, DimOf(ctx, 0, 3), DimOf(ctx, 2, 3)});
  TANDEM_ASSIGN_OR_RETURN(DType dtype, OutputDType(ctx, ctx.input_dtype(0)));
  ctx.AddOutput(dtype, out);
  return absl::OkStatus();
}

// _Conv2DBackpropFilterOfMaxPoolGrad(input, filter_sizes, orig_input, orig_output, grad):
// Conv2DBackpropFilter(input, filter_sizes, MaxPoolGrad(orig_input, orig_output, grad))
// with the pool's window in attrs pool_ksize, pool_strides and pool_padding.
absl::Status FilterGradOfMaxPoolGradInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(Conv2DBackpropFilterInfer(ctx));
  for (int i : {3, 4}) {
    TANDEM_RETURN_IF_ERROR(ExpectFloat(ctx, i));
    TANDEM_RETURN_IF_ERROR(ctx.ExpectSameDType(2, i));
    TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(i, 4));
  }
  TANDEM_RETURN_IF_ERROR(ParseWindowAttrs(ctx, "pool_ksize", "pool_").status());
  if (!ctx.input_shape(3).IsCompatibleWith(ctx.input_shape(4))) {
    return ctx.Error("orig_output and grad shapes differ");
  }
  return absl::OkStatus();
}

// _Conv2DBackpropFilterOfMaxPoolArgmax(input, filter_sizes, argmax, grad): the same with
// the pool's argmax codes (uint8) in place of orig_input and orig_output.
absl::Status FilterGradOfMaxPoolArgmaxInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectFloat(ctx, 0));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectSameDType(0, 3));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectDType(2, DType::kUInt8));
  for (int i : {0, 2, 3}) TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(i, 4));
  TANDEM_RETURN_IF_ERROR(ParseWindowAttrs(ctx, "dilations").status());
  TANDEM_RETURN_IF_ERROR(ParseWindowAttrs(ctx, "pool_ksize", "pool_").status());
  if (!ctx.input_shape(2).IsCompatibleWith(ctx.input_shape(3))) {
    return ctx.Error("argmax and grad shapes differ");
  }
  TANDEM_ASSIGN_OR_RETURN(PartialShape out, ShapeFromInput(ctx, 1, 4));
  if (!out.IsFullyDefined()) out = PartialShape({-1, -1, DimOf(ctx, 0, 3), DimOf(ctx, 3, 3)});
  TANDEM_ASSIGN_OR_RETURN(DType dtype, OutputDType(ctx, ctx.input_dtype(0)));
  ctx.AddOutput(dtype, out);
  return absl::OkStatus();
}

absl::Status PoolInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectFloats(ctx, 1));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(0, 4));
  TANDEM_ASSIGN_OR_RETURN(WindowAttrs a, ParseWindowAttrs(ctx, "ksize"));
  TANDEM_ASSIGN_OR_RETURN(PartialShape out,
                          WindowOutput(ctx, ctx.input_shape(0), a.second[1], a.second[2],
                                       DimOf(ctx, 0, 3), a, /*conv=*/false));
  ctx.AddOutput(ctx.input_dtype(0), out);
  return absl::OkStatus();
}

// MaxPoolGrad(orig_input, orig_output, grad) -> like orig_input.
absl::Status MaxPoolGradInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectFloats(ctx, 3));
  for (int i = 0; i < 3; ++i) TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(i, 4));
  TANDEM_RETURN_IF_ERROR(ParseWindowAttrs(ctx, "ksize").status());
  if (!ctx.input_shape(1).IsCompatibleWith(ctx.input_shape(2))) {
    return ctx.Error("orig_output and grad shapes differ");
  }
  ctx.AddOutput(ctx.input_dtype(0), ctx.input_shape(0));
  return absl::OkStatus();
}

// AvgPoolGrad(orig_input_shape, grad).
absl::Status AvgPoolGradInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectFloat(ctx, 1));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(1, 4));
  TANDEM_RETURN_IF_ERROR(ParseWindowAttrs(ctx, "ksize").status());
  TANDEM_ASSIGN_OR_RETURN(PartialShape out, ShapeFromInput(ctx, 0, 4));
  if (!out.IsFullyDefined()) out = PartialShape({DimOf(ctx, 1, 0), -1, -1, DimOf(ctx, 1, 3)});
  ctx.AddOutput(ctx.input_dtype(1), out);
  return absl::OkStatus();
}

// Checks input i is a vector of `channels` elements (or of 0 when `allow_empty`).
absl::Status ExpectChannelVector(const InferenceContext& ctx, int i, int64_t channels,
                                 bool allow_empty) {
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(i, 1));
  const int64_t d = DimOf(ctx, i, 0);
  if (d < 0 || channels < 0 || d == channels || (allow_empty && d == 0)) {
    return absl::OkStatus();
  }
  return ctx.Error(absl::StrCat("input ", i, " must have ", channels, " elements (one per channel)",
                                ", has ", d));
}

absl::Status FusedBatchNormInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectFloats(ctx, 5));
  const PartialShape& x = ctx.input_shape(0);
  if (x.known_rank() && x.rank() != 4 && x.rank() != 2) {
    return ctx.Error(absl::StrCat("x must have rank 4 (NHWC) or 2, has shape ", x.DebugString()));
  }
  TANDEM_ASSIGN_OR_RETURN(std::string format, ctx.GetAttr<std::string>("data_format"));
  if (format != "NHWC") {
    return ctx.Error(absl::StrCat("only data_format NHWC is supported, got '", format, "'"));
  }
  TANDEM_ASSIGN_OR_RETURN(bool training, ctx.GetAttr<bool>("is_training"));
  TANDEM_ASSIGN_OR_RETURN(float epsilon, ctx.GetAttr<float>("epsilon"));
  if (!(epsilon >= 0)) return ctx.Error("epsilon must be >= 0");
  const int64_t c = DimOf(ctx, 0, -1);
  for (int i = 1; i < 5; ++i) {
    TANDEM_RETURN_IF_ERROR(ExpectChannelVector(ctx, i, c, /*allow_empty=*/training && i >= 3));
  }
  ctx.AddOutput(ctx.input_dtype(0), x);
  for (int i = 0; i < 4; ++i) ctx.AddOutput(ctx.input_dtype(0), PartialShape({c}));
  return absl::OkStatus();
}

// FusedBatchNormGrad(y_backprop, x, scale, saved_mean, saved_inv_std).
absl::Status FusedBatchNormGradInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectFloats(ctx, 5));
  if (!ctx.input_shape(0).IsCompatibleWith(ctx.input_shape(1))) {
    return ctx.Error("y_backprop and x shapes differ");
  }
  const int64_t c = DimOf(ctx, 1, -1);
  for (int i = 2; i < 5; ++i) {
    TANDEM_RETURN_IF_ERROR(ExpectChannelVector(ctx, i, c, /*allow_empty=*/false));
  }
  ctx.AddOutput(ctx.input_dtype(0), ctx.input_shape(1));
  ctx.AddOutput(ctx.input_dtype(0), PartialShape({c}));
  ctx.AddOutput(ctx.input_dtype(0), PartialShape({c}));
  ctx.AddOutput(ctx.input_dtype(0), PartialShape({0}));
  ctx.AddOutput(ctx.input_dtype(0), PartialShape({0}));
  return absl::OkStatus();
}

absl::Status DropoutInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectFloats(ctx, 1));
  TANDEM_ASSIGN_OR_RETURN(float rate, ctx.GetAttr<float>("rate"));
  if (!(rate >= 0.0f && rate < 1.0f)) {
    return ctx.Error(absl::StrCat("rate must be in [0, 1), got ", rate));
  }
  ctx.AddOutput(ctx.input_dtype(0), ctx.input_shape(0));
  ctx.AddOutput(ctx.input_dtype(0), ctx.input_shape(0));
  return absl::OkStatus();
}

absl::Status L2LossInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectFloats(ctx, 1));
  ctx.AddOutput(ctx.input_dtype(0), PartialShape({}));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------
// Builder helpers.

DType DTypeOrInvalid(const Output& o) { return o.valid() ? o.dtype() : DType::kInvalid; }

AttrMap TAttr(const Output& o) { return {{"T", DTypeOrInvalid(o)}}; }

// The outputs of a multi-output node; on error (null node) `n` invalid Outputs, so that
// callers may index them before checking the scope's status.
std::vector<Output> OutputsOf(Node* node, int n) {
  if (node == nullptr) return std::vector<Output>(n);
  return internal::AllOutputs(node);
}

AttrMap ConvAttrMap(const Output& typed, const Conv2DAttrs& a) {
  return {{"T", DTypeOrInvalid(typed)},
          {"strides", a.strides},
          {"padding", a.padding},
          {"dilations", a.dilations},
          {"data_format", std::string("NHWC")}};
}

AttrMap PoolAttrMap(const Output& typed, const PoolAttrs& a) {
  return {{"T", DTypeOrInvalid(typed)},
          {"ksize", a.ksize},
          {"strides", a.strides},
          {"padding", a.padding},
          {"data_format", std::string("NHWC")}};
}

}  // namespace

void RegisterNnOps(OpRegistry* r) {
  const AttrMap nhwc = {{"data_format", std::string("NHWC")}};
  const AttrMap conv = {{"strides", std::vector<int64_t>{1, 1, 1, 1}},
                        {"padding", std::string("SAME")},
                        {"dilations", std::vector<int64_t>{1, 1, 1, 1}},
                        {"data_format", std::string("NHWC")}};
  const AttrMap pool = {{"ksize", std::vector<int64_t>{1, 2, 2, 1}},
                        {"strides", std::vector<int64_t>{1, 2, 2, 1}},
                        {"padding", std::string("VALID")},
                        {"data_format", std::string("NHWC")}};
  const AttrMap bn = {
      {"epsilon", 1e-4f}, {"is_training", true}, {"data_format", std::string("NHWC")}};

  r->Register({.name = "MatMul",
               .min_inputs = 2,
               .max_inputs = 2,
               .default_attrs = {{"transpose_a", false}, {"transpose_b", false}},
               .infer = MatMulInfer});
  for (const char* op : {"Relu", "Relu6", "Elu", "Softplus"}) {
    r->Register({.name = op, .min_inputs = 1, .max_inputs = 1, .infer = UnchangedFloat});
  }
  // (gradients, features) or, for EluGrad, (gradients, outputs).
  for (const char* op : {"ReluGrad", "Relu6Grad", "EluGrad", "SoftplusGrad"}) {
    r->Register({.name = op, .min_inputs = 2, .max_inputs = 2, .infer = UnchangedFloat});
  }
  r->Register({.name = "BiasAdd",
               .min_inputs = 2,
               .max_inputs = 2,
               .default_attrs = nhwc,
               .infer = BiasAddInfer});
  r->Register({.name = "BiasAddGrad",
               .min_inputs = 1,
               .max_inputs = 1,
               .default_attrs = nhwc,
               .infer = BiasAddGradInfer});
  r->Register({.name = "Softmax", .min_inputs = 1, .max_inputs = 1, .infer = SoftmaxInfer});
  r->Register({.name = "LogSoftmax", .min_inputs = 1, .max_inputs = 1, .infer = SoftmaxInfer});
  r->Register({.name = "SparseSoftmaxCrossEntropyWithLogits",
               .min_inputs = 2,
               .max_inputs = 2,
               .infer = SparseXentInfer});
  r->Register({.name = "SoftmaxCrossEntropyWithLogits",
               .min_inputs = 2,
               .max_inputs = 2,
               .infer = XentInfer});
  r->Register({.name = "SigmoidCrossEntropyWithLogits",
               .min_inputs = 2,
               .max_inputs = 2,
               .infer = UnchangedFloat});
  r->Register({.name = "Conv2D",
               .min_inputs = 2,
               .max_inputs = 2,
               .default_attrs = conv,
               .infer = Conv2DInfer});
  // Conv2D or MatMul, BiasAdd and an optional Relu in one oneDNN primitive (bias and
  // post-op). Only the graph remapper creates them (framework/runtime/remapper.h), after
  // gradients are built, so they have no gradient.
  AttrMap fused_conv = conv;
  fused_conv["activation"] = std::string("none");
  r->Register({.name = "_FusedConv2D",
               .min_inputs = 3,
               .max_inputs = 3,
               .default_attrs = fused_conv,
               .infer = FusedInfer<Conv2DInfer>});
  // A fused op's attrs with a pool's window beside: pool_ksize, pool_strides, pool_padding.
  auto with_pool_window = [&pool](AttrMap attrs) {
    for (const char* key : {"ksize", "strides", "padding"}) {
      attrs[absl::StrCat("pool_", key)] = pool.at(key);
    }
    return attrs;
  };
  // _FusedConv2D and the MaxPool that reads it, in one kernel that pools each image while
  // it is in cache (remapper.h): outputs 0 (the convolution's) and 1 (the pool's).
  r->Register({.name = "_FusedConv2DWithMaxPool",
               .min_inputs = 3,
               .max_inputs = 3,
               .default_attrs = with_pool_window(fused_conv),
               .infer = FusedConvWithMaxPoolInfer});
  // The same keeping the pool's argmax in place of the convolution's output, for a
  // filter gradient that routes by it (remapper.h): outputs 0 (the pool's) and 1 (its
  // argmax codes).
  r->Register({.name = "_FusedConv2DWithMaxPoolArgmax",
               .min_inputs = 3,
               .max_inputs = 3,
               .default_attrs = with_pool_window(fused_conv),
               .infer = FusedConvWithMaxPoolArgmaxInfer});
  r->Register({.name = "_FusedMatMul",
               .min_inputs = 3,
               .max_inputs = 3,
               .default_attrs = {{"transpose_a", false},
                                 {"transpose_b", false},
                                 {"activation", std::string("none")}},
               .infer = FusedInfer<MatMulInfer>});
  r->Register({.name = "Conv2DBackpropInput",
               .min_inputs = 3,
               .max_inputs = 3,
               .default_attrs = conv,
               .infer = Conv2DBackpropInputInfer});
  r->Register({.name = "Conv2DBackpropFilter",
               .min_inputs = 3,
               .max_inputs = 3,
               .default_attrs = conv,
               .infer = Conv2DBackpropFilterInfer});
  // The filter gradient of a convolution whose output gradient is a max pool's gradient,
  // in one kernel that never writes that gradient whole. Only the graph remapper creates
  // it (framework/runtime/remapper.h), after gradients are built: it has no gradient.
  r->Register({.name = "_Conv2DBackpropFilterOfMaxPoolGrad",
               .min_inputs = 5,
               .max_inputs = 5,
               .default_attrs = with_pool_window(conv),
               .infer = FilterGradOfMaxPoolGradInfer});
  r->Register({.name = "_Conv2DBackpropFilterOfMaxPoolArgmax",
               .min_inputs = 4,
               .max_inputs = 4,
               .default_attrs = with_pool_window(conv),
               .infer = FilterGradOfMaxPoolArgmaxInfer});
  for (const char* op : {"MaxPool", "AvgPool"}) {
    r->Register(
        {.name = op, .min_inputs = 1, .max_inputs = 1, .default_attrs = pool, .infer = PoolInfer});
  }
  r->Register({.name = "MaxPoolGrad",
               .min_inputs = 3,
               .max_inputs = 3,
               .default_attrs = pool,
               .infer = MaxPoolGradInfer});
  r->Register({.name = "AvgPoolGrad",
               .min_inputs = 2,
               .max_inputs = 2,
               .default_attrs = pool,
               .infer = AvgPoolGradInfer});
  r->Register({.name = "FusedBatchNorm",
               .min_inputs = 5,
               .max_inputs = 5,
               .default_attrs = bn,
               .infer = FusedBatchNormInfer});
  r->Register({.name = "FusedBatchNormGrad",
               .min_inputs = 5,
               .max_inputs = 5,
               .default_attrs = bn,
               .infer = FusedBatchNormGradInfer});
  r->Register({.name = "Dropout",
               .min_inputs = 1,
               .max_inputs = 1,
               .default_attrs = {{"rate", 0.5f}, {"seed", int64_t{0}}, {"seed2", int64_t{0}}},
               .stateful = true,
               .infer = DropoutInfer});
  r->Register({.name = "L2Loss", .min_inputs = 1, .max_inputs = 1, .infer = L2LossInfer});
}

// ---------------------------------------------------------------------------------------
// Builders.

Output MatMul(const Scope& scope, Output a, Output b, bool transpose_a, bool transpose_b) {
  AttrMap attrs = TAttr(a);
  attrs["transpose_a"] = transpose_a;
  attrs["transpose_b"] = transpose_b;
  return Build(scope, "MatMul", {a, b}, std::move(attrs));
}

Output Relu(const Scope& scope, Output x) { return Build(scope, "Relu", {x}, TAttr(x)); }
Output Relu6(const Scope& scope, Output x) { return Build(scope, "Relu6", {x}, TAttr(x)); }
Output Elu(const Scope& scope, Output x) { return Build(scope, "Elu", {x}, TAttr(x)); }
Output Softplus(const Scope& scope, Output x) { return Build(scope, "Softplus", {x}, TAttr(x)); }

Output BiasAdd(const Scope& scope, Output value, Output bias) {
  return Build(scope, "BiasAdd", {value, bias}, TAttr(value));
}

Output Softmax(const Scope& scope, Output logits) {
  return Build(scope, "Softmax", {logits}, TAttr(logits));
}

Output LogSoftmax(const Scope& scope, Output logits) {
  return Build(scope, "LogSoftmax", {logits}, TAttr(logits));
}

std::vector<Output> SparseSoftmaxCrossEntropyWithLogits(const Scope& scope, Output features,
                                                        Output labels) {
  AttrMap attrs = TAttr(features);
  attrs["Tlabels"] = DTypeOrInvalid(labels);
  return OutputsOf(
      BuildNode(scope, "SparseSoftmaxCrossEntropyWithLogits", {features, labels}, std::move(attrs)),
      2);
}

std::vector<Output> SoftmaxCrossEntropyWithLogits(const Scope& scope, Output features,
                                                  Output labels) {
  return OutputsOf(
      BuildNode(scope, "SoftmaxCrossEntropyWithLogits", {features, labels}, TAttr(features)), 2);
}

Output SigmoidCrossEntropyWithLogits(const Scope& scope, Output logits, Output labels) {
  return Build(scope, "SigmoidCrossEntropyWithLogits", {logits, labels}, TAttr(logits));
}

Output Conv2D(const Scope& scope, Output input, Output filter, const Conv2DAttrs& attrs) {
  return Build(scope, "Conv2D", {input, filter}, ConvAttrMap(input, attrs));
}

Output Conv2DBackpropInput(const Scope& scope, Output input_sizes, Output filter,
                           Output out_backprop, const Conv2DAttrs& attrs) {
  return Build(scope, "Conv2DBackpropInput", {input_sizes, filter, out_backprop},
               ConvAttrMap(filter, attrs));
}

Output Conv2DBackpropFilter(const Scope& scope, Output input, Output filter_sizes,
                            Output out_backprop, const Conv2DAttrs& attrs) {
  return Build(scope, "Conv2DBackpropFilter", {input, filter_sizes, out_backprop},
               ConvAttrMap(input, attrs));
}

Output MaxPool(const Scope& scope, Output input, const PoolAttrs& attrs) {
  return Build(scope, "MaxPool", {input}, PoolAttrMap(input, attrs));
}

Output AvgPool(const Scope& scope, Output input, const PoolAttrs& attrs) {
  return Build(scope, "AvgPool", {input}, PoolAttrMap(input, attrs));
}

std::vector<Output> FusedBatchNorm(const Scope& scope, Output x, Output scale, Output offset,
                                   Output mean, Output variance, float epsilon, bool is_training) {
  AttrMap attrs = TAttr(x);
  attrs["epsilon"] = epsilon;
  attrs["is_training"] = is_training;
  return OutputsOf(
      BuildNode(scope, "FusedBatchNorm", {x, scale, offset, mean, variance}, std::move(attrs)), 5);
}

std::vector<Output> Dropout(const Scope& scope, Output x, float rate, int64_t seed) {
  // TensorFlow's seed rule; both zero stays (0, 0): the kernel seeds itself randomly.
  int64_t s1 = 0, s2 = 0;
  const int64_t graph_seed = scope.graph()->seed();
  if (graph_seed != 0 || seed != 0) {
    const int64_t counter = seed == 0 ? scope.graph()->NextOpSeedCounter() : 0;
    SeedPair p = DeriveSeeds(graph_seed, seed, counter);
    s1 = static_cast<int64_t>(p.seed);
    s2 = static_cast<int64_t>(p.seed2);
  }
  AttrMap attrs = TAttr(x);
  attrs["rate"] = rate;
  attrs["seed"] = s1;
  attrs["seed2"] = s2;
  return OutputsOf(BuildNode(scope, "Dropout", {x}, std::move(attrs)), 2);
}

Output L2Loss(const Scope& scope, Output t) { return Build(scope, "L2Loss", {t}, TAttr(t)); }

}  // namespace tandem::ops

// framework/ops/index_op_defs.cc
//
// OpDefs (attrs and shape inference) of the array ops indexed by a tensor of ids:
// GatherV2, UnsortedSegmentSum, Unique, OneHot, and the gradient helper
// InvertPermutation. Builders are in array_ops.cc, gradients in array_grad.cc.
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/ops/internal/array_infer.h"
#include "framework/ops/standard_ops.h"

namespace tandem::ops::internal {
namespace {

absl::Status GatherInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectData(ctx, 0));
  TANDEM_RETURN_IF_ERROR(CheckTypeAttr(ctx, "Tparams", 0));
  TANDEM_RETURN_IF_ERROR(ExpectIndex(ctx, 1, "indices"));
  TANDEM_ASSIGN_OR_RETURN(std::optional<int64_t> axis, ConstScalar(ctx, 2, "axis"));
  if (GetAttrOr<int64_t>(ctx.attrs(), "batch_dims", 0) != 0) {
    return ctx.Error("batch_dims other than 0 is not supported");
  }
  const PartialShape& p = ctx.input_shape(0);
  const PartialShape& idx = ctx.input_shape(1);
  if (!p.known_rank() || !idx.known_rank()) {
    ctx.AddOutput(ctx.input_dtype(0), PartialShape::UnknownRank());
    return absl::OkStatus();
  }
  if (p.rank() == 0) return ctx.Error("params must have rank >= 1");
  if (!axis.has_value()) {
    ctx.AddOutput(ctx.input_dtype(0), PartialShape::Unknown(p.rank() + idx.rank() - 1));
    return absl::OkStatus();
  }
  TANDEM_ASSIGN_OR_RETURN(int a, NormalizeAxis(ctx, *axis, p.rank()));
  Dims out(p.dims().begin(), p.dims().begin() + a);
  out.insert(out.end(), idx.dims().begin(), idx.dims().end());
  out.insert(out.end(), p.dims().begin() + a + 1, p.dims().end());
  ctx.AddOutput(ctx.input_dtype(0), PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

absl::Status UnsortedSegmentSumInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(CheckTypeAttr(ctx, "T", 0));
  DType t = ctx.input_dtype(0);
  if (t != DType::kFloat && t != DType::kInt32 && t != DType::kInt64) {
    return ctx.Error(absl::StrCat("data must be float32, int32 or int64, got ", DTypeName(t)));
  }
  TANDEM_RETURN_IF_ERROR(ExpectIndex(ctx, 1, "segment_ids"));
  TANDEM_ASSIGN_OR_RETURN(std::optional<int64_t> num, ConstScalar(ctx, 2, "num_segments"));
  if (num.has_value() && *num < 0) {
    return ctx.Error(absl::StrCat("num_segments must be non-negative, got ", *num));
  }
  const PartialShape& data = ctx.input_shape(0);
  const PartialShape& ids = ctx.input_shape(1);
  if (!data.known_rank() || !ids.known_rank()) {
    ctx.AddOutput(t, PartialShape::UnknownRank());
    return absl::OkStatus();
  }
  if (ids.rank() > data.rank()) {
    return ctx.Error("segment_ids must have rank <= data's rank");
  }
  for (int d = 0; d < ids.rank(); ++d) {
    if (ids.dim(d) >= 0 && data.dim(d) >= 0 && ids.dim(d) != data.dim(d)) {
      return ctx.Error(absl::StrCat("segment_ids shape ", ids.DebugString(),
                                    " is not a prefix of data shape ", data.DebugString()));
    }
  }
  Dims out{num.value_or(-1)};
  out.insert(out.end(), data.dims().begin() + ids.rank(), data.dims().end());
  ctx.AddOutput(t, PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

// Unique(x) -> (y, idx): x an int32/int64/float32 vector; y [?] of x's dtype, idx like
// x with dtype attr "out_idx".
absl::Status UniqueInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(CheckTypeAttr(ctx, "T", 0));
  DType t = ctx.input_dtype(0);
  if (t != DType::kFloat && t != DType::kInt32 && t != DType::kInt64) {
    return ctx.Error(absl::StrCat("x must be int32, int64 or float32, got ", DTypeName(t)));
  }
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(0, 1));
  TANDEM_ASSIGN_OR_RETURN(DType out_idx, ctx.GetAttr<DType>("out_idx"));
  if (!IsIndexType(out_idx)) {
    return ctx.Error(absl::StrCat("out_idx must be int32 or int64, got ", DTypeName(out_idx)));
  }
  ctx.AddOutput(t, PartialShape::Unknown(1));
  ctx.AddOutput(out_idx,
                ctx.input_shape(0).known_rank() ? ctx.input_shape(0) : PartialShape::Unknown(1));
  return absl::OkStatus();
}

absl::Status OneHotInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectIndex(ctx, 0, "indices"));
  TANDEM_ASSIGN_OR_RETURN(std::optional<int64_t> depth, ConstScalar(ctx, 1, "depth"));
  if (depth.has_value() && *depth < 0) {
    return ctx.Error(absl::StrCat("depth must be non-negative, got ", *depth));
  }
  TANDEM_RETURN_IF_ERROR(ExpectData(ctx, 2));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectSameDType(2, 3));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(2, 0));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(3, 0));
  TANDEM_RETURN_IF_ERROR(CheckTypeAttr(ctx, "T", 2));
  int64_t axis = GetAttrOr<int64_t>(ctx.attrs(), "axis", -1);
  const PartialShape& in = ctx.input_shape(0);
  if (!in.known_rank()) {
    ctx.AddOutput(ctx.input_dtype(2), PartialShape::UnknownRank());
    return absl::OkStatus();
  }
  if (axis < -1 || axis > in.rank()) {
    return ctx.Error(absl::StrCat("axis ", axis, " is out of range [-1, ", in.rank(), "]"));
  }
  Dims out = in.dims();
  out.insert(axis == -1 ? out.end() : out.begin() + axis, depth.value_or(-1));
  ctx.AddOutput(ctx.input_dtype(2), PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

absl::Status InvertPermutationInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectIndex(ctx, 0, "x"));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(0, 1));
  return shape_fn::Unchanged(ctx);
}

}  // namespace

void RegisterIndexOps(OpRegistry* r) {
  r->Register({.name = "InvertPermutation",
               .min_inputs = 1,
               .max_inputs = 1,
               .cheap = true,
               .infer = InvertPermutationInfer});
  r->Register({.name = "GatherV2",
               .min_inputs = 3,
               .max_inputs = 3,
               .default_attrs = {{"batch_dims", int64_t{0}}},
               .infer = GatherInfer});
  r->Register({.name = "UnsortedSegmentSum",
               .min_inputs = 3,
               .max_inputs = 3,
               .infer = UnsortedSegmentSumInfer});
  r->Register({.name = "Unique",
               .min_inputs = 1,
               .max_inputs = 1,
               .default_attrs = {{"out_idx", DType::kInt32}},
               .infer = UniqueInfer});
  r->Register({.name = "OneHot",
               .min_inputs = 4,
               .max_inputs = 4,
               .default_attrs = {{"axis", int64_t{-1}}},
               .infer = OneHotInfer});
}

}  // namespace tandem::ops::internal

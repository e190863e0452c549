// framework/ops/array_op_defs.cc
//
// OpDefs (attrs and shape inference) of the structural ops: constants, placeholders,
// identity, shape manipulation, slicing, plus the gradient helpers ConcatOffset and
// StridedSliceGrad; the ops indexed by a tensor of ids (gathering, segment sums,
// Unique, OneHot, InvertPermutation) are in index_op_defs.cc. Shape-like inputs are
// int32/int64 tensors; inference is precise when they are constants and partial
// otherwise. Builders are in array_ops.cc, gradients in array_grad.cc, CPU kernels in
// kernels/cpu/array_*.cc. BroadcastGradientArgs lives with the math ops.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/status.h"
#include "framework/ops/internal/array_infer.h"
#include "framework/ops/standard_ops.h"
#include "framework/ops/strided_slice.h"

namespace tandem::ops {
namespace {

using internal::CheckTypeAttr;
using internal::ConstScalar;
using internal::ConstValues;
using internal::ExpectData;
using internal::ExpectIndex;
using internal::IsIndexType;
using internal::MulDims;
using internal::NormalizeAxis;
using internal::ShapeInput;

absl::Status ConstInfer(InferenceContext& ctx) {
  TANDEM_ASSIGN_OR_RETURN(Tensor value, ctx.GetAttr<Tensor>("value"));
  if (!value.IsInitialized() || value.dtype() == DType::kResource) {
    return ctx.Error("attr 'value' must be a data tensor");
  }
  DType dtype = GetAttrOr<DType>(ctx.attrs(), "dtype", value.dtype());
  if (dtype != value.dtype()) {
    return ctx.Error(absl::StrCat("attr 'dtype' is ", DTypeName(dtype), " but 'value' is ",
                                  DTypeName(value.dtype())));
  }
  ctx.AddOutput(value.dtype(), value.shape());
  return absl::OkStatus();
}

absl::Status PlaceholderInfer(InferenceContext& ctx) {
  TANDEM_ASSIGN_OR_RETURN(DType dtype, ctx.GetAttr<DType>("dtype"));
  TANDEM_ASSIGN_OR_RETURN(PartialShape shape, ctx.GetAttr<PartialShape>("shape"));
  if (DTypeSize(dtype) == 0) return ctx.Error("attr 'dtype' must be a data type");
  ctx.AddOutput(dtype, shape);
  return absl::OkStatus();
}

absl::Status PlaceholderWithDefaultInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectData(ctx, 0));
  TANDEM_RETURN_IF_ERROR(CheckTypeAttr(ctx, "dtype", 0));
  TANDEM_ASSIGN_OR_RETURN(PartialShape shape, ctx.GetAttr<PartialShape>("shape"));
  if (!shape.IsCompatibleWith(ctx.input_shape(0))) {
    return ctx.Error(absl::StrCat("default value of shape ", ctx.input_shape(0).DebugString(),
                                  " is incompatible with shape ", shape.DebugString()));
  }
  ctx.AddOutput(ctx.input_dtype(0), shape);
  return absl::OkStatus();
}

absl::Status UnchangedData(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectData(ctx, 0));
  TANDEM_RETURN_IF_ERROR(CheckTypeAttr(ctx, "T", 0));
  return shape_fn::Unchanged(ctx);
}

absl::Status IdentityInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(CheckTypeAttr(ctx, "T", 0));
  ctx.AddOutput(ctx.input_dtype(0), ctx.input_shape(0), ctx.input_handle(0));
  return absl::OkStatus();
}

absl::Status ShapeInfer(InferenceContext& ctx) {
  TANDEM_ASSIGN_OR_RETURN(DType out, ctx.GetAttr<DType>("out_type"));
  if (!IsIndexType(out)) return ctx.Error("attr 'out_type' must be int32 or int64");
  const PartialShape& s = ctx.input_shape(0);
  ctx.AddOutput(out, PartialShape({s.known_rank() ? int64_t{s.rank()} : -1}));
  return absl::OkStatus();
}

absl::Status SizeInfer(InferenceContext& ctx) {
  TANDEM_ASSIGN_OR_RETURN(DType out, ctx.GetAttr<DType>("out_type"));
  if (!IsIndexType(out)) return ctx.Error("attr 'out_type' must be int32 or int64");
  ctx.AddOutput(out, PartialShape({}));
  return absl::OkStatus();
}

absl::Status ReshapeInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectData(ctx, 0));
  TANDEM_RETURN_IF_ERROR(CheckTypeAttr(ctx, "T", 0));
  TANDEM_RETURN_IF_ERROR(ExpectIndex(ctx, 1, "shape"));
  const PartialShape& shape_shape = ctx.input_shape(1);
  if (shape_shape.known_rank() && shape_shape.rank() > 1) {
    return ctx.Error(absl::StrCat("shape must be a vector, has shape ", shape_shape.DebugString()));
  }
  auto values = ConstValues(ctx, 1);
  if (!values.has_value()) {
    if (shape_shape.known_rank() && shape_shape.rank() == 1 && shape_shape.dim(0) >= 0) {
      ctx.AddOutput(ctx.input_dtype(0), PartialShape::Unknown(shape_shape.dim(0)));
    } else {
      ctx.AddOutput(ctx.input_dtype(0), PartialShape::UnknownRank());
    }
    return absl::OkStatus();
  }
  Dims dims = *values;
  int unknown = -1;
  int64_t product = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      if (unknown >= 0) return ctx.Error("shape has more than one -1 dimension");
      unknown = static_cast<int>(i);
    } else if (dims[i] < 0) {
      return ctx.Error(
          absl::StrCat("shape [", absl::StrJoin(dims, ","), "] has a negative dimension"));
    } else {
      product = product > TensorShape::kMaxElements ? product : product * dims[i];
    }
  }
  if (product > TensorShape::kMaxElements) {
    return ctx.Error(absl::StrCat("shape [", absl::StrJoin(dims, ","), "] is too large"));
  }
  const int64_t n = ctx.input_shape(0).num_elements();
  if (n >= 0) {
    if (unknown >= 0 && product > 0) {
      if (n % product != 0) {
        return ctx.Error(absl::StrCat("cannot reshape a tensor with ", n, " elements to shape [",
                                      absl::StrJoin(dims, ","), "]"));
      }
      dims[unknown] = n / product;
    } else if (unknown < 0 && n != product) {
      return ctx.Error(absl::StrCat("cannot reshape a tensor with ", n, " elements to shape [",
                                    absl::StrJoin(dims, ","), "] (", product, " elements)"));
    }
  }
  ctx.AddOutput(ctx.input_dtype(0), PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

absl::Status FillInfer(InferenceContext& ctx) {
  TANDEM_ASSIGN_OR_RETURN(PartialShape shape, ShapeInput(ctx, 0, "dims"));
  TANDEM_RETURN_IF_ERROR(ExpectData(ctx, 1));
  TANDEM_RETURN_IF_ERROR(CheckTypeAttr(ctx, "T", 1));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(1, 0));
  ctx.AddOutput(ctx.input_dtype(1), shape);
  return absl::OkStatus();
}

absl::Status SqueezeInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectData(ctx, 0));
  TANDEM_RETURN_IF_ERROR(CheckTypeAttr(ctx, "T", 0));
  auto axes = GetAttrOr<std::vector<int64_t>>(ctx.attrs(), "squeeze_dims", {});
  const PartialShape& in = ctx.input_shape(0);
  if (!in.known_rank()) {
    ctx.AddOutput(ctx.input_dtype(0), PartialShape::UnknownRank());
    return absl::OkStatus();
  }
  std::vector<bool> drop(in.rank(), false);
  for (int64_t a : axes) {
    TANDEM_ASSIGN_OR_RETURN(int d, NormalizeAxis(ctx, a, in.rank()));
    if (in.dim(d) >= 0 && in.dim(d) != 1) {
      return ctx.Error(
          absl::StrCat("cannot squeeze dimension ", d, ": it has size ", in.dim(d), ", not 1"));
    }
    drop[d] = true;
  }
  Dims out;
  for (int d = 0; d < in.rank(); ++d) {
    if (axes.empty()) {
      if (in.dim(d) < 0) {  // Might or might not be squeezed.
        ctx.AddOutput(ctx.input_dtype(0), PartialShape::UnknownRank());
        return absl::OkStatus();
      }
      if (in.dim(d) == 1) continue;
    } else if (drop[d]) {
      continue;
    }
    out.push_back(in.dim(d));
  }
  ctx.AddOutput(ctx.input_dtype(0), PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

absl::Status ExpandDimsInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectData(ctx, 0));
  TANDEM_RETURN_IF_ERROR(CheckTypeAttr(ctx, "T", 0));
  TANDEM_ASSIGN_OR_RETURN(std::optional<int64_t> axis, ConstScalar(ctx, 1, "axis"));
  const PartialShape& in = ctx.input_shape(0);
  if (!in.known_rank()) {
    ctx.AddOutput(ctx.input_dtype(0), PartialShape::UnknownRank());
  } else if (!axis.has_value()) {
    ctx.AddOutput(ctx.input_dtype(0), PartialShape::Unknown(in.rank() + 1));
  } else {
    TANDEM_ASSIGN_OR_RETURN(int d, NormalizeAxis(ctx, *axis, in.rank(), /*inclusive=*/true));
    Dims out = in.dims();
    out.insert(out.begin() + d, 1);
    ctx.AddOutput(ctx.input_dtype(0), PartialShape(absl::MakeConstSpan(out)));
  }
  return absl::OkStatus();
}

absl::Status TransposeInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectData(ctx, 0));
  TANDEM_RETURN_IF_ERROR(CheckTypeAttr(ctx, "T", 0));
  TANDEM_RETURN_IF_ERROR(ExpectIndex(ctx, 1, "perm"));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(1, 1));
  const PartialShape& in = ctx.input_shape(0);
  auto perm = ConstValues(ctx, 1);
  int rank = in.rank();
  if (rank < 0 && ctx.input_shape(1).known_rank() && ctx.input_shape(1).rank() == 1) {
    rank = static_cast<int>(ctx.input_shape(1).dim(0));
  }
  if (!perm.has_value()) {
    ctx.AddOutput(ctx.input_dtype(0),
                  rank < 0 ? PartialShape::UnknownRank() : PartialShape::Unknown(rank));
    return absl::OkStatus();
  }
  if (rank >= 0 && static_cast<int>(perm->size()) != rank) {
    return ctx.Error(
        absl::StrCat("perm has ", perm->size(), " entries for an input of rank ", rank));
  }
  std::vector<bool> seen(perm->size(), false);
  for (int64_t p : *perm) {
    if (p < 0 || p >= static_cast<int64_t>(perm->size()) || seen[p]) {
      return ctx.Error(absl::StrCat("perm [", absl::StrJoin(*perm, ","), "] is not a permutation"));
    }
    seen[p] = true;
  }
  Dims out(perm->size(), -1);
  if (in.known_rank()) {
    for (size_t i = 0; i < perm->size(); ++i) out[i] = in.dim((*perm)[i]);
  }
  ctx.AddOutput(ctx.input_dtype(0), PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

absl::Status ConcatInfer(InferenceContext& ctx) {
  const int n = ctx.num_inputs() - 1;
  int64_t attr_n = GetAttrOr<int64_t>(ctx.attrs(), "N", n);
  if (attr_n != n) return ctx.Error(absl::StrCat("attr N is ", attr_n, " but ", n, " values"));
  for (int i = 0; i < n; ++i) {
    TANDEM_RETURN_IF_ERROR(ExpectData(ctx, i));
    TANDEM_RETURN_IF_ERROR(ctx.ExpectSameDType(0, i));
  }
  TANDEM_RETURN_IF_ERROR(CheckTypeAttr(ctx, "T", 0));
  TANDEM_ASSIGN_OR_RETURN(std::optional<int64_t> axis, ConstScalar(ctx, n, "axis"));
  int rank = -1;
  for (int i = 0; i < n; ++i) {
    int r = ctx.input_shape(i).rank();
    if (r < 0) continue;
    if (rank >= 0 && r != rank) {
      return ctx.Error(absl::StrCat("values must have the same rank, got ", rank, " and ", r));
    }
    rank = r;
  }
  if (rank == 0) return ctx.Error("cannot concatenate scalars; use ExpandDims first");
  if (rank < 0 || !axis.has_value()) {
    ctx.AddOutput(ctx.input_dtype(0),
                  rank < 0 ? PartialShape::UnknownRank() : PartialShape::Unknown(rank));
    return absl::OkStatus();
  }
  TANDEM_ASSIGN_OR_RETURN(int a, NormalizeAxis(ctx, *axis, rank));
  Dims out(rank, -1);
  int64_t total = 0;
  for (int i = 0; i < n; ++i) {
    const PartialShape& s = ctx.input_shape(i);
    if (!s.known_rank()) {
      total = -1;
      continue;
    }
    for (int d = 0; d < rank; ++d) {
      if (d == a) continue;
      if (out[d] >= 0 && s.dim(d) >= 0 && out[d] != s.dim(d)) {
        return ctx.Error(absl::StrCat("dimension ", d, " of the values differs: ", out[d], " vs ",
                                      s.dim(d), " (concatenating along axis ", a, ")"));
      }
      if (out[d] < 0) out[d] = s.dim(d);
    }
    total = total < 0 || s.dim(a) < 0 ? -1 : total + s.dim(a);
  }
  out[a] = total;
  ctx.AddOutput(ctx.input_dtype(0), PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

absl::Status ConcatOffsetInfer(InferenceContext& ctx) {
  const int n = ctx.num_inputs() - 1;
  TANDEM_RETURN_IF_ERROR(ConstScalar(ctx, 0, "concat_dim").status());  // Checks type and rank.
  for (int i = 1; i <= n; ++i) {
    TANDEM_RETURN_IF_ERROR(ExpectIndex(ctx, i, "shape"));
    TANDEM_RETURN_IF_ERROR(ctx.ExpectSameDType(1, i));
    TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(i, 1));
  }
  for (int i = 1; i <= n; ++i) ctx.AddOutput(ctx.input_dtype(i), ctx.input_shape(i));
  return absl::OkStatus();
}

absl::Status SplitInfer(InferenceContext& ctx) {
  TANDEM_ASSIGN_OR_RETURN(std::optional<int64_t> axis, ConstScalar(ctx, 0, "axis"));
  TANDEM_RETURN_IF_ERROR(ExpectData(ctx, 1));
  TANDEM_RETURN_IF_ERROR(CheckTypeAttr(ctx, "T", 1));
  TANDEM_ASSIGN_OR_RETURN(int64_t num, ctx.GetAttr<int64_t>("num_split"));
  if (num < 1 || num > (int64_t{1} << 20)) {
    return ctx.Error(absl::StrCat("num_split must be in [1, 2^20], got ", num));
  }
  const PartialShape& in = ctx.input_shape(1);
  PartialShape out = in.known_rank() ? PartialShape::Unknown(in.rank()) : in;
  if (in.known_rank() && axis.has_value()) {
    TANDEM_ASSIGN_OR_RETURN(int a, NormalizeAxis(ctx, *axis, in.rank()));
    Dims dims = in.dims();
    if (dims[a] >= 0 && dims[a] % num != 0) {
      return ctx.Error(absl::StrCat("dimension ", a, " of size ", dims[a],
                                    " is not divisible into ", num, " parts"));
    }
    if (dims[a] >= 0) dims[a] /= num;
    out = PartialShape(absl::MakeConstSpan(dims));
  }
  for (int64_t i = 0; i < num; ++i) ctx.AddOutput(ctx.input_dtype(1), out);
  return absl::OkStatus();
}

absl::Status SliceInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectData(ctx, 0));
  TANDEM_RETURN_IF_ERROR(CheckTypeAttr(ctx, "T", 0));
  TANDEM_RETURN_IF_ERROR(ExpectIndex(ctx, 1, "begin"));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectSameDType(1, 2));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(1, 1));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(2, 1));
  const PartialShape& in = ctx.input_shape(0);
  auto begin = ConstValues(ctx, 1);
  auto size = ConstValues(ctx, 2);
  int rank = in.rank();
  for (const auto& v : {begin, size}) {
    if (!v.has_value()) continue;
    if (rank >= 0 && static_cast<int>(v->size()) != rank) {
      return ctx.Error(
          absl::StrCat("begin and size must have ", rank, " entries, got ", v->size()));
    }
    rank = static_cast<int>(v->size());
  }
  if (rank < 0) {
    ctx.AddOutput(ctx.input_dtype(0), PartialShape::UnknownRank());
    return absl::OkStatus();
  }
  Dims out(rank, -1);
  for (int d = 0; d < rank; ++d) {
    int64_t dim = in.known_rank() ? in.dim(d) : -1;
    int64_t b = begin.has_value() ? (*begin)[d] : -1;
    int64_t s = size.has_value() ? (*size)[d] : -2;
    if (begin.has_value() && (b < 0 || (dim >= 0 && b > dim))) {
      return ctx.Error(absl::StrCat("begin[", d, "] = ", b, " is out of range [0, ", dim, "]"));
    }
    if (size.has_value() && s < -1) {
      return ctx.Error(absl::StrCat("size[", d, "] = ", s, " must be >= -1"));
    }
    if (s >= 0) {
      if (begin.has_value() && dim >= 0 && b + s > dim) {
        return ctx.Error(absl::StrCat("slice of size ", s, " at ", b, " exceeds dimension ", d,
                                      " of size ", dim));
      }
      out[d] = s;
    } else if (s == -1 && begin.has_value() && dim >= 0) {
      out[d] = dim - b;
    }
  }
  ctx.AddOutput(ctx.input_dtype(0), PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

StridedSliceAttrs MasksOf(const AttrMap& attrs) {
  StridedSliceAttrs m;
  m.begin_mask = GetAttrOr<int64_t>(attrs, "begin_mask", 0);
  m.end_mask = GetAttrOr<int64_t>(attrs, "end_mask", 0);
  m.ellipsis_mask = GetAttrOr<int64_t>(attrs, "ellipsis_mask", 0);
  m.new_axis_mask = GetAttrOr<int64_t>(attrs, "new_axis_mask", 0);
  m.shrink_axis_mask = GetAttrOr<int64_t>(attrs, "shrink_axis_mask", 0);
  return m;
}

// Shared by StridedSlice (input 0 is the data, 1..3 the indices) and StridedSliceGrad
// (input 0 the shape, 1..3 the indices, 4 dy). Returns the output shape of the slice.
absl::StatusOr<PartialShape> SliceOutputShape(const InferenceContext& ctx, const PartialShape& in) {
  for (int i = 1; i <= 3; ++i) {
    TANDEM_RETURN_IF_ERROR(ExpectIndex(ctx, i, i == 1 ? "begin" : i == 2 ? "end" : "strides"));
    TANDEM_RETURN_IF_ERROR(ctx.ExpectSameDType(1, i));
    TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(i, 1));
  }
  auto begin = ConstValues(ctx, 1), end = ConstValues(ctx, 2), strides = ConstValues(ctx, 3);
  if (!in.known_rank() || !begin || !end || !strides) return PartialShape::UnknownRank();
  auto spec = ComputeStridedSlice(in, *begin, *end, *strides, MasksOf(ctx.attrs()));
  if (!spec.ok()) return ctx.Error(spec.status().message());
  return PartialShape(absl::MakeConstSpan(spec->final_shape));
}

absl::Status StridedSliceInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectData(ctx, 0));
  TANDEM_RETURN_IF_ERROR(CheckTypeAttr(ctx, "T", 0));
  TANDEM_ASSIGN_OR_RETURN(PartialShape out, SliceOutputShape(ctx, ctx.input_shape(0)));
  ctx.AddOutput(ctx.input_dtype(0), out);
  return absl::OkStatus();
}

absl::Status StridedSliceGradInfer(InferenceContext& ctx) {
  TANDEM_ASSIGN_OR_RETURN(PartialShape shape, ShapeInput(ctx, 0, "shape"));
  TANDEM_RETURN_IF_ERROR(ExpectData(ctx, 4));
  TANDEM_RETURN_IF_ERROR(CheckTypeAttr(ctx, "T", 4));
  TANDEM_ASSIGN_OR_RETURN(PartialShape dy, SliceOutputShape(ctx, shape));
  if (!dy.IsCompatibleWith(ctx.input_shape(4))) {
    return ctx.Error(absl::StrCat("dy has shape ", ctx.input_shape(4).DebugString(),
                                  ", the slice has shape ", dy.DebugString()));
  }
  ctx.AddOutput(ctx.input_dtype(4), shape);
  return absl::OkStatus();
}

absl::Status PadInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectData(ctx, 0));
  TANDEM_RETURN_IF_ERROR(CheckTypeAttr(ctx, "T", 0));
  TANDEM_RETURN_IF_ERROR(ExpectIndex(ctx, 1, "paddings"));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(1, 2));
  const PartialShape& in = ctx.input_shape(0);
  const PartialShape& ps = ctx.input_shape(1);
  int rank = in.rank();
  if (ps.known_rank()) {
    if (ps.dim(1) >= 0 && ps.dim(1) != 2) return ctx.Error("paddings must have shape [rank, 2]");
    if (ps.dim(0) >= 0 && rank >= 0 && ps.dim(0) != rank) {
      return ctx.Error(
          absl::StrCat("paddings has ", ps.dim(0), " rows for an input of rank ", rank));
    }
    if (rank < 0) rank = static_cast<int>(ps.dim(0));
  }
  auto pads = ConstValues(ctx, 1);
  if (rank < 0 || !pads.has_value()) {
    ctx.AddOutput(ctx.input_dtype(0),
                  rank < 0 ? PartialShape::UnknownRank() : PartialShape::Unknown(rank));
    return absl::OkStatus();
  }
  Dims out(rank, -1);
  for (int d = 0; d < rank; ++d) {
    int64_t before = (*pads)[2 * d], after = (*pads)[2 * d + 1];
    if (before < 0 || after < 0) {
      return ctx.Error(absl::StrCat("paddings must be non-negative, got ", before, ", ", after,
                                    " for dimension ", d));
    }
    if (in.known_rank() && in.dim(d) >= 0) out[d] = in.dim(d) + before + after;
  }
  ctx.AddOutput(ctx.input_dtype(0), PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

absl::Status TileInfer(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectData(ctx, 0));
  TANDEM_RETURN_IF_ERROR(CheckTypeAttr(ctx, "T", 0));
  TANDEM_RETURN_IF_ERROR(ExpectIndex(ctx, 1, "multiples"));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(1, 1));
  const PartialShape& in = ctx.input_shape(0);
  auto mult = ConstValues(ctx, 1);
  int rank = in.rank();
  if (mult.has_value()) {
    if (rank >= 0 && static_cast<int>(mult->size()) != rank) {
      return ctx.Error(
          absl::StrCat("multiples has ", mult->size(), " entries for an input of rank ", rank));
    }
    rank = static_cast<int>(mult->size());
  }
  if (rank < 0 || !mult.has_value()) {
    ctx.AddOutput(ctx.input_dtype(0),
                  rank < 0 ? PartialShape::UnknownRank() : PartialShape::Unknown(rank));
    return absl::OkStatus();
  }
  Dims out(rank, -1);
  for (int d = 0; d < rank; ++d) {
    if ((*mult)[d] < 0) {
      return ctx.Error(absl::StrCat("multiples[", d, "] = ", (*mult)[d], " is negative"));
    }
    if (in.known_rank()) out[d] = MulDims(in.dim(d), (*mult)[d]);
  }
  if (PartialShape(absl::MakeConstSpan(out)).IsFullyDefined()) {
    auto checked = TensorShape::Create(out);
    if (!checked.ok()) return ctx.Error(checked.status().message());
  }
  ctx.AddOutput(ctx.input_dtype(0), PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

}  // namespace

void RegisterArrayOps(OpRegistry* r) {
  r->Register({.name = "Const", .cheap = true, .infer = ConstInfer, .strings = true});
  r->Register({.name = "Placeholder",
               .default_attrs = {{"shape", PartialShape::UnknownRank()}},
               .stateful = true,  // Never merged with another placeholder.
               .cheap = true,
               .infer = PlaceholderInfer,
               .strings = true});
  r->Register({.name = "PlaceholderWithDefault",
               .min_inputs = 1,
               .max_inputs = 1,
               .default_attrs = {{"shape", PartialShape::UnknownRank()}},
               .cheap = true,
               .infer = PlaceholderWithDefaultInfer,
               .strings = true});
  // Identity also forwards resource handles (e.g. to another device).
  r->Register({.name = "Identity",
               .min_inputs = 1,
               .max_inputs = 1,
               .cheap = true,
               .infer = IdentityInfer,
               .strings = true});
  r->Register({.name = "StopGradient",
               .min_inputs = 1,
               .max_inputs = 1,
               .cheap = true,
               .infer = UnchangedData,
               .strings = true});
  for (const char* op : {"ZerosLike", "OnesLike"}) {
    r->Register({.name = op, .min_inputs = 1, .max_inputs = 1, .infer = UnchangedData});
  }
  r->Register({.name = "NoOp", .cheap = true, .infer = shape_fn::NoOutputs});
  r->Register({.name = "Shape",
               .min_inputs = 1,
               .max_inputs = 1,
               .default_attrs = {{"out_type", DType::kInt32}},
               .cheap = true,
               .infer = ShapeInfer,
               .strings = true});
  r->Register({.name = "Size",
               .min_inputs = 1,
               .max_inputs = 1,
               .default_attrs = {{"out_type", DType::kInt32}},
               .cheap = true,
               .infer = SizeInfer,
               .strings = true});
  r->Register({.name = "Rank",
               .min_inputs = 1,
               .max_inputs = 1,
               .default_attrs = {{"out_type", DType::kInt32}},
               .cheap = true,
               .infer = SizeInfer,
               .strings = true});
  r->Register({.name = "Reshape",
               .min_inputs = 2,
               .max_inputs = 2,
               .cheap = true,
               .infer = ReshapeInfer,
               .strings = true});
  r->Register({.name = "Fill", .min_inputs = 2, .max_inputs = 2, .infer = FillInfer});
  r->Register({.name = "Squeeze",
               .min_inputs = 1,
               .max_inputs = 1,
               .default_attrs = {{"squeeze_dims", std::vector<int64_t>{}}},
               .cheap = true,
               .infer = SqueezeInfer,
               .strings = true});
  r->Register({.name = "ExpandDims",
               .min_inputs = 2,
               .max_inputs = 2,
               .cheap = true,
               .infer = ExpandDimsInfer,
               .strings = true});
  r->Register({.name = "Transpose", .min_inputs = 2, .max_inputs = 2, .infer = TransposeInfer});
  r->Register({.name = "ConcatV2", .min_inputs = 2, .max_inputs = -1, .infer = ConcatInfer});
  r->Register({.name = "ConcatOffset",
               .min_inputs = 2,
               .max_inputs = -1,
               .cheap = true,
               .infer = ConcatOffsetInfer});
  r->Register({.name = "Split",
               .min_inputs = 2,
               .max_inputs = 2,
               .default_attrs = {{"num_split", int64_t{1}}},
               .infer = SplitInfer});
  r->Register({.name = "Slice", .min_inputs = 3, .max_inputs = 3, .infer = SliceInfer});
  AttrMap masks = {{"begin_mask", int64_t{0}},
                   {"end_mask", int64_t{0}},
                   {"ellipsis_mask", int64_t{0}},
                   {"new_axis_mask", int64_t{0}},
                   {"shrink_axis_mask", int64_t{0}}};
  r->Register({.name = "StridedSlice",
               .min_inputs = 4,
               .max_inputs = 4,
               .default_attrs = masks,
               .infer = StridedSliceInfer});
  r->Register({.name = "StridedSliceGrad",
               .min_inputs = 5,
               .max_inputs = 5,
               .default_attrs = masks,
               .infer = StridedSliceGradInfer});
  r->Register({.name = "Pad", .min_inputs = 2, .max_inputs = 2, .infer = PadInfer});
  r->Register({.name = "Tile", .min_inputs = 2, .max_inputs = 2, .infer = TileInfer});
  internal::RegisterIndexOps(r);
}

}  // namespace tandem::ops

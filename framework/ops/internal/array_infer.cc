// framework/ops/internal/array_infer.cc: the array op definitions' shared checks
// (array_infer.h).
#include "framework/ops/internal/array_infer.h"

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"

namespace tandem::ops::internal {

bool IsIndexType(DType d) { return d == DType::kInt32 || d == DType::kInt64; }

absl::Status CheckTypeAttr(const InferenceContext& ctx, absl::string_view name, int i) {
  auto it = ctx.attrs().find(name);
  if (it == ctx.attrs().end()) return absl::OkStatus();
  const DType* d = std::get_if<DType>(&it->second);
  if (d != nullptr && *d == ctx.input_dtype(i)) return absl::OkStatus();
  return ctx.Error(absl::StrCat("attr '", name, "' is ", AttrValueDebugString(it->second),
                                " but input ", i, " is ", DTypeName(ctx.input_dtype(i))));
}

absl::Status ExpectIndex(const InferenceContext& ctx, int i, absl::string_view what) {
  if (IsIndexType(ctx.input_dtype(i))) return absl::OkStatus();
  return ctx.Error(absl::StrCat(what, " (input ", i, ") must be int32 or int64, got ",
                                DTypeName(ctx.input_dtype(i))));
}

absl::Status ExpectData(const InferenceContext& ctx, int i) {
  DType d = ctx.input_dtype(i);
  if (d != DType::kResource && d != DType::kInvalid) return absl::OkStatus();
  return ctx.Error(absl::StrCat("input ", i, " must be a data tensor, got ", DTypeName(d)));
}

std::optional<std::vector<int64_t>> ConstValues(const InferenceContext& ctx, int i) {
  const Tensor* t = ctx.input_constant(i);
  if (t == nullptr) return std::nullopt;
  std::vector<int64_t> v(t->NumElements());
  if (t->dtype() == DType::kInt32) {
    for (size_t k = 0; k < v.size(); ++k) v[k] = t->flat<int32_t>()[k];
  } else if (t->dtype() == DType::kInt64) {
    for (size_t k = 0; k < v.size(); ++k) v[k] = t->flat<int64_t>()[k];
  } else {
    return std::nullopt;
  }
  return v;
}

absl::StatusOr<std::optional<int64_t>> ConstScalar(const InferenceContext& ctx, int i,
                                                   absl::string_view what) {
  TANDEM_RETURN_IF_ERROR(ExpectIndex(ctx, i, what));
  const PartialShape& s = ctx.input_shape(i);
  if (s.known_rank() && s.num_elements() >= 0 && s.num_elements() != 1) {
    return ctx.Error(absl::StrCat(what, " must be a scalar, has shape ", s.DebugString()));
  }
  auto v = ConstValues(ctx, i);
  if (!v.has_value() || v->size() != 1) return std::optional<int64_t>();
  return std::optional<int64_t>((*v)[0]);
}

absl::StatusOr<PartialShape> ShapeInput(const InferenceContext& ctx, int i,
                                        absl::string_view what) {
  TANDEM_RETURN_IF_ERROR(ExpectIndex(ctx, i, what));
  const PartialShape& s = ctx.input_shape(i);
  if (s.known_rank() && s.rank() > 1) {
    return ctx.Error(absl::StrCat(what, " must be a vector, has shape ", s.DebugString()));
  }
  if (auto v = ConstValues(ctx, i)) {
    auto shape = TensorShape::Create(*v);
    if (!shape.ok()) return ctx.Error(absl::StrCat(what, ": ", shape.status().message()));
    return PartialShape(*shape);
  }
  if (s.known_rank() && s.rank() == 1 && s.dim(0) >= 0) {
    return PartialShape::Unknown(static_cast<int>(s.dim(0)));
  }
  return PartialShape::UnknownRank();
}

absl::StatusOr<int> NormalizeAxis(const InferenceContext& ctx, int64_t axis, int rank,
                                  bool inclusive) {
  int64_t limit = inclusive ? rank + 1 : rank;
  if (axis < -limit || axis >= limit) {
    return ctx.Error(absl::StrCat("axis ", axis, " is out of range [", -limit, ", ", limit,
                                  ") for rank ", rank));
  }
  return static_cast<int>(axis < 0 ? axis + limit : axis);
}

int64_t MulDims(int64_t a, int64_t b) {
  if (a < 0 || b < 0) return -1;
  if (b != 0 && a > TensorShape::kMaxElements / b) return TensorShape::kMaxElements + 1;
  return a * b;
}

}  // namespace tandem::ops::internal

// framework/ops/internal/array_infer.h
//
// What the array op definitions (array_op_defs.cc, index_op_defs.cc) share: checks
// of input dtypes and attrs, constant inputs read as ints or shapes, axis
// normalisation, and the registration of the index ops.
#ifndef TANDEM_FRAMEWORK_OPS_INTERNAL_ARRAY_INFER_H_
#define TANDEM_FRAMEWORK_OPS_INTERNAL_ARRAY_INFER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "framework/graph/op_registry.h"

namespace tandem::ops::internal {

bool IsIndexType(DType d);
// Fails when attr `name` is present and differs from input `i`'s dtype (so a kernel
// chosen by the attr always sees the dtype it expects).
absl::Status CheckTypeAttr(const InferenceContext& ctx, absl::string_view name, int i);
// Input `i` (called `what`) must be int32 or int64.
absl::Status ExpectIndex(const InferenceContext& ctx, int i, absl::string_view what);
// Input `i` must be a data tensor (not a resource).
absl::Status ExpectData(const InferenceContext& ctx, int i);
// The values of input i when it is an int32/int64 constant.
std::optional<std::vector<int64_t>> ConstValues(const InferenceContext& ctx, int i);
// A scalar constant int input, or nullopt.
absl::StatusOr<std::optional<int64_t>> ConstScalar(const InferenceContext& ctx, int i,
                                                   absl::string_view what);
// The shape described by a shape-like vector input: exact when constant, else of the
// vector's length when that is known.
absl::StatusOr<PartialShape> ShapeInput(const InferenceContext& ctx, int i, absl::string_view what);
// Normalises `axis` into [0, rank) (or [0, rank] with `inclusive`).
absl::StatusOr<int> NormalizeAxis(const InferenceContext& ctx, int64_t axis, int rank,
                                  bool inclusive = false);
// a * b for dims (-1 unknown), saturating above TensorShape::kMaxElements.
int64_t MulDims(int64_t a, int64_t b);

// GatherV2, UnsortedSegmentSum, Unique, OneHot and InvertPermutation
// (index_op_defs.cc); called by RegisterArrayOps.
void RegisterIndexOps(OpRegistry* r);

}  // namespace tandem::ops::internal

#endif  // TANDEM_FRAMEWORK_OPS_INTERNAL_ARRAY_INFER_H_

// framework/ops/array_ops.h
//
// Builders for structural ops: constants, placeholders, identity, shape
// manipulation, slicing, gathering. Semantics and attr names follow TensorFlow's ops
// of the same names (dtype attr "T"); shape-like arguments that TensorFlow takes as
// tensors are tensors here too (so gradients can use run-time shapes), with
// convenience overloads that take constants.
//
// Every builder records errors in the scope and returns an invalid Output on error.
#ifndef TANDEM_FRAMEWORK_OPS_ARRAY_OPS_H_
#define TANDEM_FRAMEWORK_OPS_ARRAY_OPS_H_

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "framework/graph/scope.h"

namespace tandem::ops {

// Const: attrs "value" (Tensor), "dtype".
Output Const(const Scope& scope, const Tensor& value);
Output Const(const Scope& scope, float value);
Output Const(const Scope& scope, std::initializer_list<float> values, const TensorShape& shape);
Output ConstInt32(const Scope& scope, std::vector<int32_t> values);  // A vector.
Output ConstInt32(const Scope& scope, int32_t value);                // A scalar.
Output ConstInt64(const Scope& scope, std::vector<int64_t> values);
// Placeholder: attrs "dtype", "shape". Running it unfed is INVALID_ARGUMENT naming it.
Output Placeholder(const Scope& scope, DType dtype, const PartialShape& shape = {});
// PlaceholderWithDefault(input): attr "shape"; passes `input` through unless fed.
Output PlaceholderWithDefault(const Scope& scope, Output input, const PartialShape& shape);
Output Identity(const Scope& scope, Output x);
// Identity whose gradient is none.
Output StopGradient(const Scope& scope, Output x);
// A node with no inputs or outputs, usable as a target; Group ties `deps` together.
Node* NoOp(const Scope& scope);
Node* Group(const Scope& scope, const std::vector<Node*>& deps);

// Reshape(x, shape): shape int32/int64 vector, at most one -1.
Output Reshape(const Scope& scope, Output x, Output shape);
Output Reshape(const Scope& scope, Output x, std::vector<int64_t> shape);
// Squeeze: attr "squeeze_dims" (list of int; empty = all size-1 dims).
Output Squeeze(const Scope& scope, Output x, std::vector<int64_t> axes = {});
// ExpandDims(x, axis): axis an int32 scalar.
Output ExpandDims(const Scope& scope, Output x, Output axis);
Output ExpandDims(const Scope& scope, Output x, int axis);
// Transpose(x, perm).
Output Transpose(const Scope& scope, Output x, Output perm);
Output Transpose(const Scope& scope, Output x, std::vector<int32_t> perm);
// ConcatV2(values..., axis): attr "N".
Output Concat(const Scope& scope, const std::vector<Output>& values, Output axis);
Output Concat(const Scope& scope, const std::vector<Output>& values, int axis);
// Split(axis, value): attr "num_split"; `num_split` equal parts.
std::vector<Output> Split(const Scope& scope, Output axis, Output value, int num_split);
std::vector<Output> Split(const Scope& scope, int axis, Output value, int num_split);
// Slice(x, begin, size): size -1 means "to the end".
Output Slice(const Scope& scope, Output x, Output begin, Output size);
// StridedSlice(x, begin, end, strides): attrs begin_mask, end_mask, ellipsis_mask,
// new_axis_mask, shrink_axis_mask (basic forms: masks, negative indices and strides).
struct StridedSliceAttrs {
  int64_t begin_mask = 0, end_mask = 0, ellipsis_mask = 0, new_axis_mask = 0, shrink_axis_mask = 0;
};
Output StridedSlice(const Scope& scope, Output x, Output begin, Output end, Output strides,
                    const StridedSliceAttrs& attrs = {});
// Pad(x, paddings): paddings int32 [rank, 2], zeros padded.
Output Pad(const Scope& scope, Output x, Output paddings);
// Tile(x, multiples).
Output Tile(const Scope& scope, Output x, Output multiples);
// GatherV2(params, indices, axis): gathers slices of params along axis.
Output Gather(const Scope& scope, Output params, Output indices, int axis = 0);
// Shape(x): attr "out_type" (int32 default). Size(x): int32 scalar. Rank(x).
Output Shape(const Scope& scope, Output x, DType out_type = DType::kInt32);
Output Size(const Scope& scope, Output x);
Output Rank(const Scope& scope, Output x);
// Fill(dims, value).
Output Fill(const Scope& scope, Output dims, Output value);
Output ZerosLike(const Scope& scope, Output x);
Output OnesLike(const Scope& scope, Output x);
// OneHot(indices, depth, on_value, off_value): attr "axis" (-1 = last).
Output OneHot(const Scope& scope, Output indices, Output depth, Output on_value, Output off_value,
              int axis = -1);
Output OneHot(const Scope& scope, Output indices, int depth, float on_value = 1.0f,
              float off_value = 0.0f);

// Helpers for gradients (TensorFlow's ops of the same names).
// BroadcastGradientArgs(s0, s1) -> (r0, r1): axes to sum each side's gradient over.
std::vector<Output> BroadcastGradientArgs(const Scope& scope, Output s0, Output s1);
// UnsortedSegmentSum(data, segment_ids, num_segments): the dense gradient of Gather.
Output UnsortedSegmentSum(const Scope& scope, Output data, Output segment_ids, Output num_segments);
// Unique(x) -> (y, idx): the distinct values of the vector x in order of first
// occurrence, and for each element of x the position of its value in y (x == y[idx]).
// attrs "T" (int32, int64 or float32) and "out_idx" (int32 default, or int64). Not
// differentiable. Used to sum duplicate rows of sparse gradients.
std::vector<Output> Unique(const Scope& scope, Output x, DType out_idx = DType::kInt32);

}  // namespace tandem::ops

#endif  // TANDEM_FRAMEWORK_OPS_ARRAY_OPS_H_

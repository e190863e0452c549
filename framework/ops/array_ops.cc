// framework/ops/array_ops.cc
//
// Builders of the structural ops declared in array_ops.h. Auxiliary constants (axes,
// shapes given as vectors) are built in the caller's name scope without its op name,
// so WithOpName names the op itself. The OpDefs are in array_op_defs.cc.
#include "framework/ops/array_ops.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/ops/internal/build.h"

namespace tandem::ops {
namespace {

// Builds `op` with attr T = the dtype of input `type_input`.
Output BuildT(const Scope& scope, absl::string_view op, std::vector<Output> inputs,
              AttrMap attrs = {}, int type_input = 0) {
  if (type_input < static_cast<int>(inputs.size()) && inputs[type_input].valid()) {
    attrs.emplace("T", inputs[type_input].dtype());
  }
  return internal::Build(scope, op, std::move(inputs), std::move(attrs));
}

}  // namespace

Output Const(const Scope& scope, const Tensor& value) {
  return internal::Build(scope, "Const", {}, {{"value", value}, {"dtype", value.dtype()}});
}

Output Const(const Scope& scope, float value) { return Const(scope, Tensor::Scalar(value)); }

Output Const(const Scope& scope, std::initializer_list<float> values, const TensorShape& shape) {
  if (static_cast<int64_t>(values.size()) != shape.num_elements()) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat("Const: ", values.size(), " values for shape ", shape.DebugString())));
    return Output();
  }
  return Const(scope, Tensor::FromVector<float>(std::vector<float>(values), shape));
}

Output ConstInt32(const Scope& scope, std::vector<int32_t> values) {
  TensorShape shape({static_cast<int64_t>(values.size())});
  return Const(scope, Tensor::FromVector<int32_t>(values, shape));
}

Output ConstInt32(const Scope& scope, int32_t value) { return Const(scope, Tensor::Scalar(value)); }

Output ConstInt64(const Scope& scope, std::vector<int64_t> values) {
  TensorShape shape({static_cast<int64_t>(values.size())});
  return Const(scope, Tensor::FromVector<int64_t>(values, shape));
}

Output Placeholder(const Scope& scope, DType dtype, const PartialShape& shape) {
  return internal::Build(scope, "Placeholder", {}, {{"dtype", dtype}, {"shape", shape}});
}

Output PlaceholderWithDefault(const Scope& scope, Output input, const PartialShape& shape) {
  if (!input.valid()) return internal::Build(scope, "PlaceholderWithDefault", {input});
  return internal::Build(scope, "PlaceholderWithDefault", {input},
                         {{"dtype", input.dtype()}, {"shape", shape}});
}

Output Identity(const Scope& scope, Output x) { return BuildT(scope, "Identity", {x}); }
Output StopGradient(const Scope& scope, Output x) { return BuildT(scope, "StopGradient", {x}); }

Node* NoOp(const Scope& scope) { return internal::BuildNode(scope, "NoOp", {}); }

Node* Group(const Scope& scope, const std::vector<Node*>& deps) {
  return internal::BuildNode(scope.WithControlDependencies(deps), "NoOp", {}, {}, "group_deps");
}

Output Reshape(const Scope& scope, Output x, Output shape) {
  return BuildT(scope, "Reshape", {x, shape});
}

Output Reshape(const Scope& scope, Output x, std::vector<int64_t> shape) {
  return Reshape(scope, x, ConstInt64(internal::Aux(scope), std::move(shape)));
}

Output Squeeze(const Scope& scope, Output x, std::vector<int64_t> axes) {
  return BuildT(scope, "Squeeze", {x}, {{"squeeze_dims", std::move(axes)}});
}

Output ExpandDims(const Scope& scope, Output x, Output axis) {
  return BuildT(scope, "ExpandDims", {x, axis});
}

Output ExpandDims(const Scope& scope, Output x, int axis) {
  return ExpandDims(scope, x, ConstInt32(internal::Aux(scope), axis));
}

Output Transpose(const Scope& scope, Output x, Output perm) {
  return BuildT(scope, "Transpose", {x, perm});
}

Output Transpose(const Scope& scope, Output x, std::vector<int32_t> perm) {
  return Transpose(scope, x, ConstInt32(internal::Aux(scope), std::move(perm)));
}

Output Concat(const Scope& scope, const std::vector<Output>& values, Output axis) {
  std::vector<Output> inputs = values;
  inputs.push_back(axis);
  return BuildT(scope, "ConcatV2", std::move(inputs), {{"N", static_cast<int64_t>(values.size())}});
}

Output Concat(const Scope& scope, const std::vector<Output>& values, int axis) {
  return Concat(scope, values, ConstInt32(internal::Aux(scope), axis));
}

std::vector<Output> Split(const Scope& scope, Output axis, Output value, int num_split) {
  AttrMap attrs = {{"num_split", int64_t{num_split}}};
  if (value.valid()) attrs.emplace("T", value.dtype());
  return internal::AllOutputs(internal::BuildNode(scope, "Split", {axis, value}, attrs));
}

std::vector<Output> Split(const Scope& scope, int axis, Output value, int num_split) {
  return Split(scope, ConstInt32(internal::Aux(scope), axis), value, num_split);
}

Output Slice(const Scope& scope, Output x, Output begin, Output size) {
  return BuildT(scope, "Slice", {x, begin, size});
}

Output StridedSlice(const Scope& scope, Output x, Output begin, Output end, Output strides,
                    const StridedSliceAttrs& a) {
  return BuildT(scope, "StridedSlice", {x, begin, end, strides},
                {{"begin_mask", a.begin_mask},
                 {"end_mask", a.end_mask},
                 {"ellipsis_mask", a.ellipsis_mask},
                 {"new_axis_mask", a.new_axis_mask},
                 {"shrink_axis_mask", a.shrink_axis_mask}});
}

Output Pad(const Scope& scope, Output x, Output paddings) {
  return BuildT(scope, "Pad", {x, paddings});
}

Output Tile(const Scope& scope, Output x, Output multiples) {
  return BuildT(scope, "Tile", {x, multiples});
}

Output Gather(const Scope& scope, Output params, Output indices, int axis) {
  AttrMap attrs = {{"batch_dims", int64_t{0}}};
  if (params.valid()) attrs.emplace("Tparams", params.dtype());
  return internal::Build(scope, "GatherV2",
                         {params, indices, ConstInt32(internal::Aux(scope), axis)}, attrs);
}

Output Shape(const Scope& scope, Output x, DType out_type) {
  return BuildT(scope, "Shape", {x}, {{"out_type", out_type}});
}

Output Size(const Scope& scope, Output x) {
  return BuildT(scope, "Size", {x}, {{"out_type", DType::kInt32}});
}

Output Rank(const Scope& scope, Output x) { return BuildT(scope, "Rank", {x}); }

Output Fill(const Scope& scope, Output dims, Output value) {
  return BuildT(scope, "Fill", {dims, value}, {}, /*type_input=*/1);
}

Output ZerosLike(const Scope& scope, Output x) { return BuildT(scope, "ZerosLike", {x}); }
Output OnesLike(const Scope& scope, Output x) { return BuildT(scope, "OnesLike", {x}); }

Output OneHot(const Scope& scope, Output indices, Output depth, Output on_value, Output off_value,
              int axis) {
  return BuildT(scope, "OneHot", {indices, depth, on_value, off_value}, {{"axis", int64_t{axis}}},
                /*type_input=*/2);
}

Output OneHot(const Scope& scope, Output indices, int depth, float on_value, float off_value) {
  Scope aux = internal::Aux(scope);
  return OneHot(scope, indices, ConstInt32(aux, depth), Const(aux, on_value), Const(aux, off_value),
                -1);
}

Output UnsortedSegmentSum(const Scope& scope, Output data, Output segment_ids,
                          Output num_segments) {
  return BuildT(scope, "UnsortedSegmentSum", {data, segment_ids, num_segments});
}

std::vector<Output> Unique(const Scope& scope, Output x, DType out_idx) {
  AttrMap attrs = {{"out_idx", out_idx}};
  if (x.valid()) attrs.emplace("T", x.dtype());
  return internal::AllOutputs(internal::BuildNode(scope, "Unique", {x}, std::move(attrs)));
}

}  // namespace tandem::ops

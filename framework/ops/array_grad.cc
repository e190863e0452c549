// framework/ops/array_grad.cc
//
// Gradient functions of the array ops. They use run-time shapes (Shape(x)) so they
// work for partially known static shapes. Ops whose outputs are not differentiable
// (Shape, Size, Rank, OneHot, StopGradient, ZerosLike, OnesLike and the random ops)
// are registered as having no gradient, so paths through them are cut silently.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/gradients.h"
#include "framework/ops/internal/build.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/standard_ops.h"

namespace tandem::ops {

void RegisterRandomGradients(GradientRegistry* r);  // random_ops.cc

namespace {

using Grads = std::vector<Output>;

// The value of `o` when it is a Const node's output, else null.
const Tensor* ConstValue(const Output& o) {
  if (o.node == nullptr || o.node->op() != "Const") return nullptr;
  auto it = o.node->attrs().find("value");
  return it == o.node->attrs().end() ? nullptr : std::get_if<Tensor>(&it->second);
}

absl::StatusOr<int64_t> ConstScalarValue(const Output& o, absl::string_view what) {
  const Tensor* t = ConstValue(o);
  if (t == nullptr || t->NumElements() != 1 ||
      (t->dtype() != DType::kInt32 && t->dtype() != DType::kInt64)) {
    return absl::UnimplementedError(
        absl::StrCat("the gradient needs ", what, " to be a constant int32/int64 scalar"));
  }
  return t->dtype() == DType::kInt32 ? int64_t{t->flat<int32_t>()[0]} : t->flat<int64_t>()[0];
}

// A one-element int32 vector (ConstInt32(s, {v}) would pick the scalar overload).
Output Vec1(const Scope& scope, int32_t v) {
  return ConstInt32(internal::Aux(scope), std::vector<int32_t>{v});
}

// v[begin:] of a vector, as a StridedSlice with end_mask.
Output VectorTail(const Scope& scope, Output v, int32_t begin) {
  return StridedSlice(scope, v, Vec1(scope, begin), Vec1(scope, 0), Vec1(scope, 1),
                      {.end_mask = 1});
}

// v[index] of a vector, as a scalar.
Output VectorElement(const Scope& scope, Output v, int32_t index) {
  return StridedSlice(scope, v, Vec1(scope, index), Vec1(scope, index + 1), Vec1(scope, 1),
                      {.shrink_axis_mask = 1});
}

absl::Status PassThroughGrad(const Scope&, const Node& node, const Grads& dy, Grads* dx) {
  dx->push_back(dy[0]);
  for (int i = 1; i < node.num_inputs(); ++i) dx->push_back(Output());
  return absl::OkStatus();
}

// Reshape, Squeeze, ExpandDims: the gradient is dy reshaped to x's run-time shape.
absl::Status ReshapeGrad(const Scope& scope, const Node& node, const Grads& dy, Grads* dx) {
  dx->push_back(Reshape(scope, dy[0], Shape(scope, node.input(0))));
  for (int i = 1; i < node.num_inputs(); ++i) dx->push_back(Output());
  return absl::OkStatus();
}

absl::Status TransposeGrad(const Scope& scope, const Node& node, const Grads& dy, Grads* dx) {
  Output perm = node.input(1);
  Output inverse = internal::Build(scope, "InvertPermutation", {perm}, {{"T", perm.dtype()}});
  dx->push_back(Transpose(scope, dy[0], inverse));
  dx->push_back(Output());
  return absl::OkStatus();
}

absl::Status ConcatGrad(const Scope& scope, const Node& node, const Grads& dy, Grads* dx) {
  const int n = node.num_inputs() - 1;
  Output axis = node.input(n);
  if (n == 1) {
    dx->push_back(dy[0]);
  } else {
    std::vector<Output> inputs = {axis};
    std::vector<Output> shapes;
    for (int i = 0; i < n; ++i) {
      shapes.push_back(Shape(scope, node.input(i)));
      inputs.push_back(shapes.back());
    }
    Node* offsets = internal::BuildNode(scope, "ConcatOffset", inputs,
                                        {{"N", int64_t{n}}, {"shape_type", DType::kInt32}});
    TANDEM_RETURN_IF_ERROR(scope.status());
    for (int i = 0; i < n; ++i) {
      dx->push_back(Slice(scope, dy[0], Output(offsets, i), shapes[i]));
    }
  }
  dx->push_back(Output());
  return absl::OkStatus();
}

absl::Status SplitGrad(const Scope& scope, const Node& node, const Grads& dy, Grads* dx) {
  dx->push_back(Output());
  dx->push_back(Concat(scope, dy, node.input(0)));
  return absl::OkStatus();
}

// Slice: dy padded back to x's shape with begin before and the rest after.
absl::Status SliceGrad(const Scope& scope, const Node& node, const Grads& dy, Grads* dx) {
  Output x = node.input(0), begin = node.input(1);
  Output x_shape = Shape(scope, x, begin.dtype());
  Output y_shape = Shape(scope, dy[0], begin.dtype());
  Output after = Sub(scope, Sub(scope, x_shape, begin), y_shape);
  Output paddings = Concat(scope, {ExpandDims(scope, begin, 1), ExpandDims(scope, after, 1)}, 1);
  dx->push_back(Pad(scope, dy[0], paddings));
  dx->push_back(Output());
  dx->push_back(Output());
  return absl::OkStatus();
}

AttrMap MaskAttrs(const Node& node) {
  AttrMap attrs;
  for (const char* m :
       {"begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"}) {
    attrs[m] = GetAttrOr<int64_t>(node.attrs(), m, 0);
  }
  return attrs;
}

absl::Status StridedSliceGradFn(const Scope& scope, const Node& node, const Grads& dy, Grads* dx) {
  Output begin = node.input(1);
  AttrMap attrs = MaskAttrs(node);
  attrs["T"] = dy[0].dtype();
  attrs["Index"] = begin.dtype();
  dx->push_back(internal::Build(
      scope, "StridedSliceGrad",
      {Shape(scope, node.input(0), begin.dtype()), begin, node.input(2), node.input(3), dy[0]},
      attrs));
  for (int i = 0; i < 3; ++i) dx->push_back(Output());
  return absl::OkStatus();
}

// StridedSliceGrad is linear in dy; its gradient slices the incoming gradient.
absl::Status StridedSliceGradGrad(const Scope& scope, const Node& node, const Grads& dy,
                                  Grads* dx) {
  AttrMap attrs = MaskAttrs(node);
  attrs["T"] = dy[0].dtype();
  for (int i = 0; i < 4; ++i) dx->push_back(Output());
  dx->push_back(internal::Build(scope, "StridedSlice",
                                {dy[0], node.input(1), node.input(2), node.input(3)}, attrs));
  return absl::OkStatus();
}

absl::Status PadGrad(const Scope& scope, const Node& node, const Grads& dy, Grads* dx) {
  Output x = node.input(0), paddings = node.input(1);
  Scope aux = internal::Aux(scope);
  // paddings[:, 0]
  Output before = StridedSlice(scope, paddings, ConstInt32(aux, {0, 0}), ConstInt32(aux, {0, 1}),
                               ConstInt32(aux, {1, 1}),
                               {.begin_mask = 1, .end_mask = 1, .shrink_axis_mask = 2});
  dx->push_back(Slice(scope, dy[0], before, Shape(scope, x, paddings.dtype())));
  dx->push_back(Output());
  return absl::OkStatus();
}

// Tile: dy reshaped to [m0, d0, m1, d1, ...] and summed over the m axes.
absl::Status TileGrad(const Scope& scope, const Node& node, const Grads& dy, Grads* dx) {
  Output x = node.input(0), multiples = node.input(1);
  const int rank = x.shape().rank();
  if (rank < 0) {
    return absl::UnimplementedError("the gradient of Tile needs an input of known rank");
  }
  if (rank == 0) {
    dx->push_back(dy[0]);
  } else {
    Output pairs = Concat(
        scope,
        {ExpandDims(scope, multiples, 1), ExpandDims(scope, Shape(scope, x, multiples.dtype()), 1)},
        1);
    Output split = Reshape(scope, dy[0], Reshape(scope, pairs, std::vector<int64_t>{-1}));
    std::vector<int32_t> axes;
    for (int d = 0; d < rank; ++d) axes.push_back(2 * d);
    dx->push_back(Sum(scope, split, axes));
  }
  dx->push_back(Output());
  return absl::OkStatus();
}

absl::Status GatherGrad(const Scope& scope, const Node& node, const Grads& dy, Grads* dx) {
  Output params = node.input(0), indices = node.input(1);
  TANDEM_ASSIGN_OR_RETURN(int64_t axis, ConstScalarValue(node.input(2), "the gather axis"));
  const int p_rank = params.shape().rank(), i_rank = indices.shape().rank();
  if (axis < 0) {
    if (p_rank < 0) {
      return absl::UnimplementedError(
          "the gradient of GatherV2 with a negative axis needs "
          "params of known rank");
    }
    axis += p_rank;
  }
  Output params_shape = Shape(scope, params);
  Output flat_ids = Reshape(scope, indices, std::vector<int64_t>{-1});
  Output num = VectorElement(scope, params_shape, static_cast<int32_t>(axis));
  Output size = ExpandDims(scope, Size(scope, indices), 0);
  if (axis == 0) {
    Output values_shape = Concat(scope, {size, VectorTail(scope, params_shape, 1)}, 0);
    Output values = Reshape(scope, dy[0], values_shape);
    dx->push_back(UnsortedSegmentSum(scope, values, flat_ids, num));
  } else {
    if (p_rank < 0 || i_rank < 0) {
      return absl::UnimplementedError(
          "the gradient of GatherV2 with axis != 0 needs params "
          "and indices of known rank");
    }
    // Move the indices' dims of dy to the front, sum segments, move the axis back.
    const int a = static_cast<int>(axis);
    std::vector<int32_t> to_front;
    for (int d = a; d < a + i_rank; ++d) to_front.push_back(d);
    for (int d = 0; d < a; ++d) to_front.push_back(d);
    for (int d = a + i_rank; d < p_rank + i_rank - 1; ++d) to_front.push_back(d);
    Output moved = Transpose(scope, dy[0], to_front);
    Output values_shape = Concat(scope, {size, VectorTail(scope, Shape(scope, moved), i_rank)}, 0);
    Output summed = UnsortedSegmentSum(scope, Reshape(scope, moved, values_shape), flat_ids, num);
    std::vector<int32_t> back;
    for (int d = 1; d <= a; ++d) back.push_back(d);
    back.push_back(0);
    for (int d = a + 1; d < p_rank; ++d) back.push_back(d);
    dx->push_back(Transpose(scope, summed, back));
  }
  dx->push_back(Output());
  dx->push_back(Output());
  return absl::OkStatus();
}

absl::Status UnsortedSegmentSumGrad(const Scope& scope, const Node& node, const Grads& dy,
                                    Grads* dx) {
  dx->push_back(Gather(scope, dy[0], node.input(1), 0));
  dx->push_back(Output());
  dx->push_back(Output());
  return absl::OkStatus();
}

absl::Status FillGrad(const Scope& scope, const Node&, const Grads& dy, Grads* dx) {
  dx->push_back(Output());
  dx->push_back(ReduceSumAll(scope, dy[0]));
  return absl::OkStatus();
}

}  // namespace

void RegisterArrayGradients(GradientRegistry* r) {
  r->Register("Identity", PassThroughGrad);
  r->Register("PlaceholderWithDefault", PassThroughGrad);
  r->Register("Reshape", ReshapeGrad);
  r->Register("Squeeze", ReshapeGrad);
  r->Register("ExpandDims", ReshapeGrad);
  r->Register("Transpose", TransposeGrad);
  r->Register("ConcatV2", ConcatGrad);
  r->Register("Split", SplitGrad);
  r->Register("Slice", SliceGrad);
  r->Register("StridedSlice", StridedSliceGradFn);
  r->Register("StridedSliceGrad", StridedSliceGradGrad);
  r->Register("Pad", PadGrad);
  r->Register("Tile", TileGrad);
  r->Register("GatherV2", GatherGrad);
  r->Register("UnsortedSegmentSum", UnsortedSegmentSumGrad);
  r->Register("Fill", FillGrad);
  for (const char* op :
       {"StopGradient", "Shape", "Size", "Rank", "OneHot", "ZerosLike", "OnesLike",
        "InvertPermutation", "ConcatOffset", "Const", "Placeholder", "NoOp", "Unique"}) {
    r->RegisterNoGradient(op);
  }
  RegisterRandomGradients(r);
}

}  // namespace tandem::ops

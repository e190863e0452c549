// Gradient clipping by global norm (see clip_ops.h).
#include "framework/ops/clip_ops.h"

#include "absl/strings/str_cat.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/nn_ops.h"

namespace tandem::ops {
namespace {

// INVALID_ARGUMENT naming the first valid tensor that is not float32, else OK.
absl::Status CheckFloat(const std::vector<Output>& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].valid() && tensors[i].dtype() != DType::kFloat) {
      return absl::InvalidArgumentError(
          absl::StrCat("clip_by_global_norm: tensor ", i, " (", tensors[i].name(), ") is ",
                       DTypeName(tensors[i].dtype()), "; only float32 is supported"));
    }
  }
  return absl::OkStatus();
}

Output GlobalNormIn(const Scope& s, const std::vector<Output>& tensors) {
  // sqrt(2 * sum_i L2Loss(t_i)), as TensorFlow computes it.
  std::vector<Output> half_squares;
  for (const Output& t : tensors) {
    if (t.valid()) half_squares.push_back(L2Loss(s, t));
  }
  if (half_squares.empty()) return Const(s.WithOpName("global_norm"), 0.0f);
  Output sum = half_squares.size() == 1 ? half_squares[0] : AddN(s, half_squares);
  return Sqrt(s.WithOpName("global_norm"), Mul(s, sum, Const(s.WithOpName("two"), 2.0f)));
}

}  // namespace

Output GlobalNorm(const Scope& scope, const std::vector<Output>& tensors) {
  if (!scope.ok()) return Output();
  if (absl::Status st = CheckFloat(tensors); !st.ok()) {
    scope.UpdateStatus(st);
    return Output();
  }
  return GlobalNormIn(scope.NewSubScope("global_norm"), tensors);
}

ClippedTensors ClipByGlobalNorm(const Scope& scope, const std::vector<Output>& tensors,
                                HyperParameter clip_norm) {
  ClippedTensors out;
  out.tensors.resize(tensors.size());
  if (!scope.ok()) return out;
  if (absl::Status st = CheckFloat(tensors); !st.ok()) {
    scope.UpdateStatus(st);
    return out;
  }
  Scope s = scope.NewSubScope("clip_by_global_norm");
  out.global_norm = GlobalNormIn(s, tensors);
  Output clip = clip_norm.ToOutput(s, "clip_norm");
  Output one = Const(s.WithOpName("one"), 1.0f);
  // scale = clip_norm * min(1 / norm, 1 / clip_norm), plus (norm - norm) so that a
  // non-finite norm turns the scale into NaN.
  Output scale = Mul(s, clip, Minimum(s, Div(s, one, out.global_norm), Div(s, one, clip)));
  scale = Add(s.WithOpName("scale"), scale, Sub(s, out.global_norm, out.global_norm));
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].valid()) continue;
    out.tensors[i] = Mul(s.WithOpName(absl::StrCat("clipped_", i)), tensors[i], scale);
  }
  return out;
}

ClippedGradients ClipGradientsByGlobalNorm(const Scope& scope,
                                           const std::vector<GradAndVar>& grads_and_vars,
                                           HyperParameter clip_norm) {
  ClippedGradients out;
  out.grads_and_vars = grads_and_vars;
  // One tensor per pair: the dense gradient or the sparse gradient's values.
  std::vector<Output> tensors;
  for (const GradAndVar& gv : grads_and_vars) {
    tensors.push_back(gv.sparse.has_value() ? gv.sparse->values : gv.grad);
  }
  ClippedTensors clipped = ClipByGlobalNorm(scope, tensors, clip_norm);
  out.global_norm = clipped.global_norm;
  if (!scope.ok()) return out;
  for (size_t i = 0; i < grads_and_vars.size(); ++i) {
    GradAndVar& gv = out.grads_and_vars[i];
    if (gv.sparse.has_value()) {
      gv.sparse->values = clipped.tensors[i];
    } else {
      gv.grad = clipped.tensors[i];
    }
  }
  return out;
}

}  // namespace tandem::ops

// framework/ops/clip_ops.h
//
// Gradient clipping by global norm, as tf.clip_by_global_norm: with
//   global_norm = sqrt(sum over tensors of sum(t^2)),
// each tensor becomes t * clip_norm / max(global_norm, clip_norm), so the clipped list's
// global norm is at most clip_norm. A non-finite global norm makes every clipped tensor
// NaN (as TensorFlow). Invalid Outputs (variables without a gradient) are ignored by the
// norm and pass through as invalid, so the result zips with the input list:
//
//   auto gvs = opt.ComputeGradients(scope, loss);
//   std::vector<Output> grads;  for (auto& gv : *gvs) grads.push_back(gv.grad);
//   auto [clipped, norm] = ops::ClipByGlobalNorm(scope, grads, 5.0f);
//   for (size_t i = 0; i < gvs->size(); ++i) (*gvs)[i].grad = clipped[i];
//
// ClipGradientsByGlobalNorm does the same on ComputeGradients' pairs, sparse gradients
// included: as TensorFlow's on IndexedSlices, a sparse gradient counts by its values
// (a repeated index counts once per occurrence) and only its values are scaled:
//
//   auto clipped = ops::ClipGradientsByGlobalNorm(scope, *gvs, 5.0f);
//   opt.ApplyGradients(scope, clipped.grads_and_vars);
//
// Tensors must be float32 (else INVALID_ARGUMENT recorded in the scope).
#ifndef TANDEM_FRAMEWORK_OPS_CLIP_OPS_H_
#define TANDEM_FRAMEWORK_OPS_CLIP_OPS_H_

#include <vector>

#include "framework/graph/scope.h"
#include "framework/ops/optimizer.h"

namespace tandem::ops {

struct ClippedTensors {
  std::vector<Output> tensors;  // Same length as the input, invalid where it was.
  Output global_norm;           // Of the unclipped tensors; float32 scalar.
};

// sqrt(sum(t^2)) over every element of every valid tensor; 0 when there is none.
Output GlobalNorm(const Scope& scope, const std::vector<Output>& tensors);

ClippedTensors ClipByGlobalNorm(const Scope& scope, const std::vector<Output>& tensors,
                                HyperParameter clip_norm);

struct ClippedGradients {
  std::vector<GradAndVar> grads_and_vars;  // As the input, gradients clipped.
  Output global_norm;                      // Of the unclipped gradients; float32 scalar.
};

ClippedGradients ClipGradientsByGlobalNorm(const Scope& scope,
                                           const std::vector<GradAndVar>& grads_and_vars,
                                           HyperParameter clip_norm);

}  // namespace tandem::ops

#endif  // TANDEM_FRAMEWORK_OPS_CLIP_OPS_H_

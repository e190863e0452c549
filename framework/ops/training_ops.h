// framework/ops/training_ops.h
//
// Builders for the optimizers' update ops, with TensorFlow's names, semantics and input
// order. Each takes resource-variable handles first (the variable, then its slots), then
// float32 tensors: the gradient (shaped like the variable) and scalar hyper-parameters.
// The ops are stateful and have no outputs: run them as targets. Their kernels update
// the variables in place under each variable's mutex (copy-on-write keeps values that
// earlier reads returned intact). Running one on an uninitialised variable is
// FAILED_PRECONDITION "Attempting to use uninitialized value <name>"; a gradient or slot
// whose shape differs from the variable's is INVALID_ARGUMENT naming both shapes.
//
//   GradientDescent  var -= alpha * delta
//   Momentum         accum = accum * momentum + grad
//                    var -= lr * accum                       (use_nesterov = false)
//                    var -= lr * grad + lr * momentum * accum (use_nesterov = true)
//   Adagrad          accum += grad^2; var -= lr * grad / sqrt(accum)
//   Adam             lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)
//                    m += (grad - m) * (1 - beta1); v += (grad^2 - v) * (1 - beta2)
//                    var -= lr_t * m / (sqrt(v) + epsilon)
//   RMSProp          ms += (grad^2 - ms) * (1 - rho)
//                    mom = mom * momentum + lr * grad / sqrt(ms + epsilon); var -= mom
//   CenteredRMSProp  as RMSProp with mg += (grad - mg) * (1 - rho) and
//                    denominator sqrt(ms - mg^2 + epsilon)
//   Ftrl             FTRL-Proximal (McMahan et al. 2013) as TensorFlow's ApplyFtrl.
//
// The sparse forms (ResourceSparseApply<op>: GradientDescent, Momentum, Adagrad, Adam, RMSProp,
// CenteredRMSProp, Ftrl; the dense op's inputs with `indices` after `grad`) take the
// gradient of some rows only: grad [n, var.shape[1:]...] and int32/int64 indices [n];
// they apply the dense formula to row indices[i] with grad[i], for i = 0..n-1 in order,
// and leave every other row of var and its slots untouched (TensorFlow's kernels; its
// Adam has no sparse kernel, ResourceSparseApplyAdam is tandem's lazy Adam: m and v of
// the named rows only, with the dense step's bias correction). A
// repeated index is updated once per occurrence, sequentially, as TensorFlow's kernels
// do; the optimizers sum duplicates before calling them (optimizer.h). An index outside
// [0, rows) is INVALID_ARGUMENT naming the op, the position and the index; nothing is
// updated then. Their cost is O(n * row size), whatever the number of rows.
//
// Floor and Cos are elementwise float ops the learning-rate schedules use; they have no
// gradients, so nothing may be differentiated through them.
//
// Every builder records errors in the scope and returns null (or an invalid Output).
#ifndef TANDEM_FRAMEWORK_OPS_TRAINING_OPS_H_
#define TANDEM_FRAMEWORK_OPS_TRAINING_OPS_H_

#include "absl/strings/string_view.h"
#include "framework/graph/scope.h"

namespace tandem::ops {

// The input index of the gradient of dense update `op` (ResourceApplyAdam: 9), or -1
// where `op` is not one. Its _<op>WithMatMul form (registered beside it, CPU kernels
// only) takes MatMul(a, b)'s operands a and b at that index and the next, and attrs
// transpose_a and transpose_b, in place of the gradient: the update computes its
// gradient block of rows by block of rows and applies each block while it is in cache.
int DenseApplyGradientInput(absl::string_view op);

Node* ResourceApplyGradientDescent(const Scope& scope, Output var, Output alpha, Output delta);
// Attr "use_nesterov".
Node* ResourceApplyMomentum(const Scope& scope, Output var, Output accum, Output lr, Output grad,
                            Output momentum, bool use_nesterov = false);
Node* ResourceApplyAdagrad(const Scope& scope, Output var, Output accum, Output lr, Output grad);
// Attr "use_nesterov" (Nesterov-accelerated Adam, as TensorFlow's).
Node* ResourceApplyAdam(const Scope& scope, Output var, Output m, Output v, Output beta1_power,
                        Output beta2_power, Output lr, Output beta1, Output beta2, Output epsilon,
                        Output grad, bool use_nesterov = false);
Node* ResourceApplyRMSProp(const Scope& scope, Output var, Output ms, Output mom, Output lr,
                           Output rho, Output momentum, Output epsilon, Output grad);
Node* ResourceApplyCenteredRMSProp(const Scope& scope, Output var, Output mg, Output ms, Output mom,
                                   Output lr, Output rho, Output momentum, Output epsilon,
                                   Output grad);
// lr > 0, l1 >= 0, l2 >= 0 and lr_power <= 0 are checked when it runs.
Node* ResourceApplyFtrl(const Scope& scope, Output var, Output accum, Output linear, Output grad,
                        Output lr, Output l1, Output l2, Output lr_power);

Node* ResourceSparseApplyGradientDescent(const Scope& scope, Output var, Output alpha,
                                         Output delta, Output indices);
// Attr "use_nesterov".
Node* ResourceSparseApplyMomentum(const Scope& scope, Output var, Output accum, Output lr,
                                  Output grad, Output indices, Output momentum,
                                  bool use_nesterov = false);
Node* ResourceSparseApplyAdagrad(const Scope& scope, Output var, Output accum, Output lr,
                                 Output grad, Output indices);
Node* ResourceSparseApplyAdam(const Scope& scope, Output var, Output m, Output v,
                              Output beta1_power, Output beta2_power, Output lr, Output beta1,
                              Output beta2, Output epsilon, Output grad, Output indices);
Node* ResourceSparseApplyRMSProp(const Scope& scope, Output var, Output ms, Output mom, Output lr,
                                 Output rho, Output momentum, Output epsilon, Output grad,
                                 Output indices);
Node* ResourceSparseApplyCenteredRMSProp(const Scope& scope, Output var, Output mg, Output ms,
                                         Output mom, Output lr, Output rho, Output momentum,
                                         Output epsilon, Output grad, Output indices);
Node* ResourceSparseApplyFtrl(const Scope& scope, Output var, Output accum, Output linear,
                              Output grad, Output indices, Output lr, Output l1, Output l2,
                              Output lr_power);

// Elementwise floor(x) and cos(x) of a float32 tensor.
Output Floor(const Scope& scope, Output x);
Output Cos(const Scope& scope, Output x);

}  // namespace tandem::ops

#endif  // TANDEM_FRAMEWORK_OPS_TRAINING_OPS_H_

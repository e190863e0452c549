// framework/ops/optimizers.h
//
// The concrete optimizers, as tf.train's (TensorFlow 1.x defaults and slot names). The
// base class, GradAndVar, the global step and HyperParameter are in optimizer.h; the
// update formulas in training_ops.h. Every hyper-parameter is a HyperParameter: a float
// or a float32 scalar Output (e.g. a schedule from learning_rate.h).
//
//   GradientDescentOptimizer(lr)                                  no slots
//   MomentumOptimizer(lr, momentum, use_nesterov)                 "momentum" (zeros)
//   AdagradOptimizer(lr, initial_accumulator_value = 0.1)         "accumulator"
//   AdamOptimizer(lr = 0.001, beta1 = 0.9, beta2 = 0.999,         "m", "v" (zeros), and
//                 epsilon = 1e-8)                                 beta1_power, beta2_power
//   RMSPropOptimizer(lr, decay = 0.9, momentum = 0,               "rms" (ones), "mg" (zeros,
//                    epsilon = 1e-10, centered = false)           centered only), "momentum"
//   FtrlOptimizer(lr, learning_rate_power = -0.5,                 "accum", "linear" (zeros)
//                 initial_accumulator_value = 0.1, l1 = 0, l2 = 0)
//   LazyAdamOptimizer(as Adam)                                    as Adam
//
// Sparse gradients (GradAndVar::sparse, e.g. of an embedding table), as TensorFlow 1.x:
//   GradientDescent, duplicates summed first (Unique + UnsortedSegmentSum, TensorFlow's
//   Momentum,        _deduplicate_indexed_slices; TensorFlow's GradientDescent scatter-adds
//   Adagrad, Ftrl,   each duplicate instead), then ResourceSparseApply<op>: the
//   RMSProp,         dense formula on the named rows of var and of its slots, which get
//   LazyAdam         the bits a dense update would give them; every other row and slot
//                    keeps its bits (where a dense update would decay a momentum or a
//                    mean square). The cost is independent of the number of rows.
//   Adam             deduplicated, then Adam._apply_sparse: m and v decayed densely,
//                    (1 - beta) * values (values^2 for v) scatter-added into the named
//                    rows, and a dense var update (so every row moves, as in TF 1.x);
//                    LazyAdamOptimizer is the sparse form above.
//
// Adam's beta1_power and beta2_power are float32 scalar non-trainable variables at the
// root name scope ("beta1_power", "beta2_power"), colocated with the first variable (by
// name), multiplied by beta1 and beta2 after all the updates of a step, as in TF 1.x.
//
// Thread safety: as Optimizer.
#ifndef TANDEM_FRAMEWORK_OPS_OPTIMIZERS_H_
#define TANDEM_FRAMEWORK_OPS_OPTIMIZERS_H_

#include <string>
#include <vector>

#include "framework/ops/optimizer.h"

namespace tandem::ops {

class GradientDescentOptimizer : public Optimizer {
 public:
  explicit GradientDescentOptimizer(HyperParameter learning_rate);
  std::vector<std::string> GetSlotNames() const override { return {}; }

 protected:
  absl::Status CreateSlots(const std::vector<Variable>& vars) override;
  void Prepare(const Scope& scope, absl::string_view prefix) override;
  Node* ApplyDense(const Scope& scope, Output grad, const Variable& var) override;
  Node* ApplySparse(const Scope& scope, const IndexedSlices& grad, const Variable& var) override;

 private:
  HyperParameter learning_rate_;
  Output lr_t_;
};

class MomentumOptimizer : public Optimizer {
 public:
  MomentumOptimizer(HyperParameter learning_rate, HyperParameter momentum,
                    bool use_nesterov = false);
  std::vector<std::string> GetSlotNames() const override { return {"momentum"}; }

 protected:
  absl::Status CreateSlots(const std::vector<Variable>& vars) override;
  void Prepare(const Scope& scope, absl::string_view prefix) override;
  Node* ApplyDense(const Scope& scope, Output grad, const Variable& var) override;
  Node* ApplySparse(const Scope& scope, const IndexedSlices& grad, const Variable& var) override;

 private:
  HyperParameter learning_rate_, momentum_;
  bool use_nesterov_;
  Output lr_t_, momentum_t_;
};

class AdagradOptimizer : public Optimizer {
 public:
  explicit AdagradOptimizer(HyperParameter learning_rate, float initial_accumulator_value = 0.1f);
  std::vector<std::string> GetSlotNames() const override { return {"accumulator"}; }

 protected:
  absl::Status CreateSlots(const std::vector<Variable>& vars) override;
  void Prepare(const Scope& scope, absl::string_view prefix) override;
  Node* ApplyDense(const Scope& scope, Output grad, const Variable& var) override;
  Node* ApplySparse(const Scope& scope, const IndexedSlices& grad, const Variable& var) override;

 private:
  HyperParameter learning_rate_;
  float initial_accumulator_value_;
  Output lr_t_;
};

class AdamOptimizer : public Optimizer {
 public:
  explicit AdamOptimizer(HyperParameter learning_rate = 0.001f, float beta1 = 0.9f,
                         float beta2 = 0.999f, HyperParameter epsilon = 1e-8f);
  std::vector<std::string> GetSlotNames() const override { return {"m", "v"}; }
  // beta1_power and beta2_power of the graph of the last ApplyGradients, if made.
  std::optional<Variable> beta1_power() const { return beta1_power_; }
  std::optional<Variable> beta2_power() const { return beta2_power_; }

 protected:
  absl::Status CreateSlots(const std::vector<Variable>& vars) override;
  void Prepare(const Scope& scope, absl::string_view prefix) override;
  Node* ApplyDense(const Scope& scope, Output grad, const Variable& var) override;
  Node* ApplySparse(const Scope& scope, const IndexedSlices& grad, const Variable& var) override;
  std::vector<Node*> Finish(const Scope& scope, absl::string_view prefix) override;

  HyperParameter learning_rate_;
  float beta1_, beta2_;
  HyperParameter epsilon_;
  std::optional<Variable> beta1_power_, beta2_power_;
  Output lr_t_, beta1_t_, beta2_t_, epsilon_t_;
};

// Adam whose sparse updates touch only the named rows of var, m and v (LazyAdam, as
// TensorFlow Addons'), with the step's bias correction; dense updates are Adam's.
class LazyAdamOptimizer : public AdamOptimizer {
 public:
  using AdamOptimizer::AdamOptimizer;

 protected:
  Node* ApplySparse(const Scope& scope, const IndexedSlices& grad, const Variable& var) override;
};

class RMSPropOptimizer : public Optimizer {
 public:
  explicit RMSPropOptimizer(HyperParameter learning_rate, HyperParameter decay = 0.9f,
                            HyperParameter momentum = 0.0f, HyperParameter epsilon = 1e-10f,
                            bool centered = false);
  std::vector<std::string> GetSlotNames() const override;

 protected:
  absl::Status CreateSlots(const std::vector<Variable>& vars) override;
  void Prepare(const Scope& scope, absl::string_view prefix) override;
  Node* ApplyDense(const Scope& scope, Output grad, const Variable& var) override;
  Node* ApplySparse(const Scope& scope, const IndexedSlices& grad, const Variable& var) override;

 private:
  HyperParameter learning_rate_, decay_, momentum_, epsilon_;
  bool centered_;
  Output lr_t_, decay_t_, momentum_t_, epsilon_t_;
};

class FtrlOptimizer : public Optimizer {
 public:
  explicit FtrlOptimizer(HyperParameter learning_rate, HyperParameter learning_rate_power = -0.5f,
                         float initial_accumulator_value = 0.1f,
                         HyperParameter l1_regularization_strength = 0.0f,
                         HyperParameter l2_regularization_strength = 0.0f);
  std::vector<std::string> GetSlotNames() const override { return {"accum", "linear"}; }

 protected:
  absl::Status CreateSlots(const std::vector<Variable>& vars) override;
  void Prepare(const Scope& scope, absl::string_view prefix) override;
  Node* ApplyDense(const Scope& scope, Output grad, const Variable& var) override;
  Node* ApplySparse(const Scope& scope, const IndexedSlices& grad, const Variable& var) override;

 private:
  HyperParameter learning_rate_, learning_rate_power_;
  float initial_accumulator_value_;
  HyperParameter l1_, l2_;
  Output lr_t_, lr_power_t_, l1_t_, l2_t_;
};

}  // namespace tandem::ops

#endif  // TANDEM_FRAMEWORK_OPS_OPTIMIZERS_H_

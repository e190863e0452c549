// framework/ops/composite_optimizer.h
//
// CompositeOptimizer: one Optimizer made of several, each updating the variables whose
// names start with its prefix, in one ApplyGradients: one train op, one global-step
// increment, and one set of synchronous-replica accumulators or collective all-reduces
// for every gradient (a wide & deep model's FTRL linear part and Adagrad DNN part,
// TensorFlow's DNNLinearCombined, whose two optimizers it groups the same way). Each
// part keeps its own slots ("linear/.../weights/Ftrl", "dnn/.../kernel/Adagrad") and
// hyper-parameters.
//
// A variable that matches no prefix is INVALID_ARGUMENT naming it.
//
// Thread safety: as Optimizer.
#ifndef TANDEM_FRAMEWORK_OPS_COMPOSITE_OPTIMIZER_H_
#define TANDEM_FRAMEWORK_OPS_COMPOSITE_OPTIMIZER_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "framework/ops/optimizer.h"

namespace tandem::ops {

class CompositeOptimizer : public Optimizer {
 public:
  // (name prefix, optimizer) pairs; a variable goes to the first whose prefix matches.
  explicit CompositeOptimizer(
      std::vector<std::pair<std::string, std::unique_ptr<Optimizer>>> parts);
  std::vector<std::string> GetSlotNames() const override;

 protected:
  absl::Status CreateSlots(const std::vector<Variable>& vars) override;
  void Prepare(const Scope& scope, absl::string_view prefix) override;
  Node* ApplyDense(const Scope& scope, Output grad, const Variable& var) override;
  Node* ApplySparse(const Scope& scope, const IndexedSlices& grad, const Variable& var) override;
  std::vector<Node*> Finish(const Scope& scope, absl::string_view prefix) override;

 private:
  // The part of `var`, or null.
  Optimizer* PartOf(const Variable& var) const;

  std::vector<std::pair<std::string, std::unique_ptr<Optimizer>>> parts_;
};

}  // namespace tandem::ops

#endif  // TANDEM_FRAMEWORK_OPS_COMPOSITE_OPTIMIZER_H_

// framework/ops/optimizer.h
//
// Optimizer is the base of the graph-building optimizers (tf.train.Optimizer). Given a
// loss it adds the gradient graph (ComputeGradients) and one update op per variable
// (ApplyGradients); Minimize does both. The train op it returns is a NoOp named `name`
// that depends on every update and, when a global step is given, on the step's
// increment, which itself runs after all updates:
//
//   ops::Variable step = ops::GetOrCreateGlobalStep(scope);
//   ops::AdamOptimizer opt(/*learning_rate=*/0.001f);
//   TANDEM_ASSIGN_OR_RETURN(Node* train_op, opt.Minimize(scope, loss, &step));
//   ... session->Run({}, {}, {train_op->name()});
//
// Slots (per-variable state: accumulators, Adam's m and v) are non-trainable global
// variables created on first use and named "<var>/<OptimizerName>" with TensorFlow's
// unique-name suffixes ("dense/kernel/Adam", "dense/kernel/Adam_1"). Slots and update ops
// are colocated with their variable, so a device function that puts the variable on a
// parameter server puts its optimizer state and updates there too. Slots are remembered
// per optimizer object and graph: a second ApplyGradients on the same graph reuses them.
// Slot initialisers are plain variable initialisers (GlobalVariablesInitializer runs
// them).
//
// Hyper-parameters (the learning rate and the others) are HyperParameters: a float or a
// float32 scalar Output of the graph being built, e.g. a learning-rate schedule
// (learning_rate.h).
//
// Errors: ApplyGradients and Minimize return the first error of the build (also recorded
// in the scope): no variables, a loss that depends on no variable (naming the loss), a
// gradient whose dtype or shape does not fit its variable, a variable given twice.
//
// Thread safety: an Optimizer is used by one thread at a time, as the graph it builds.
#ifndef TANDEM_FRAMEWORK_OPS_OPTIMIZER_H_
#define TANDEM_FRAMEWORK_OPS_OPTIMIZER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/graph/scope.h"
#include "framework/ops/state_ops.h"

namespace tandem::ops {

// The graph collection holding the global step variable (TensorFlow's GraphKeys).
inline constexpr char kGlobalStep[] = "global_step";

// Returns the graph's global step: an int64 scalar non-trainable variable "global_step"
// (initialised to 0) in collections kGlobalVariables and kGlobalStep, created on the
// first call and found again afterwards. It is created at the root name scope with the
// caller's device (and, when the caller is at the root name scope, its device function),
// outside the caller's control dependencies. Errors are recorded in the scope and give
// an invalid Variable.
Variable GetOrCreateGlobalStep(const Scope& scope);
// The global step, or nullopt when the graph has none.
std::optional<Variable> GetGlobalStep(Graph* graph);

// A float hyper-parameter: a constant or a float32 scalar tensor.
class HyperParameter {
 public:
  HyperParameter(float value) : value_(value) {}      // NOLINT: implicit by design.
  HyperParameter(Output tensor) : tensor_(tensor) {}  // NOLINT: implicit by design.

  // The tensor, or a Const named `name` built in `scope`.
  Output ToOutput(const Scope& scope, absl::string_view name) const;
  // The constant value, if it is one.
  std::optional<float> constant() const {
    return tensor_.valid() ? std::nullopt : std::optional<float>(value_);
  }

 private:
  float value_ = 0;
  Output tensor_;
};

// A gradient that is zero except in some rows of its variable (tf.IndexedSlices): row
// indices[i] of the dense gradient is the sum of values[j] over every j with
// indices[j] == indices[i]. Indices may repeat and come in any order.
struct IndexedSlices {
  Output values;       // float32 [n, var.shape[1:]...].
  Output indices;      // int32 or int64 [n].
  Output dense_shape;  // int32 or int64 vector: the variable's shape.
};

// The dense tensor of `slices` (UnsortedSegmentSum of the values into dense_shape[0]
// rows): what a dense gradient of the variable would be. Errors are recorded in the
// scope.
Output IndexedSlicesToDense(const Scope& scope, const IndexedSlices& slices);

// One variable's gradient. At most one of `grad` and `sparse` is set; neither when the
// loss does not depend on `var`. ComputeGradients sets `sparse` (and leaves `grad`
// invalid) for a variable the loss reads only through ResourceGather, e.g. an
// ops::Embedding table; code that handles only dense gradients can replace it by
// {IndexedSlicesToDense(scope, *sparse), var}. Brace-initialising {grad, var} still
// makes a dense pair.
struct GradAndVar {
  Output grad;  // Dense d(loss)/d(var); invalid when sparse or when there is none.
  Variable var;
  std::optional<IndexedSlices> sparse = std::nullopt;

  bool has_gradient() const { return grad.valid() || sparse.has_value(); }
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // "GradientDescent", "Adam", ...: the slot name suffix.
  const std::string& name() const { return name_; }

  // d(loss)/d(var) for each variable of `var_list` (default: the graph's trainable
  // variables), in that order. A variable with a fully defined shape whose every
  // consumer that the loss depends on is a ResourceGather (no ReadVariableOp of it, nor
  // any other op, on the way to the loss) gets a sparse gradient, as TensorFlow's
  // IndexedSlices: values = d(loss)/d(gather output) reshaped to [num_ids, row...],
  // indices = the gather's ids flattened (int32 or int64 as given; several gathers of one
  // table are concatenated, int64 when their id dtypes differ). Every other variable gets
  // a dense gradient.
  absl::StatusOr<std::vector<GradAndVar>> ComputeGradients(
      const Scope& scope, Output loss, const std::vector<Variable>& var_list = {});

  // Adds the update ops for every pair with a gradient (pairs without one are skipped)
  // and returns the train op, a NoOp named `name`. On a graph marked with
  // EnableSyncReplicas (sync_replicas.h) the gradients go to accumulators instead and
  // these updates apply their means (global_step required). If `global_step` is given it is
  // incremented by 1 after all the updates. Not owned; may be null. Sparse gradients
  // update only the rows they name where the optimizer supports it (ApplySparse); a pair
  // with both a dense and a sparse gradient is INVALID_ARGUMENT.
  absl::StatusOr<Node*> ApplyGradients(const Scope& scope,
                                       const std::vector<GradAndVar>& grads_and_vars,
                                       const Variable* global_step = nullptr,
                                       absl::string_view name = "train");

  // ComputeGradients then ApplyGradients.
  absl::StatusOr<Node*> Minimize(const Scope& scope, Output loss,
                                 const Variable* global_step = nullptr,
                                 const std::vector<Variable>& var_list = {},
                                 absl::string_view name = "train");

  // Slot `slot` ("accumulator", "m", ...) of `var` in the graph of the last
  // ApplyGradients, if this optimizer created it.
  std::optional<Variable> GetSlot(const Variable& var, absl::string_view slot) const;
  // The slot names this optimizer uses, e.g. {"m", "v"}.
  virtual std::vector<std::string> GetSlotNames() const = 0;

 protected:
  // `name`: the slot suffix; `apply_op`: the update ops' name ("ResourceApplyAdam").
  Optimizer(std::string name, std::string apply_op);

  // Creates the slots of `vars` (GetOrMakeSlot) and any other state; called once per
  // ApplyGradients before any update, with the variables in the order given.
  virtual absl::Status CreateSlots(const std::vector<Variable>& vars) = 0;
  // Turns hyper-parameters into tensors in `scope`, naming them "<prefix>/<name>"
  // (HyperParameter::ToOutput); called once per ApplyGradients after CreateSlots.
  virtual void Prepare(const Scope& scope, absl::string_view prefix) = 0;
  // Adds the update of `var` by `grad` and returns it. `scope` names the one op it adds
  // and colocates it with `var`.
  virtual Node* ApplyDense(const Scope& scope, Output grad, const Variable& var) = 0;
  // Adds the update of `var` by a sparse gradient and returns the op that completes it
  // (every other op it adds is an ancestor of it). `scope` is a name scope
  // "<prefix>/update_<var>" colocated with `var`. The default densifies the gradient
  // (IndexedSlicesToDense) and calls ApplyDense: every row is updated.
  virtual Node* ApplySparse(const Scope& scope, const IndexedSlices& grad, const Variable& var);
  // Adds updates that must run after all of the ApplyDense updates (`scope` has control
  // dependencies on them), naming them "<prefix>/...", e.g. Adam's beta powers. None by
  // default.
  virtual std::vector<Node*> Finish(const Scope& scope, absl::string_view prefix) { return {}; }

  // The collective path under CollectiveTables::kAppliedOnce: BuildUpdates without the
  // tables unless `applies_tables`, then a barrier after the updates (collective_ops.h).
  absl::StatusOr<Node*> ApplyTablesOnce(const Scope& scope, const std::vector<Variable>& vars,
                                        const std::vector<Output>& dense,
                                        const std::vector<IndexedSlices>& slices,
                                        bool applies_tables, const Variable* global_step,
                                        absl::string_view name);

  // The slot `slot` of `var` in the graph being built, created the first time with every
  // element `initial_value`, non-trainable, named "<var>/<name()>" (made unique) and
  // colocated with `var`, a table when `var` is one (VariableOptions::table). REQUIRES:
  // var's shape fully defined (else INVALID_ARGUMENT).
  absl::StatusOr<Variable> GetOrMakeSlot(const Variable& var, absl::string_view slot,
                                         float initial_value);
  // A float32 scalar non-trainable variable `var_name` at the root name scope that is not
  // tied to one variable (Adam's beta powers), colocated with `colocate_with` (a table
  // when that is one); created on first use with `initial_value`.
  absl::StatusOr<Variable> GetOrMakeNonSlot(absl::string_view var_name, float initial_value,
                                            const Variable& colocate_with);
  // The Variable found by GetOrMakeSlot (CHECK-fails if it was not made: a bug).
  Variable Slot(const Variable& var, absl::string_view slot) const;

  // The graph of the ApplyGradients call in progress.
  Graph* graph() const { return graph_; }

  // TensorFlow's _deduplicate_indexed_slices: Unique of the indices, and the values of
  // repeated indices summed (UnsortedSegmentSum), so each row appears once.
  static IndexedSlices DeduplicateIndexedSlices(const Scope& scope, const IndexedSlices& grad);

 private:
  friend class CompositeOptimizer;  // Drives its parts' slots and updates.

  // The updates of ApplyGradients once its arguments are checked.
  absl::StatusOr<Node*> BuildUpdates(const Scope& scope, const std::vector<Variable>& vars,
                                     const std::vector<Output>& grads,
                                     const std::vector<const IndexedSlices*>& sparse,
                                     const Variable* global_step, absl::string_view name);
  // The collection mapping (this optimizer, slot, var) to the slot variable's name.
  std::string SlotKey(absl::string_view slot, const std::string& var_name) const;

  const std::string name_;
  const std::string apply_op_;
  const int64_t id_;  // Tells optimizer objects apart in the graph's collections.
  Graph* graph_ = nullptr;
};

}  // namespace tandem::ops

#endif  // TANDEM_FRAMEWORK_OPS_OPTIMIZER_H_

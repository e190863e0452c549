// framework/ops/state_ops.h
//
// Resource variables. A Variable is a VarHandleOp (the handle, a resource tensor;
// attrs "dtype", "shape", "container", "shared_name"), an initializer
// (AssignVariableOp of the initial value) and a cached read (ReadVariableOp). Its
// ops are colocated with the handle, so a device function that puts the handle on a
// parameter server puts the variable's storage, reads and updates there too.
//
// Assign, AssignAdd and AssignSub output the value after the update. Reading a
// variable that was never assigned is FAILED_PRECONDITION
// "Attempting to use uninitialized value <name>".
//
// A variable (handle, initializer, read) is built outside the scope's control
// dependencies, as TensorFlow's init_scope does, so initialising it never waits for the
// ops a model function is made to depend on. Layers build initial values the same way.
//
// Variables are recorded in the graph collections kGlobalVariables and (when
// trainable) kTrainableVariables by handle node name; Variable::FromGraph rebuilds
// the object from a name.
#ifndef TANDEM_FRAMEWORK_OPS_STATE_OPS_H_
#define TANDEM_FRAMEWORK_OPS_STATE_OPS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/graph/scope.h"

namespace tandem::ops {

inline constexpr char kGlobalVariables[] = "variables";
inline constexpr char kTrainableVariables[] = "trainable_variables";
inline constexpr char kLocalVariables[] = "local_variables";
inline constexpr char kUpdateOps[] = "update_ops";
inline constexpr char kLosses[] = "losses";
inline constexpr char kRegularizationLosses[] = "regularization_losses";
inline constexpr char kSummaries[] = "summaries";

struct VariableOptions {
  bool trainable = true;
  // Collections besides the defaults (kGlobalVariables or, if local, kLocalVariables).
  std::vector<std::string> collections;
  bool local = false;  // In kLocalVariables instead of kGlobalVariables (metrics).
  // A table: a large, sparsely touched variable (an embedding, a linear model's
  // weights per category). Its handle carries attr kTableAttr = true; the hybrid
  // strategy keeps tables on the parameter servers and mirrors everything else.
  bool table = false;
};

// The attr that marks a table's VarHandleOp (VariableOptions::table).
inline constexpr char kTableAttr[] = "_table";
// True when `handle` (a VarHandleOp node) was created as a table.
bool IsTableHandle(const Node& handle);

class Variable {
 public:
  Variable() = default;
  // Creates the variable `name` (under the scope's name scope) with the value of
  // `initial_value` (whose dtype and static shape it takes).
  Variable(const Scope& scope, absl::string_view name, Output initial_value,
           const VariableOptions& options = {});
  // Creates the variable `name` of `dtype` and `shape` whose initial value `init` builds
  // in the scope it is given: under "<name>/Initializer", colocated with the variable's
  // handle (TensorFlow's initializer callables), so a variable on a parameter server is
  // initialised there and its initial value never crosses the network.
  Variable(const Scope& scope, absl::string_view name, DType dtype, const PartialShape& shape,
           const std::function<Output(const Scope&)>& init, const VariableOptions& options = {});
  // Rebuilds a Variable from its handle node's name in `graph`.
  static absl::StatusOr<Variable> FromGraph(Graph* graph, const std::string& handle_name);

  bool valid() const { return handle_.valid(); }
  const std::string& name() const;  // The handle node's name, e.g. "dense/kernel".
  Output handle() const { return handle_; }
  // A read created with the variable ("<name>/Read/ReadVariableOp").
  Output value() const { return value_; }
  Node* initializer() const { return initializer_; }
  DType dtype() const;
  const PartialShape& shape() const;

 private:
  // Both constructors: the handle, then the initial value from `init`, which gets the
  // scope colocated with the handle.
  void Build(const Scope& scope, absl::string_view name, DType dtype, const PartialShape& shape,
             const std::function<Output(const Scope& colocated)>& init,
             const VariableOptions& options);

  Output handle_;
  Output value_;
  Node* initializer_ = nullptr;
};

// Raw op builders.
Output VarHandleOp(const Scope& scope, DType dtype, const PartialShape& shape,
                   const std::string& shared_name = "");
Output ReadVariableOp(const Scope& scope, Output handle, DType dtype);
Output AssignVariableOp(const Scope& scope, Output handle, Output value);
Output AssignAddVariableOp(const Scope& scope, Output handle, Output value);
Output AssignSubVariableOp(const Scope& scope, Output handle, Output value);
Output VarIsInitializedOp(const Scope& scope, Output handle);
// ResourceGather(handle, indices): rows of the variable, the embedding lookup.
Output ResourceGather(const Scope& scope, Output handle, Output indices, DType dtype);
// ResourceScatterAdd/Sub(handle, indices, updates): var[indices[i], ...] += (-=)
// updates[i, ...] for every i in order, so duplicate indices accumulate (as TensorFlow's
// scatter_add). updates has shape indices.shape + var.shape[1:] and the variable's dtype
// (float32, int32 or int64); attr "dtype". No outputs; an index outside [0, rows) is
// INVALID_ARGUMENT naming the op, the position and the index, and leaves the variable
// unchanged. The update costs O(updates), whatever the variable's size.
Node* ResourceScatterAdd(const Scope& scope, Output handle, Output indices, Output updates);
Node* ResourceScatterSub(const Scope& scope, Output handle, Output indices, Output updates);

// Convenience forms on Variables.
Output Assign(const Scope& scope, const Variable& var, Output value);
Output AssignAdd(const Scope& scope, const Variable& var, Output value);
Output AssignSub(const Scope& scope, const Variable& var, Output value);

// Variables named in a collection, in insertion order.
absl::StatusOr<std::vector<Variable>> VariablesInCollection(Graph* graph, const std::string& key);
// A NoOp depending on the initializers of every global (or local) variable.
Node* GlobalVariablesInitializer(const Scope& scope);
Node* LocalVariablesInitializer(const Scope& scope);

}  // namespace tandem::ops

#endif  // TANDEM_FRAMEWORK_OPS_STATE_OPS_H_

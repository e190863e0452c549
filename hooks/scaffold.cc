// hooks/scaffold.cc
#include "hooks/scaffold.h"

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/graph/scope.h"
#include "framework/ops/state_ops.h"

namespace tandem {
namespace {

// The given op name must name a node of the graph.
absl::Status CheckNodeExists(Graph* graph, const std::string& name, absl::string_view what) {
  if (graph->FindNode(name) == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("Scaffold: ", what, " '", name, "' is not a node of the graph"));
  }
  return absl::OkStatus();
}

}  // namespace

Scaffold::Scaffold(ScaffoldOptions options) : options_(std::move(options)) {}

absl::Status Scaffold::Finalize(Graph* graph) {
  if (graph == nullptr) return absl::InvalidArgumentError("Scaffold::Finalize: null graph");
  if (graph_ == graph) return absl::OkStatus();
  if (graph_ != nullptr) {
    return absl::FailedPreconditionError(
        "Scaffold::Finalize: the scaffold was already finalized for another graph");
  }
  Scope root = Scope::ForGraph(graph);

  std::string init_op = options_.init_op;
  if (init_op.empty()) {
    Node* n = ops::GlobalVariablesInitializer(root);
    if (n == nullptr) return AnnotateStatus(root.status(), "Scaffold: creating init_op");
    init_op = n->name();
  } else {
    TANDEM_RETURN_IF_ERROR(CheckNodeExists(graph, init_op, "init_op"));
  }

  std::string local_init_op = options_.local_init_op;
  if (local_init_op.empty()) {
    Node* n = ops::LocalVariablesInitializer(root);
    if (n == nullptr) return AnnotateStatus(root.status(), "Scaffold: creating local_init_op");
    local_init_op = n->name();
  } else {
    TANDEM_RETURN_IF_ERROR(CheckNodeExists(graph, local_init_op, "local_init_op"));
  }

  TANDEM_ASSIGN_OR_RETURN(std::vector<ops::Variable> vars,
                          ops::VariablesInCollection(graph, ops::kGlobalVariables));
  std::vector<std::string> ready_tensors, ready_names;
  Scope ready = root.NewSubScope("report_uninitialized_variables");
  for (const ops::Variable& v : vars) {
    // Colocated with the variable: the check runs where the variable lives.
    Output is_init = ops::VarIsInitializedOp(
        ready.ColocateWith(v.handle().node).WithOpName("VarIsInitializedOp"), v.handle());
    if (!is_init.valid()) break;
    ready_tensors.push_back(is_init.name());
    ready_names.push_back(v.name());
  }
  if (!root.ok()) return AnnotateStatus(root.status(), "Scaffold: creating the readiness check");

  absl::StatusOr<std::unique_ptr<checkpoint::Saver>> saver =
      checkpoint::Saver::Create(graph, options_.saver_options);
  if (!saver.ok()) return AnnotateStatus(saver.status(), "Scaffold: creating the saver");

  init_op_ = std::move(init_op);
  local_init_op_ = std::move(local_init_op);
  ready_tensors_ = std::move(ready_tensors);
  ready_names_ = std::move(ready_names);
  saver_ = *std::move(saver);
  graph_ = graph;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> Scaffold::UninitializedVariables(Session* session) const {
  if (!finalized()) {
    return absl::FailedPreconditionError(
        "Scaffold::UninitializedVariables: call Finalize(graph) first");
  }
  if (ready_tensors_.empty()) return std::vector<std::string>();
  absl::StatusOr<std::vector<Tensor>> values = session->Run({}, ready_tensors_);
  if (!values.ok()) {
    return AnnotateStatus(values.status(), "Scaffold: checking which variables are initialized");
  }
  if (values->size() != ready_tensors_.size()) {
    return absl::InternalError("Scaffold: session returned the wrong number of values");
  }
  std::vector<std::string> uninitialized;
  for (size_t i = 0; i < values->size(); ++i) {
    const Tensor& t = (*values)[i];
    if (t.dtype() != DType::kBool || t.NumElements() != 1) {
      return absl::InternalError(
          absl::StrCat("Scaffold: ", ready_tensors_[i], " is not a bool scalar"));
    }
    if (!t.scalar<bool>()) uninitialized.push_back(ready_names_[i]);
  }
  return uninitialized;
}

}  // namespace tandem

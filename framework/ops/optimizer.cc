// Optimizer base class, slots and the global step (see optimizer.h).
#include "framework/ops/optimizer.h"

#include <atomic>
#include <limits>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/status.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/collective_ops.h"
#include "framework/ops/gradients.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/partitioned_variables.h"
#include "framework/ops/sync_replicas.h"

namespace tandem::ops {
namespace {

int64_t NextOptimizerId() {
  static std::atomic<int64_t> next{0};
  return next.fetch_add(1);
}

// Checks a sparse gradient against its variable: float32 values of rank var's rank whose
// trailing dimensions are the variable's, int32/int64 indices.
absl::Status CheckSparse(const IndexedSlices& g, const Variable& var) {
  if (!g.values.valid() || !g.indices.valid()) {
    return absl::InvalidArgumentError(absl::StrCat("ApplyGradients: the sparse gradient of ",
                                                   var.name(), " has invalid values or indices"));
  }
  if (var.dtype() != DType::kFloat || g.values.dtype() != DType::kFloat) {
    return absl::InvalidArgumentError(
        absl::StrCat("ApplyGradients: variable ", var.name(), " (", DTypeName(var.dtype()),
                     ") with sparse gradient values ", g.values.name(), " (",
                     DTypeName(g.values.dtype()), "): only float32 is supported"));
  }
  if (g.indices.dtype() != DType::kInt32 && g.indices.dtype() != DType::kInt64) {
    return absl::InvalidArgumentError(
        absl::StrCat("ApplyGradients: the sparse gradient of ", var.name(), " has ",
                     DTypeName(g.indices.dtype()), " indices; int32 or int64 expected"));
  }
  const PartialShape& vs = var.shape();
  const PartialShape& gs = g.values.shape();
  bool ok = !vs.known_rank() || vs.rank() >= 1;
  if (ok && vs.known_rank() && gs.known_rank()) {
    ok = gs.rank() == vs.rank();
    for (int d = 1; ok && d < vs.rank(); ++d) {
      ok = vs.dim(d) < 0 || gs.dim(d) < 0 || vs.dim(d) == gs.dim(d);
    }
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("ApplyGradients: sparse gradient values ", g.values.name(), " have shape ",
                     gs.DebugString(), " but variable ", var.name(), " has shape ",
                     vs.DebugString(), " (values must be [n] + var.shape[1:])"));
  }
  return absl::OkStatus();
}

std::string VariableNames(const std::vector<Variable>& vars) {
  return absl::StrJoin(vars, ", ",
                       [](std::string* out, const Variable& v) { absl::StrAppend(out, v.name()); });
}

// A constant of `shape` with every element `value`: a scalar Const, else Fill.
Output FilledConst(const Scope& scope, absl::string_view name, const PartialShape& shape,
                   float value) {
  if (shape.rank() == 0) return Const(scope.WithOpName(name), Tensor::Scalar<float>(value));
  bool fits_int32 = true;
  for (int64_t d : shape.dims()) fits_int32 &= d <= std::numeric_limits<int32_t>::max();
  Output dims;
  if (fits_int32) {
    std::vector<int32_t> d(shape.dims().begin(), shape.dims().end());
    dims = ConstInt32(scope.WithOpName(absl::StrCat(name, "/shape")), d);
  } else {
    dims = ConstInt64(scope.WithOpName(absl::StrCat(name, "/shape")),
                      std::vector<int64_t>(shape.dims().begin(), shape.dims().end()));
  }
  Output v = Const(scope.WithOpName(absl::StrCat(name, "/value")), Tensor::Scalar<float>(value));
  return Fill(scope.WithOpName(name), dims, v);
}

// The variable's shape as a Const vector (int32 when every dimension fits).
Output ShapeConst(const Scope& scope, const PartialShape& shape) {
  bool fits_int32 = true;
  for (int64_t d : shape.dims()) fits_int32 &= d <= std::numeric_limits<int32_t>::max();
  if (fits_int32) {
    return ConstInt32(scope, std::vector<int32_t>(shape.dims().begin(), shape.dims().end()));
  }
  return ConstInt64(scope, std::vector<int64_t>(shape.dims().begin(), shape.dims().end()));
}

// The sparse gradient of `var` from the gradients `dys` of its gathers `gathers` (invalid
// entries: gathers the loss does not differentiate through); nullopt when none is valid.
std::optional<IndexedSlices> SparseGradient(const Scope& scope, const Variable& var,
                                            const std::vector<Node*>& gathers,
                                            const std::vector<Output>& dys) {
  const PartialShape& shape = var.shape();
  std::vector<int64_t> row_shape{-1};
  row_shape.insert(row_shape.end(), shape.dims().begin() + 1, shape.dims().end());
  std::vector<Output> values, indices;
  bool mixed = false;
  for (size_t k = 0; k < gathers.size(); ++k) {
    if (!dys[k].valid()) continue;
    Output ids = gathers[k]->input(1);
    const PartialShape& ids_shape = ids.shape();
    if (ids_shape.known_rank() && ids_shape.rank() == 1) {
      values.push_back(dys[k]);
      indices.push_back(ids);
    } else {
      values.push_back(Reshape(scope, dys[k], row_shape));
      indices.push_back(Reshape(scope, ids, std::vector<int64_t>{-1}));
    }
    mixed |= indices.back().dtype() != indices.front().dtype();
  }
  if (values.empty()) return std::nullopt;
  IndexedSlices out;
  if (values.size() == 1) {
    out.values = values[0];
    out.indices = indices[0];
  } else {
    if (mixed) {
      for (Output& i : indices) {
        if (i.dtype() != DType::kInt64) i = Cast(scope, i, DType::kInt64);
      }
    }
    out.values = Concat(scope.WithOpName("values"), values, 0);
    out.indices = Concat(scope.WithOpName("indices"), indices, 0);
  }
  out.dense_shape = ShapeConst(scope.WithOpName("dense_shape"), shape);
  return out;
}

// The rows of each sparse gradient (unset where the gradient is dense).
std::vector<std::optional<GradientRows>> Rows(const std::vector<const IndexedSlices*>& sparse) {
  std::vector<std::optional<GradientRows>> rows(sparse.size());
  for (size_t i = 0; i < sparse.size(); ++i) {
    if (sparse[i] != nullptr) rows[i] = GradientRows{sparse[i]->indices, sparse[i]->values};
  }
  return rows;
}

// Reduced rows as IndexedSlices of their variables (empty where unset). The dense shape
// is the variable's shape as a constant: the replica's gradient graph is not part of
// the update (the sync-replicas chief's update runs without it).
std::vector<IndexedSlices> RowsAsSlices(const Scope& scope,
                                        const std::vector<std::optional<GradientRows>>& rows,
                                        const std::vector<Variable>& vars, absl::string_view name) {
  std::vector<IndexedSlices> slices(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i]) continue;
    slices[i] = IndexedSlices{
        rows[i]->values, rows[i]->indices,
        ConstInt64(scope.WithOpName(absl::StrCat(name, "/", vars[i].name(), "/dense_shape")),
                   vars[i].shape().dims())};
  }
  return slices;
}

// Pointers to the set slices of `slices`, null elsewhere (BuildUpdates' `sparse`).
std::vector<const IndexedSlices*> Pointers(const std::vector<IndexedSlices>& slices) {
  std::vector<const IndexedSlices*> out(slices.size(), nullptr);
  for (size_t i = 0; i < slices.size(); ++i) {
    if (slices[i].values.valid()) out[i] = &slices[i];
  }
  return out;
}

}  // namespace

Output IndexedSlicesToDense(const Scope& scope, const IndexedSlices& slices) {
  if (!scope.ok()) return Output();
  if (!slices.values.valid() || !slices.indices.valid() || !slices.dense_shape.valid()) {
    scope.UpdateStatus(absl::InvalidArgumentError("IndexedSlicesToDense: invalid IndexedSlices"));
    return Output();
  }
  // The number of rows: a constant when dense_shape is one (static shapes downstream).
  Output rows;
  const Node* shape_node = slices.dense_shape.node;
  if (shape_node->op() == "Const") {
    auto value = GetAttr<Tensor>(shape_node->attrs(), "value");
    if (value.ok() && value->rank() == 1 && value->NumElements() >= 1 &&
        (value->dtype() == DType::kInt32 || value->dtype() == DType::kInt64)) {
      rows = value->dtype() == DType::kInt32
                 ? ConstInt32(scope, value->data<int32_t>()[0])
                 : Const(scope, Tensor::Scalar<int64_t>(value->data<int64_t>()[0]));
    }
  }
  if (!rows.valid()) rows = Gather(scope, slices.dense_shape, ConstInt32(scope, 0));
  return UnsortedSegmentSum(scope, slices.values, slices.indices, rows);
}

IndexedSlices Optimizer::DeduplicateIndexedSlices(const Scope& scope, const IndexedSlices& grad) {
  std::vector<Output> unique = Unique(scope, grad.indices, grad.indices.dtype());
  if (unique.size() != 2) return IndexedSlices{};
  Output summed = UnsortedSegmentSum(scope, grad.values, unique[1], Size(scope, unique[0]));
  return IndexedSlices{summed, unique[0], grad.dense_shape};
}

Node* Optimizer::ApplySparse(const Scope& scope, const IndexedSlices& grad, const Variable& var) {
  return ApplyDense(scope, IndexedSlicesToDense(scope, grad), var);
}

std::optional<Variable> GetGlobalStep(Graph* graph) {
  const std::vector<std::string>& names = graph->GetCollection(kGlobalStep);
  if (!names.empty()) {
    auto v = Variable::FromGraph(graph, names.front());
    if (v.ok()) return *v;
  }
  Node* n = graph->FindNode("global_step");
  if (n != nullptr && n->op() == "VarHandleOp") {
    auto v = Variable::FromGraph(graph, "global_step");
    if (v.ok()) return *v;
  }
  return std::nullopt;
}

Variable GetOrCreateGlobalStep(const Scope& scope) {
  if (!scope.ok()) return Variable();
  Graph* graph = scope.graph();
  if (std::optional<Variable> found = GetGlobalStep(graph)) {
    if (graph->GetCollection(kGlobalStep).empty()) {
      graph->AddToCollection(kGlobalStep, found->name());
    }
    return *found;
  }
  // At the root name scope, outside control dependencies and colocation. A scope at the
  // root keeps its device function (e.g. a replica device setter).
  Scope root = scope.name_scope().empty() ? scope.WithNoControlDependencies().ClearColocation()
                                          : Scope::ForGraph(graph).WithDevice(scope.device());
  Output zero = Const(root.WithOpName("global_step/Initializer/zeros"), Tensor::Scalar<int64_t>(0));
  Variable step(root, "global_step", zero,
                VariableOptions{.trainable = false, .collections = {kGlobalStep}});
  if (!root.ok()) {
    scope.UpdateStatus(root.status());
    return Variable();
  }
  return step;
}

Output HyperParameter::ToOutput(const Scope& scope, absl::string_view name) const {
  if (tensor_.valid()) return tensor_;
  return Const(scope.WithOpName(name), Tensor::Scalar<float>(value_));
}

Optimizer::Optimizer(std::string name, std::string apply_op)
    : name_(std::move(name)), apply_op_(std::move(apply_op)), id_(NextOptimizerId()) {}

absl::StatusOr<std::vector<GradAndVar>> Optimizer::ComputeGradients(
    const Scope& scope, Output loss, const std::vector<Variable>& var_list) {
  TANDEM_RETURN_IF_ERROR(scope.status());
  if (!loss.valid()) return absl::InvalidArgumentError("ComputeGradients: invalid loss");
  if (loss.dtype() != DType::kFloat) {
    return absl::InvalidArgumentError(absl::StrCat("loss ", loss.name(), " is ",
                                                   DTypeName(loss.dtype()),
                                                   "; only float32 losses can be minimized"));
  }
  std::vector<Variable> vars = var_list;
  if (vars.empty()) {
    TANDEM_ASSIGN_OR_RETURN(vars, VariablesInCollection(scope.graph(), kTrainableVariables));
  }
  if (vars.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("No variables to optimize (minimizing ", loss.name(), ")"));
  }
  // Nodes the loss depends on (data edges).
  Graph* g = scope.graph();
  std::vector<char> to_loss(g->num_nodes(), 0);
  std::vector<const Node*> stack{loss.node};
  to_loss[loss.node->id()] = 1;
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const Output& in : n->inputs()) {
      if (!to_loss[in.node->id()]) {
        to_loss[in.node->id()] = 1;
        stack.push_back(in.node);
      }
    }
  }
  // xs: the handle of each dense variable, the outputs of each sparse variable's gathers.
  std::vector<Output> xs;
  std::vector<std::vector<Node*>> gathers(vars.size());
  std::vector<size_t> first_x(vars.size());
  for (size_t i = 0; i < vars.size(); ++i) {
    const Variable& v = vars[i];
    if (!v.valid()) return absl::InvalidArgumentError("ComputeGradients: invalid variable");
    first_x[i] = xs.size();
    bool sparse = v.dtype() == DType::kFloat && v.shape().IsFullyDefined() && v.shape().rank() >= 1;
    for (const auto& [consumer, slot] : v.handle().node->out_edges()) {
      if (!sparse) break;
      if (!to_loss[consumer->id()]) continue;
      if (consumer->op() == "ResourceGather" && slot == 0) {
        gathers[i].push_back(consumer);
      } else {
        sparse = false;
      }
    }
    if (!sparse || gathers[i].empty()) {
      gathers[i].clear();
      xs.push_back(v.handle());
      continue;
    }
    for (Node* gather : gathers[i]) xs.push_back(Output(gather, 0));
  }
  absl::StatusOr<std::vector<Output>> grads = Gradients(scope, {loss}, xs);
  if (!grads.ok()) {
    scope.UpdateStatus(grads.status());
    return grads.status();
  }
  std::vector<GradAndVar> out;
  for (size_t i = 0; i < vars.size(); ++i) {
    if (gathers[i].empty()) {
      out.push_back({(*grads)[first_x[i]], vars[i]});
      continue;
    }
    std::vector<Output> dys(grads->begin() + first_x[i],
                            grads->begin() + first_x[i] + gathers[i].size());
    Scope ss = scope.NewSubScope(absl::StrCat("gradients/", vars[i].name(), "_indexed_slices"));
    out.push_back({Output(), vars[i], SparseGradient(ss, vars[i], gathers[i], dys)});
  }
  TANDEM_RETURN_IF_ERROR(scope.status());
  return out;
}

absl::StatusOr<Node*> Optimizer::ApplyGradients(const Scope& scope,
                                                const std::vector<GradAndVar>& grads_and_vars,
                                                const Variable* global_step,
                                                absl::string_view name) {
  TANDEM_RETURN_IF_ERROR(scope.status());
  auto fail = [&scope](absl::Status s) {
    scope.UpdateStatus(s);
    return s;
  };
  std::vector<Variable> vars, all_vars;
  std::vector<Output> grads;
  std::vector<const IndexedSlices*> sparse;  // Parallel to grads; null for dense ones.
  absl::flat_hash_set<std::string> seen;
  for (const GradAndVar& gv : grads_and_vars) {
    if (!gv.var.valid())
      return fail(absl::InvalidArgumentError("ApplyGradients: invalid variable"));
    all_vars.push_back(gv.var);
    if (!seen.insert(gv.var.name()).second) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("ApplyGradients: variable ", gv.var.name(), " is given twice")));
    }
    if (gv.sparse.has_value()) {
      if (gv.grad.valid()) {
        return fail(
            absl::InvalidArgumentError(absl::StrCat("ApplyGradients: variable ", gv.var.name(),
                                                    " has both a dense and a sparse gradient")));
      }
      if (absl::Status s = CheckSparse(*gv.sparse, gv.var); !s.ok()) return fail(s);
      vars.push_back(gv.var);
      grads.push_back(Output());
      sparse.push_back(&*gv.sparse);
      continue;
    }
    if (!gv.grad.valid()) continue;
    if (gv.var.dtype() != DType::kFloat || gv.grad.dtype() != DType::kFloat) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("ApplyGradients: variable ", gv.var.name(), " (", DTypeName(gv.var.dtype()),
                       ") with gradient ", gv.grad.name(), " (", DTypeName(gv.grad.dtype()),
                       "): only float32 is supported")));
    }
    if (!gv.var.shape().IsCompatibleWith(gv.grad.shape())) {
      return fail(absl::InvalidArgumentError(absl::StrCat(
          "ApplyGradients: gradient ", gv.grad.name(), " has shape ", gv.grad.shape().DebugString(),
          " but variable ", gv.var.name(), " has shape ", gv.var.shape().DebugString())));
    }
    vars.push_back(gv.var);
    grads.push_back(gv.grad);
    sparse.push_back(nullptr);
  }
  if (vars.empty()) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("No gradients provided for any variable, check your graph for ops that do not "
                     "support gradients, between variables [",
                     VariableNames(all_vars), "]")));
  }
  if (global_step != nullptr) {
    if (!global_step->valid() ||
        (global_step->dtype() != DType::kInt64 && global_step->dtype() != DType::kInt32)) {
      return fail(absl::InvalidArgumentError(
          "ApplyGradients: global_step must be an int64 (or int32) variable"));
    }
  }
  if (SyncReplicasEnabled(*scope.graph())) {
    if (global_step == nullptr) {
      return fail(absl::InvalidArgumentError(
          "synchronous replicas need the global step: ApplyGradients(..., &global_step)"));
    }
    // Sparse gradients go to the accumulators as rows and come back as rows.
    absl::StatusOr<Node*> train = internal::BuildSyncReplicas(
        scope, vars, grads, Rows(sparse), *global_step, name,
        [&](const std::vector<Output>& means,
            const std::vector<std::optional<GradientRows>>& sparse_means) {
          const std::string update = absl::StrCat(name, "_sync_update");
          std::vector<IndexedSlices> slices = RowsAsSlices(scope, sparse_means, vars, update);
          return BuildUpdates(scope, vars, means, Pointers(slices), global_step, update);
        });
    if (!train.ok()) return fail(train.status());
    return train;
  }
  if (CollectiveAllReduceEnabled(*scope.graph())) {
    // Sparse gradients are all-gathered as rows and applied as rows.
    absl::StatusOr<ReducedGradients> reduced = ReduceGradients(scope, grads, Rows(sparse), vars);
    if (!reduced.ok()) return fail(reduced.status());
    std::vector<IndexedSlices> slices = RowsAsSlices(scope, reduced->rows, vars, name);
    const CollectiveTableMode mode = CollectiveTablesOf(*scope.graph());
    if (mode.tables != CollectiveTables::kAppliedOnce) {
      return BuildUpdates(scope, vars, reduced->dense, Pointers(slices), global_step, name);
    }
    absl::StatusOr<Node*> train = ApplyTablesOnce(scope, vars, reduced->dense, slices,
                                                  mode.applies_tables, global_step, name);
    if (!train.ok()) return fail(train.status());
    return train;
  }
  return BuildUpdates(scope, vars, grads, sparse, global_step, name);
}

absl::StatusOr<Node*> Optimizer::ApplyTablesOnce(const Scope& scope,
                                                 const std::vector<Variable>& vars,
                                                 const std::vector<Output>& dense,
                                                 const std::vector<IndexedSlices>& slices,
                                                 bool applies_tables, const Variable* global_step,
                                                 absl::string_view name) {
  std::vector<Variable> v;
  std::vector<Output> g;
  std::vector<const IndexedSlices*> s;
  bool tables = false;
  for (size_t i = 0; i < vars.size(); ++i) {
    if (IsTableHandle(*vars[i].handle().node)) {
      tables = true;
      if (!applies_tables) continue;
    }
    v.push_back(vars[i]);
    g.push_back(dense[i]);
    s.push_back(slices[i].values.valid() ? &slices[i] : nullptr);
  }
  if (!tables) return BuildUpdates(scope, vars, dense, Pointers(slices), global_step, name);
  TANDEM_ASSIGN_OR_RETURN(Node * updates, BuildUpdates(scope, v, g, s, global_step, name));
  // The barrier: every replica's step ends once the applying replica's update is in.
  Output token = Const(scope.WithOpName(absl::StrCat(name, "/tables_applied/token"))
                           .WithControlDependencies(std::vector<Node*>{updates}),
                       Tensor::Scalar<float>(0));
  std::vector<Output> barrier =
      CollectiveAllReduce(scope.WithOpName(absl::StrCat(name, "/tables_applied")), {token},
                          NextInstanceKey(*scope.graph(), "CollectiveAllReduce",
                                          kTableBarrierInstanceKey, kTableBarrierInstanceKey * 2),
                          /*average=*/false);
  TANDEM_RETURN_IF_ERROR(scope.status());
  Node* train = NoOp(scope.WithOpName(absl::StrCat(name, "/after_tables"))
                         .WithControlDependencies(std::vector<Node*>{updates, barrier[0].node}));
  TANDEM_RETURN_IF_ERROR(scope.status());
  return train;
}

absl::StatusOr<Node*> Optimizer::BuildUpdates(const Scope& scope, const std::vector<Variable>& vars,
                                              const std::vector<Output>& grads,
                                              const std::vector<const IndexedSlices*>& sparse,
                                              const Variable* global_step, absl::string_view name) {
  auto fail = [&scope](absl::Status s) {
    scope.UpdateStatus(s);
    return s;
  };
  graph_ = scope.graph();
  if (absl::Status s = CreateSlots(vars); !s.ok()) return fail(s);
  Prepare(scope, name);
  std::vector<Node*> updates;
  for (size_t i = 0; i < vars.size(); ++i) {
    Node* update = nullptr;
    if (sparse[i] != nullptr) {
      Scope us = scope.NewSubScope(absl::StrCat(name, "/update_", vars[i].name()))
                     .ColocateWith(vars[i].handle().node);
      update = ApplySparse(us, *sparse[i], vars[i]);
    } else {
      Scope us = scope.WithOpName(absl::StrCat(name, "/update_", vars[i].name(), "/", apply_op_))
                     .ColocateWith(vars[i].handle().node);
      update = ApplyDense(us, grads[i], vars[i]);
    }
    if (update == nullptr) break;
    updates.push_back(update);
  }
  TANDEM_RETURN_IF_ERROR(scope.status());
  for (Node* n : Finish(scope.WithControlDependencies(updates), name)) updates.push_back(n);
  std::vector<Node*> deps = updates;
  if (global_step != nullptr) {
    Output one = global_step->dtype() == DType::kInt64
                     ? Const(scope.WithOpName(absl::StrCat(name, "/global_step_increment/value")),
                             Tensor::Scalar<int64_t>(1))
                     : Const(scope.WithOpName(absl::StrCat(name, "/global_step_increment/value")),
                             Tensor::Scalar<int32_t>(1));
    Output inc = AssignAdd(scope.WithOpName(absl::StrCat(name, "/global_step_increment"))
                               .WithControlDependencies(updates),
                           *global_step, one);
    deps.push_back(inc.node);
  }
  Node* train = NoOp(scope.WithOpName(name).WithControlDependencies(deps));
  TANDEM_RETURN_IF_ERROR(scope.status());
  if (train == nullptr) return absl::InternalError("ApplyGradients: building the train op failed");
  return train;
}

absl::StatusOr<Node*> Optimizer::Minimize(const Scope& scope, Output loss,
                                          const Variable* global_step,
                                          const std::vector<Variable>& var_list,
                                          absl::string_view name) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<GradAndVar> gvs, ComputeGradients(scope, loss, var_list));
  std::vector<Variable> vars;
  bool any = false;
  for (const GradAndVar& gv : gvs) {
    any |= gv.has_gradient();
    vars.push_back(gv.var);
  }
  if (!any) {
    absl::Status s = absl::InvalidArgumentError(
        absl::StrCat("No gradients provided for any variable: loss ", loss.name(),
                     " does not depend on any of [", VariableNames(vars), "]"));
    scope.UpdateStatus(s);
    return s;
  }
  return ApplyGradients(scope, gvs, global_step, name);
}

std::string Optimizer::SlotKey(absl::string_view slot, const std::string& var_name) const {
  return absl::StrCat("_optimizer_state/", id_, "/", slot, "/", var_name);
}

std::optional<Variable> Optimizer::GetSlot(const Variable& var, absl::string_view slot) const {
  if (graph_ == nullptr || !var.valid()) return std::nullopt;
  const std::vector<std::string>& names = graph_->GetCollection(SlotKey(slot, var.name()));
  if (names.empty()) return std::nullopt;
  auto v = Variable::FromGraph(graph_, names.front());
  if (!v.ok()) return std::nullopt;
  return *v;
}

Variable Optimizer::Slot(const Variable& var, absl::string_view slot) const {
  std::optional<Variable> v = GetSlot(var, slot);
  CHECK(v.has_value()) << "slot " << slot << " of " << var.name() << " was not created";
  return *v;
}

absl::StatusOr<Variable> Optimizer::GetOrMakeSlot(const Variable& var, absl::string_view slot,
                                                  float initial_value) {
  if (std::optional<Variable> v = GetSlot(var, slot)) return *v;
  const PartialShape& shape = var.shape();
  if (!shape.IsFullyDefined()) {
    return absl::InvalidArgumentError(absl::StrCat(name_, " optimizer: variable ", var.name(),
                                                   " has shape ", shape.DebugString(),
                                                   "; slot variables need a fully defined shape"));
  }
  // Built outside the caller's name scope and control dependencies, colocated with var.
  Scope root = Scope::ForGraph(graph_).ColocateWith(var.handle().node);
  std::string base = absl::StrCat(var.name(), "/", name_);
  Output init = FilledConst(root, absl::StrCat(base, "/Initializer/", slot), shape, initial_value);
  // The slot of a table is a table: it lives and is updated where the table is.
  Variable v(root, base, init,
             VariableOptions{.trainable = false, .table = IsTableHandle(*var.handle().node)});
  TANDEM_RETURN_IF_ERROR(root.status());
  // The slot of a part is the same part of the logical variable's slot.
  if (std::optional<SaveSliceInfo> part = GetSaveSliceInfo(*var.handle().node)) {
    part->full_name += v.name().substr(var.name().size());  // "/Ftrl", "/Ftrl_1", ...
    SetSaveSliceInfo(v.handle().node, *part);
  }
  graph_->AddToCollection(SlotKey(slot, var.name()), v.name());
  return v;
}

absl::StatusOr<Variable> Optimizer::GetOrMakeNonSlot(absl::string_view var_name,
                                                     float initial_value,
                                                     const Variable& colocate_with) {
  const std::vector<std::string>& names = graph_->GetCollection(SlotKey(var_name, ""));
  if (!names.empty()) return Variable::FromGraph(graph_, names.front());
  Scope root = Scope::ForGraph(graph_).ColocateWith(colocate_with.handle().node);
  Output init = Const(root.WithOpName(absl::StrCat(var_name, "/Initializer/value")),
                      Tensor::Scalar<float>(initial_value));
  Variable v(
      root, var_name, init,
      VariableOptions{.trainable = false, .table = IsTableHandle(*colocate_with.handle().node)});
  TANDEM_RETURN_IF_ERROR(root.status());
  graph_->AddToCollection(SlotKey(var_name, ""), v.name());
  return v;
}

}  // namespace tandem::ops

// framework/ops/sync_replicas.cc
#include "framework/ops/sync_replicas.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/graph/op_registry.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/internal/build.h"

namespace tandem::ops {
namespace {

constexpr char kSyncReplicasEnabled[] = "sync_replicas/enabled";
constexpr char kBarrier[] = "sync_replicas/step_barrier";
// Collections naming what BuildSyncReplicas made.
constexpr char kLocalStep[] = "sync_replicas/local_step";
constexpr char kReplica[] = "sync_replicas/replica";
constexpr char kNextStep[] = "sync_replicas/next_step";
constexpr char kNumRequired[] = "sync_replicas/num_required";
constexpr char kWaits[] = "sync_replicas/waits";
constexpr char kUpdate[] = "sync_replicas/update";
constexpr char kChiefInit[] = "sync_replicas/chief_init";
constexpr char kStats[] = "sync_replicas/stats";

absl::Status ScalarOf(InferenceContext& ctx, int i, DType dtype) {
  TANDEM_RETURN_IF_ERROR(ctx.ExpectDType(i, dtype));
  return ctx.ExpectRank(i, 0);
}

absl::Status AccumulatorShape(InferenceContext& ctx, PartialShape* shape) {
  TANDEM_ASSIGN_OR_RETURN(*shape, ctx.GetAttr<PartialShape>("shape"));
  if (!shape->IsFullyDefined()) return ctx.Error("the accumulator's shape must be fully defined");
  return absl::OkStatus();
}

}  // namespace

namespace {

// What an op with at most one scalar input returns.
enum class Out { kNone, kScalarInt64, kAccumulatorShaped, kStats };

// Registers a stateful op with one scalar input of dtype `input` (none for
// kInvalid) and the output `out`; ops with a "shape" attr name an accumulator, whose
// shape must be fully defined.
void RegisterScalarInputOp(OpRegistry* r, const char* name, AttrMap attrs, DType input, Out out) {
  const bool accumulator = attrs.count("shape") > 0;
  const int inputs = input == DType::kInvalid ? 0 : 1;
  r->Register({.name = name,
               .min_inputs = inputs,
               .max_inputs = inputs,
               .default_attrs = std::move(attrs),
               .stateful = true,
               .infer = [accumulator, input, out](InferenceContext& ctx) -> absl::Status {
                 PartialShape shape;
                 if (accumulator) TANDEM_RETURN_IF_ERROR(AccumulatorShape(ctx, &shape));
                 if (input != DType::kInvalid) TANDEM_RETURN_IF_ERROR(ScalarOf(ctx, 0, input));
                 switch (out) {
                   case Out::kNone:
                     break;
                   case Out::kScalarInt64:
                     ctx.AddOutput(DType::kInt64, TensorShape());
                     break;
                   case Out::kAccumulatorShaped:
                     ctx.AddOutput(DType::kFloat, shape);
                     break;
                   case Out::kStats:
                     ctx.AddOutput(DType::kInt64, TensorShape({4}));
                     break;
                 }
                 return absl::OkStatus();
               }});
}

// The accumulator's shape, and the local step and replica (int64 scalars, inputs 0
// and 1) that both apply-gradient ops take first.
absl::Status ApplyGradientInputs(InferenceContext& ctx, PartialShape* shape) {
  TANDEM_RETURN_IF_ERROR(AccumulatorShape(ctx, shape));
  TANDEM_RETURN_IF_ERROR(ScalarOf(ctx, 0, DType::kInt64));
  return ScalarOf(ctx, 1, DType::kInt64);
}

}  // namespace

void RegisterSyncReplicasOps(OpRegistry* r) {
  const AttrMap acc = {{"shared_name", std::string()}, {"shape", PartialShape()}};
  AttrMap acc_wait = acc;
  acc_wait["timeout_ms"] = int64_t{1000};
  const AttrMap barrier = {{"shared_name", std::string()}};
  AttrMap barrier_wait = barrier;
  barrier_wait["timeout_ms"] = int64_t{1000};
  r->Register({.name = "AccumulatorApplyGradient",
               .min_inputs = 3,
               .max_inputs = 3,
               .default_attrs = acc,
               .stateful = true,
               .infer = [](InferenceContext& ctx) -> absl::Status {
                 PartialShape shape;
                 TANDEM_RETURN_IF_ERROR(ApplyGradientInputs(ctx, &shape));
                 TANDEM_RETURN_IF_ERROR(ctx.ExpectDType(2, DType::kFloat));
                 if (!shape.IsCompatibleWith(ctx.input_shape(2))) {
                   return ctx.Error(absl::StrCat("the gradient must have the accumulator's shape ",
                                                 shape.DebugString()));
                 }
                 return absl::OkStatus();
               }});
  // The sparse forms: a gradient of some rows (int32/int64 indices [n], float32 values
  // [n, shape[1:]...]) in; the mean of the rows accumulated out, indices int64 ascending.
  r->Register({.name = "SparseAccumulatorApplyGradient",
               .min_inputs = 4,
               .max_inputs = 4,
               .default_attrs = acc,
               .stateful = true,
               .infer = [](InferenceContext& ctx) -> absl::Status {
                 PartialShape shape;
                 TANDEM_RETURN_IF_ERROR(ApplyGradientInputs(ctx, &shape));
                 if (ctx.input_dtype(2) != DType::kInt32 && ctx.input_dtype(2) != DType::kInt64) {
                   return ctx.Error("the indices must be int32 or int64");
                 }
                 TANDEM_RETURN_IF_ERROR(ctx.ExpectDType(3, DType::kFloat));
                 if (shape.rank() < 1) return ctx.Error("a sparse accumulator needs rows");
                 std::vector<int64_t> rows = shape.dims();
                 rows[0] = -1;
                 if (!PartialShape(rows).IsCompatibleWith(ctx.input_shape(3))) {
                   return ctx.Error(
                       absl::StrCat("the gradient's values must have rows of the "
                                    "accumulator's shape ",
                                    shape.DebugString()));
                 }
                 return absl::OkStatus();
               }});
  r->Register({.name = "SparseAccumulatorTakeGradient",
               .min_inputs = 1,
               .max_inputs = 1,
               .default_attrs = acc,
               .stateful = true,
               .infer = [](InferenceContext& ctx) -> absl::Status {
                 PartialShape shape;
                 TANDEM_RETURN_IF_ERROR(AccumulatorShape(ctx, &shape));
                 TANDEM_RETURN_IF_ERROR(ScalarOf(ctx, 0, DType::kInt32));
                 if (shape.rank() < 1) return ctx.Error("a sparse accumulator needs rows");
                 std::vector<int64_t> rows = shape.dims();
                 rows[0] = -1;
                 ctx.AddOutput(DType::kInt64, PartialShape({-1}));
                 ctx.AddOutput(DType::kFloat, PartialShape(rows));
                 return absl::OkStatus();
               }});
  RegisterScalarInputOp(r, "AccumulatorTakeGradient", acc, DType::kInt32, Out::kAccumulatorShaped);
  RegisterScalarInputOp(r, "AccumulatorWait", acc_wait, DType::kInt32, Out::kScalarInt64);
  RegisterScalarInputOp(r, "AccumulatorSetGlobalStep", acc, DType::kInt64, Out::kNone);
  RegisterScalarInputOp(r, "AccumulatorStats", acc, DType::kInvalid, Out::kStats);
  RegisterScalarInputOp(r, "SyncStepAdvance", barrier, DType::kInt64, Out::kScalarInt64);
  RegisterScalarInputOp(r, "SyncStepWait", barrier_wait, DType::kInt64, Out::kScalarInt64);
}

namespace {

Node* BuildSyncOp(const Scope& scope, absl::string_view op, std::vector<Output> inputs,
                  AttrMap attrs) {
  return internal::BuildNode(scope, op, std::move(inputs), std::move(attrs));
}

int64_t TimeoutMs(const Graph& graph) {
  const std::vector<std::string>& enabled = graph.GetCollection(kSyncReplicasEnabled);
  Node* n = enabled.empty() ? nullptr : graph.FindNode(enabled.front());
  if (n == nullptr) return SyncReplicasOptions().timeout_ms;
  absl::StatusOr<int64_t> t = GetAttr<int64_t>(n->attrs(), "timeout_ms");
  return t.ok() ? *t : SyncReplicasOptions().timeout_ms;
}

std::string Single(const Graph& graph, const char* key) {
  const std::vector<std::string>& v = graph.GetCollection(key);
  return v.empty() ? "" : v.front();
}

}  // namespace

void EnableSyncReplicas(const Scope& scope, const SyncReplicasOptions& options) {
  Node* n = internal::BuildNode(scope.WithOpName(kSyncReplicasEnabled), "NoOp", {},
                                {{"timeout_ms", options.timeout_ms}});
  if (n != nullptr) scope.graph()->AddToCollection(kSyncReplicasEnabled, n->name());
}

bool SyncReplicasEnabled(const Graph& graph) {
  return !graph.GetCollection(kSyncReplicasEnabled).empty();
}

absl::StatusOr<SyncReplicasGraph> GetSyncReplicasGraph(const Graph& graph) {
  SyncReplicasGraph g;
  g.local_step = Single(graph, kLocalStep);
  g.replica = Single(graph, kReplica);
  g.next_step = Single(graph, kNextStep);
  g.num_required = Single(graph, kNumRequired);
  g.waits = graph.GetCollection(kWaits);
  g.update = Single(graph, kUpdate);
  g.chief_init = Single(graph, kChiefInit);
  g.stats = graph.GetCollection(kStats);
  if (g.local_step.empty() || g.update.empty() || g.waits.empty()) {
    return absl::NotFoundError(
        "synchronous replicas are on, but no ops::Optimizer built the model's update "
        "(the train op must come from Optimizer::Minimize or ApplyGradients)");
  }
  return g;
}

namespace internal {

absl::StatusOr<Node*> BuildSyncReplicas(const Scope& scope, const std::vector<Variable>& vars,
                                        const std::vector<Output>& grads,
                                        const std::vector<std::optional<GradientRows>>& sparse,
                                        const Variable& global_step, absl::string_view name,
                                        const SyncApplyFn& apply) {
  Graph* graph = scope.graph();
  if (!graph->GetCollection(kUpdate).empty()) {
    return absl::FailedPreconditionError(
        "synchronous replicas: the graph already has a synchronous update (one "
        "ApplyGradients per graph)");
  }
  if (global_step.dtype() != DType::kInt64) {
    return absl::InvalidArgumentError("synchronous replicas need an int64 global step");
  }
  const int64_t timeout_ms = TimeoutMs(*graph);
  Output local_step =
      Placeholder(scope.WithOpName(kLocalStep), DType::kInt64, PartialShape(TensorShape()));
  Output replica =
      Placeholder(scope.WithOpName(kReplica), DType::kInt64, PartialShape(TensorShape()));
  Output num_required =
      Placeholder(scope.WithOpName(kNumRequired), DType::kInt32, PartialShape(TensorShape()));
  const Scope at_step = scope.ColocateWith(global_step.handle().node);
  Output step_now = ReadVariableOp(at_step.WithOpName("sync_replicas/global_step"),
                                   global_step.handle(), DType::kInt64);

  if (sparse.size() != vars.size() || grads.size() != vars.size()) {
    return absl::InternalError("BuildSyncReplicas: one gradient per variable");
  }
  std::vector<Node*> applies, set_steps;
  std::vector<Output> takes(vars.size());
  std::vector<std::optional<GradientRows>> sparse_takes(vars.size());
  for (size_t i = 0; i < vars.size(); ++i) {
    const Scope at_var = scope.ColocateWith(vars[i].handle().node);
    const std::string prefix = absl::StrCat("sync_replicas/", vars[i].name());
    AttrMap attrs = {{"shared_name", absl::StrCat(vars[i].name(), sparse[i] ? "/sparse_grad_accum"
                                                                            : "/grad_accum")},
                     {"shape", vars[i].shape()}};
    if (sparse[i]) {
      applies.push_back(
          BuildSyncOp(at_var.WithOpName(prefix + "/apply"), "SparseAccumulatorApplyGradient",
                      {local_step, replica, sparse[i]->indices, sparse[i]->values}, attrs));
      Node* take = BuildSyncOp(at_var.WithOpName(prefix + "/take"), "SparseAccumulatorTakeGradient",
                               {num_required}, attrs);
      if (take != nullptr) sparse_takes[i] = GradientRows{Output(take, 0), Output(take, 1)};
    } else {
      applies.push_back(BuildSyncOp(at_var.WithOpName(prefix + "/apply"),
                                    "AccumulatorApplyGradient", {local_step, replica, grads[i]},
                                    attrs));
      Node* take = BuildSyncOp(at_var.WithOpName(prefix + "/take"), "AccumulatorTakeGradient",
                               {num_required}, attrs);
      if (take != nullptr) takes[i] = Output(take, 0);
    }
    set_steps.push_back(BuildSyncOp(at_var.WithOpName(prefix + "/set_step"),
                                    "AccumulatorSetGlobalStep", {step_now}, attrs));
    Node* stats = BuildSyncOp(at_var.WithOpName(prefix + "/stats"), "AccumulatorStats", {}, attrs);
    AttrMap wait_attrs = attrs;
    wait_attrs["timeout_ms"] = timeout_ms;
    Node* wait = BuildSyncOp(at_var.WithOpName(prefix + "/wait"), "AccumulatorWait", {num_required},
                             wait_attrs);
    TANDEM_RETURN_IF_ERROR(scope.status());
    graph->AddToCollection(kWaits, Output(wait, 0).name());
    graph->AddToCollection(kStats, Output(stats, 0).name());
  }
  Node* next = BuildSyncOp(at_step.WithOpName(kNextStep).WithControlDependencies(applies),
                           "SyncStepWait", {local_step},
                           {{"shared_name", std::string(kBarrier)}, {"timeout_ms", timeout_ms}});
  Node* train = internal::BuildNode(
      scope.WithOpName(name).WithControlDependencies(std::vector<Node*>{next}), "NoOp", {});
  TANDEM_RETURN_IF_ERROR(scope.status());

  // The chief's aggregation: the wrapped optimizer's update of the means, then the
  // barrier moves to the new global_step.
  TANDEM_ASSIGN_OR_RETURN(Node * update, apply(takes, sparse_takes));
  Output step_after = ReadVariableOp(at_step.WithOpName("sync_replicas/global_step_after")
                                         .WithControlDependencies(std::vector<Node*>{update}),
                                     global_step.handle(), DType::kInt64);
  Node* advance = BuildSyncOp(at_step.WithOpName(kUpdate), "SyncStepAdvance", {step_after},
                              {{"shared_name", std::string(kBarrier)}});
  Node* init_barrier =
      BuildSyncOp(at_step.WithOpName("sync_replicas/init_barrier"), "SyncStepAdvance", {step_now},
                  {{"shared_name", std::string(kBarrier)}});
  set_steps.push_back(init_barrier);
  Node* chief_init = internal::BuildNode(
      scope.WithOpName(kChiefInit).WithControlDependencies(set_steps), "NoOp", {});
  TANDEM_RETURN_IF_ERROR(scope.status());
  graph->AddToCollection(kLocalStep, local_step.node->name());
  graph->AddToCollection(kReplica, replica.node->name());
  graph->AddToCollection(kNumRequired, num_required.node->name());
  graph->AddToCollection(kNextStep, Output(next, 0).name());
  graph->AddToCollection(kUpdate, advance->name());
  graph->AddToCollection(kChiefInit, chief_init->name());
  return train;
}

}  // namespace internal
}  // namespace tandem::ops

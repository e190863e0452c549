// framework/ops/collective_ops.cc
#include "framework/ops/collective_ops.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/crc32c.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/internal/build.h"

namespace tandem::ops {
namespace {

constexpr char kCollectiveEnabled[] = "collective/enabled";
constexpr char kAllReduce[] = "CollectiveAllReduce";
constexpr char kBroadcast[] = "CollectiveBroadcast";
constexpr char kGatherRows[] = "CollectiveAllGatherRows";

// One output per input, of the input's dtype and shape.
absl::Status SameAsInputs(InferenceContext& ctx) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    ctx.AddOutput(ctx.input_dtype(i), ctx.input_shape(i));
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterCollectiveOps(OpRegistry* r) {
  r->Register({.name = kAllReduce,
               .min_inputs = 1,
               .max_inputs = -1,
               .default_attrs = {{"instance_key", int64_t{0}}, {"average", true}},
               .stateful = true,
               .infer = [](InferenceContext& ctx) -> absl::Status {
                 for (int i = 0; i < ctx.num_inputs(); ++i) {
                   TANDEM_RETURN_IF_ERROR(ctx.ExpectDType(i, DType::kFloat));
                 }
                 return SameAsInputs(ctx);
               }});
  r->Register({.name = kBroadcast,
               .min_inputs = 1,
               .max_inputs = -1,
               .default_attrs = {{"instance_key", int64_t{0}}},
               .stateful = true,
               .infer = [](InferenceContext& ctx) -> absl::Status {
                 for (int i = 0; i < ctx.num_inputs(); ++i) {
                   if (ctx.input_dtype(i) == DType::kResource ||
                       !ctx.input_shape(i).IsFullyDefined()) {
                     return ctx.Error("every input needs a tensor dtype and a fully defined shape");
                   }
                 }
                 return SameAsInputs(ctx);
               }});
  r->Register({.name = kGatherRows,
               .min_inputs = 2,
               .max_inputs = 2,
               .default_attrs = {{"instance_key", int64_t{0}}, {"average", true}},
               .stateful = true,
               .infer = [](InferenceContext& ctx) -> absl::Status {
                 if (ctx.input_dtype(0) != DType::kInt32 && ctx.input_dtype(0) != DType::kInt64) {
                   return ctx.Error("indices must be int32 or int64");
                 }
                 TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(0, 1));
                 TANDEM_RETURN_IF_ERROR(ctx.ExpectDType(1, DType::kFloat));
                 const PartialShape& values = ctx.input_shape(1);
                 if (!values.known_rank() || values.rank() < 1) {
                   return ctx.Error("values need a known rank of at least 1");
                 }
                 for (int d = 1; d < values.rank(); ++d) {
                   if (values.dim(d) < 0) return ctx.Error("a row of values needs a known shape");
                 }
                 Dims dims = values.dims();
                 dims[0] = -1;
                 ctx.AddOutput(ctx.input_dtype(0), PartialShape::Unknown(1));
                 ctx.AddOutput(DType::kFloat, PartialShape(absl::MakeConstSpan(dims)));
                 return absl::OkStatus();
               }});
}

void EnableCollectiveAllReduce(const Scope& scope, const CollectiveAllReduceOptions& options) {
  Node* n = internal::BuildNode(scope.WithOpName(kCollectiveEnabled), "NoOp", {},
                                {{"bytes_per_pack", options.bytes_per_pack},
                                 {"first_bucket_bytes", options.first_bucket_bytes},
                                 {"tables", static_cast<int64_t>(options.tables)},
                                 {"applies_tables", options.applies_tables}});
  if (n != nullptr) scope.graph()->AddToCollection(kCollectiveEnabled, n->name());
}

bool CollectiveAllReduceEnabled(const Graph& graph) {
  return !graph.GetCollection(kCollectiveEnabled).empty();
}

CollectiveTableMode CollectiveTablesOf(const Graph& graph) {
  CollectiveTableMode mode;
  const std::vector<std::string>& marks = graph.GetCollection(kCollectiveEnabled);
  const Node* mark = marks.empty() ? nullptr : graph.FindNode(marks[0]);
  if (mark == nullptr) return mode;
  const int64_t t = GetAttrOr<int64_t>(mark->attrs(), "tables", 0);
  if (t >= 0 && t <= static_cast<int64_t>(CollectiveTables::kAppliedOnce)) {
    mode.tables = static_cast<CollectiveTables>(t);
  }
  mode.applies_tables = GetAttrOr<bool>(mark->attrs(), "applies_tables", true);
  return mode;
}

int64_t NextInstanceKey(const Graph& graph, absl::string_view op, int64_t base, int64_t limit) {
  int64_t next = base;
  for (const auto& n : graph.nodes()) {
    if (n->op() != op) continue;
    const int64_t k = GetAttrOr<int64_t>(n->attrs(), "instance_key", 0);
    if (k >= base && k < limit) next = std::max(next, k + 1);
  }
  return next;
}

std::vector<Output> CollectiveAllReduce(const Scope& scope, const std::vector<Output>& xs,
                                        int64_t instance_key, bool average) {
  Node* n = internal::BuildNode(scope, kAllReduce, xs,
                                {{"instance_key", instance_key}, {"average", average}});
  return internal::AllOutputs(n);
}

GradientRows CollectiveAllGatherRows(const Scope& scope, const GradientRows& rows,
                                     int64_t instance_key, bool average) {
  Node* n = internal::BuildNode(scope, kGatherRows, {rows.indices, rows.values},
                                {{"instance_key", instance_key}, {"average", average}});
  std::vector<Output> out = internal::AllOutputs(n);
  if (out.size() != 2) return {};
  return GradientRows{out[0], out[1]};
}

absl::StatusOr<ReducedGradients> ReduceGradients(
    const Scope& scope, const std::vector<Output>& grads,
    const std::vector<std::optional<GradientRows>>& rows, const std::vector<Variable>& vars) {
  const std::vector<std::string>& marks = scope.graph()->GetCollection(kCollectiveEnabled);
  if (marks.empty()) {
    return absl::FailedPreconditionError(
        "ReduceGradients: the graph is not marked with EnableCollectiveAllReduce");
  }
  if (vars.size() != grads.size() || rows.size() != grads.size()) {
    return absl::InvalidArgumentError("ReduceGradients: one gradient per variable");
  }
  const Node* mark = scope.graph()->FindNode(marks[0]);
  const int64_t per_pack = GetAttrOr<int64_t>(mark->attrs(), "bytes_per_pack", 25 << 20);
  const int64_t first = GetAttrOr<int64_t>(mark->attrs(), "first_bucket_bytes", 1 << 20);
  const bool skip_tables = CollectiveTablesOf(*scope.graph()).tables == CollectiveTables::kOwnRows;
  ReducedGradients out;
  out.dense.resize(grads.size());
  out.rows.resize(grads.size());
  // A table that is not reduced keeps this replica's gradient.
  std::vector<bool> keep(grads.size(), false);
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!skip_tables || !IsTableHandle(*vars[i].handle().node)) continue;
    keep[i] = true;
    if (rows[i]) {
      out.rows[i] = rows[i];
    } else {
      out.dense[i] = grads[i];
    }
  }
  std::vector<Node*> nodes;  // Every collective of the step.
  // Rows: one all-gather per variable.
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!rows[i] || keep[i]) continue;
    GradientRows gathered = CollectiveAllGatherRows(
        scope.WithOpName(absl::StrCat("collective/all_gather_rows_", i)), *rows[i],
        NextInstanceKey(*scope.graph(), kGatherRows, kGatherRowsInstanceKey,
                        kTableBarrierInstanceKey),
        /*average=*/true);
    TANDEM_RETURN_IF_ERROR(scope.status());
    nodes.push_back(gathered.indices.node);
    out.rows[i] = gathered;
  }
  // Dense gradients in buckets, backward order: the last gradient first.
  std::vector<std::vector<int>> buckets;
  int64_t bytes = 0;
  for (int i = static_cast<int>(grads.size()) - 1; i >= 0; --i) {
    if (rows[i] || keep[i]) continue;
    // A gradient has its variable's shape, which is fully defined where the gradient's
    // static shape may not be (Conv2DBackpropFilter's).
    if (!vars[i].shape().IsFullyDefined()) {
      return absl::InvalidArgumentError(absl::StrCat("ReduceGradients: the variable of gradient ",
                                                     grads[i].name(),
                                                     " needs a fully defined shape"));
    }
    const int64_t g = vars[i].shape().num_elements() * 4;
    const int64_t cap = buckets.size() == 1 ? first : per_pack;  // The open bucket's cap.
    if (buckets.empty() || (bytes > 0 && bytes + g > cap)) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().push_back(i);
    bytes += g;
  }
  for (size_t b = 0; b < buckets.size(); ++b) {
    std::vector<Output> xs;
    for (int i : buckets[b]) xs.push_back(grads[i]);
    std::vector<Output> ys =
        CollectiveAllReduce(scope.WithOpName(absl::StrCat("collective/all_reduce_", b)), xs,
                            NextInstanceKey(*scope.graph(), kAllReduce, 1, kBroadcastInstanceKey),
                            /*average=*/true);
    TANDEM_RETURN_IF_ERROR(scope.status());
    nodes.push_back(ys[0].node);
    for (size_t k = 0; k < buckets[b].size(); ++k) out.dense[buckets[b][k]] = ys[k];
  }
  // No update starts before every collective of the step is done: a step that fails in
  // any of them changes no variable.
  Scope after = scope.WithControlDependencies(nodes);
  for (size_t i = 0; i < grads.size(); ++i) {
    if (out.rows[i]) {
      out.rows[i] =
          GradientRows{Identity(after.WithOpName(absl::StrCat("collective/gathered_indices_", i)),
                                out.rows[i]->indices),
                       Identity(after.WithOpName(absl::StrCat("collective/gathered_values_", i)),
                                out.rows[i]->values)};
    } else {
      out.dense[i] =
          Identity(after.WithOpName(absl::StrCat("collective/reduced_", i)), out.dense[i]);
    }
  }
  TANDEM_RETURN_IF_ERROR(scope.status());
  return out;
}

absl::StatusOr<Node*> BroadcastVariables(const Scope& scope, const std::vector<Variable>& vars) {
  if (vars.empty()) return absl::InvalidArgumentError("BroadcastVariables: no variables");
  Scope s = scope.NewSubScope("collective");
  std::vector<Output> values;
  for (const Variable& v : vars) {
    values.push_back(
        ReadVariableOp(s.WithOpName(v.name() + "/broadcast_read"), v.handle(), v.dtype()));
  }
  Node* bcast = internal::BuildNode(s.WithOpName("broadcast"), kBroadcast, values,
                                    {{"instance_key", kBroadcastInstanceKey}});
  TANDEM_RETURN_IF_ERROR(s.status());
  std::vector<Node*> assigns;
  for (size_t i = 0; i < vars.size(); ++i) {
    Output a = AssignVariableOp(s.WithOpName(vars[i].name() + "/broadcast_assign"),
                                vars[i].handle(), Output(bcast, static_cast<int>(i)));
    assigns.push_back(a.node);
  }
  Node* group = Group(s.WithOpName("broadcast_variables"), assigns);
  TANDEM_RETURN_IF_ERROR(s.status());
  return group;
}

std::string CollectiveFingerprint(const Graph& graph) {
  std::vector<std::string> parts;
  for (const auto& n : graph.nodes()) {
    if (n->op() != kAllReduce && n->op() != kBroadcast && n->op() != kGatherRows) continue;
    std::vector<std::string> shapes;
    for (const Output& in : n->inputs()) {
      shapes.push_back(absl::StrCat(DTypeName(in.dtype()), in.shape().DebugString()));
    }
    parts.push_back(absl::StrCat(n->op(), "#", GetAttrOr<int64_t>(n->attrs(), "instance_key", 0),
                                 "(", absl::StrJoin(shapes, ","), ")"));
  }
  std::sort(parts.begin(), parts.end());
  const std::string all = absl::StrJoin(parts, ";");
  return absl::StrCat(parts.size(), " collective ops, crc32c ",
                      absl::Hex(crc32c::Value(all), absl::kZeroPad8));
}

}  // namespace tandem::ops

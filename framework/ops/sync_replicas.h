// framework/ops/sync_replicas.h
//
// Synchronous replicas: TensorFlow's SyncReplicasOptimizer semantics for every
// ops::Optimizer of a graph marked with EnableSyncReplicas. Each replica (chief and
// workers, between-graph) computes its gradients at the step it was released for
// (its local step); they go to an accumulator beside each variable (on its ps), which
// drops a gradient computed at an older step than its own (stale, counted) and
// ignores a second one from the same replica for a step. The chief aggregates once
// `num_required` replicas' gradients are in: takes their mean from every accumulator,
// applies it with the wrapped optimizer (global_step + 1, so global_step counts
// aggregated updates), and advances a step barrier beside global_step that releases
// the replicas for the next step.
//
// Instead of TensorFlow's token queue, replicas wait on that barrier for a step past
// their own, so a replica contributes at most one gradient per step, a replica that
// rejoins starts at the current step, and no stale tokens pile up for a dead one.
// The barrier wait times out (timeout_ms) with the barrier's step: a replica behind
// catches up, one whose gradient was lost (a restarted ps) sends it again.
//
// What Optimizer::ApplyGradients builds on a marked graph (names are fixed; one
// ApplyGradients per graph):
//   replica step (the train op it returns): feeds sync_replicas/local_step (int64)
//     and sync_replicas/replica (int64, the replica's id); per variable
//     AccumulatorApplyGradient; then sync_replicas/next_step = SyncStepWait, the
//     replica's next local step (fetch it with the train op).
//   aggregation (the chief's runner; hooks/sync_replicas_hook.h): feeds
//     sync_replicas/num_required (int32); fetch the AccumulatorWait counts
//     (SyncReplicasGraph::waits; each returns when num_required gradients are in or
//     at timeout_ms), then, if every count reached it, run SyncReplicasGraph::update:
//     AccumulatorTakeGradient per variable, the wrapped optimizer's update, and
//     SyncStepAdvance to the new global_step.
//   chief_init: sets every accumulator's step and the barrier to global_step (an
//     accumulator keeps its gradients when its step is unchanged).
//   stats: per accumulator int64[4] {step, accumulated, stale dropped, duplicates}.
//
// Sparse gradients (an embedding table's rows) travel and aggregate as rows: the
// replica sends its (indices, values) to a sparse accumulator beside the variable
// (SparseAccumulatorApplyGradient), which sums each row; the chief takes the rows
// any replica named with their means (SparseAccumulatorTakeGradient: the dense mean
// on every row, the other rows' mean being zero) and the wrapped optimizer applies
// them sparsely. No replica sends, and no ps builds, a dense copy of the table. The
// graph needs an int64 global step.
//
// Thread safety: graph building, one thread per graph.
#ifndef TANDEM_FRAMEWORK_OPS_SYNC_REPLICAS_H_
#define TANDEM_FRAMEWORK_OPS_SYNC_REPLICAS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/graph/scope.h"
#include "framework/ops/gradient_rows.h"
#include "framework/ops/state_ops.h"

namespace tandem::ops {

struct SyncReplicasOptions {
  // How long the waiting ops wait before returning what they have.
  int64_t timeout_ms = 1000;
};

// Marks the graph of `scope`: its optimizers aggregate synchronously.
void EnableSyncReplicas(const Scope& scope, const SyncReplicasOptions& options = {});
bool SyncReplicasEnabled(const Graph& graph);

// The names of what ApplyGradients built on a marked graph.
struct SyncReplicasGraph {
  std::string local_step;          // Placeholder, int64 scalar.
  std::string replica;             // Placeholder, int64 scalar.
  std::string next_step;           // Tensor, int64 scalar: fetch with the train op.
  std::string num_required;        // Placeholder, int32 scalar.
  std::vector<std::string> waits;  // Tensors, int64 scalars.
  std::string update;              // Node: take, apply, advance.
  std::string chief_init;          // Node.
  std::vector<std::string> stats;  // Tensors, int64 [4].
};
// NOT_FOUND when no optimizer built the synchronous update on `graph`.
absl::StatusOr<SyncReplicasGraph> GetSyncReplicasGraph(const Graph& graph);

namespace internal {
// Builds the replica step, aggregation, chief_init and stats for `vars` and their
// gradients: dense `grads[i]`, or rows `sparse[i]` (then grads[i] is invalid)
// (Optimizer::ApplyGradients on a marked graph). `apply` adds the wrapped optimizer's
// update of the variables by the given means, in the same form (and the global_step
// increment) and returns its op. Returns the replica's train op.
using SyncApplyFn = std::function<absl::StatusOr<Node*>(
    const std::vector<Output>& means, const std::vector<std::optional<GradientRows>>& sparse)>;
absl::StatusOr<Node*> BuildSyncReplicas(const Scope& scope, const std::vector<Variable>& vars,
                                        const std::vector<Output>& grads,
                                        const std::vector<std::optional<GradientRows>>& sparse,
                                        const Variable& global_step, absl::string_view name,
                                        const SyncApplyFn& apply);
}  // namespace internal

}  // namespace tandem::ops

#endif  // TANDEM_FRAMEWORK_OPS_SYNC_REPLICAS_H_

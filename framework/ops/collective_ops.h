// framework/ops/collective_ops.h
//
// Collective ops for synchronous data parallelism without parameter servers
// (TensorFlow's CollectiveReduce / CollectiveBcast, as MultiWorkerMirroredStrategy uses
// them). Every replica builds the same graph; the ops run over the session's
// CollectiveExecutor (framework/distributed/collective/collective_executor.h), which
// matches the replicas' ops by instance key.
//
//   CollectiveAllReduce(x_0 .. x_k-1) -> y_0 .. y_k-1: float32 tensors packed into one
//     buffer, summed over the group (divided by the group size when attr "average"),
//     unpacked: one all-reduce per node, whatever k.
//   CollectiveBroadcast(x_0 .. x_k-1) -> y_0 .. y_k-1: any dtypes; every replica gets
//     the group's broadcast source's values (the replica with the newest global step).
//   CollectiveAllGatherRows(indices [n], values [n, ...]) -> (indices [m], values
//     [m, ...]): every replica's rows of a gradient, summed per row (below).
//
// EnableCollectiveAllReduce marks a graph: every ops::Optimizer::ApplyGradients on it
// packs the dense gradients into buckets in backward order (the last variable's
// gradient first, as the backward pass makes them), the first bucket at most
// first_bucket_bytes and the others at most bytes_per_pack (PyTorch DDP's defaults,
// 1 MiB and 25 MiB), and applies the averaged gradients. Each bucket is one node that
// depends only on its gradients, so its all-reduce starts as soon as they exist and
// overlaps the rest of the backward pass. Instance keys follow bucket order, fixed at
// graph-building time. Sparse gradients (a table's rows) are all-gathered as rows, not
// densified (ReduceGradients), and applied as sparse updates.
//
// Thread safety: graph building, one thread per graph.
#ifndef TANDEM_FRAMEWORK_OPS_COLLECTIVE_OPS_H_
#define TANDEM_FRAMEWORK_OPS_COLLECTIVE_OPS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/graph/op_registry.h"
#include "framework/graph/scope.h"
#include "framework/ops/gradient_rows.h"
#include "framework/ops/state_ops.h"

namespace tandem::ops {

// What the replicas do with the gradients of tables (ops::VariableOptions::table).
enum class CollectiveTables {
  kMirrored,  // Reduced and applied on every replica, as any variable (the default).
  // Not reduced: each replica applies its own gradient where the table lives (the
  // hybrid strategy's parameter servers, asynchronously).
  kOwnRows,
  // Reduced (rows all-gathered and averaged), then applied once, by the replica with
  // applies_tables; a one-float all-reduce after that update ends every replica's step,
  // so no replica looks a table up before the step's update is in (the hybrid
  // strategy with sync = true).
  kAppliedOnce,
};

struct CollectiveAllReduceOptions {
  int64_t bytes_per_pack = int64_t{25} << 20;
  int64_t first_bucket_bytes = int64_t{1} << 20;
  // Table updates wait for the step's collectives either way, so a failed step
  // changes nothing.
  CollectiveTables tables = CollectiveTables::kMirrored;
  bool applies_tables = true;  // kAppliedOnce: this replica applies the tables' update.
};
// The table settings of a graph marked by EnableCollectiveAllReduce.
struct CollectiveTableMode {
  CollectiveTables tables = CollectiveTables::kMirrored;
  bool applies_tables = true;
};
CollectiveTableMode CollectiveTablesOf(const Graph& graph);

// The instance keys the strategies reserve, numbered in the graph's building order (so
// that several optimizers' collectives never share one): the all-reduce buckets from 1,
// the variable broadcast kBroadcastInstanceKey, the replicas' variable checksums
// kChecksumInstanceKey, the row all-gathers from kGatherRowsInstanceKey, the table
// barriers of CollectiveTables::kAppliedOnce from kTableBarrierInstanceKey.
inline constexpr int64_t kBroadcastInstanceKey = int64_t{1} << 20;
inline constexpr int64_t kChecksumInstanceKey = int64_t{1} << 21;
inline constexpr int64_t kGatherRowsInstanceKey = int64_t{1} << 22;
inline constexpr int64_t kTableBarrierInstanceKey = int64_t{1} << 23;
// The next free key of [base, limit) for `op` nodes in `graph`.
int64_t NextInstanceKey(const Graph& graph, absl::string_view op, int64_t base, int64_t limit);

void EnableCollectiveAllReduce(const Scope& scope, const CollectiveAllReduceOptions& options = {});
bool CollectiveAllReduceEnabled(const Graph& graph);

// The nodes y = CollectiveAllReduce(xs); errors are recorded in the scope.
std::vector<Output> CollectiveAllReduce(const Scope& scope, const std::vector<Output>& xs,
                                        int64_t instance_key, bool average);
// GatherRows: every replica's `rows` (CollectiveAllGatherRows below) as one set of
// unique rows, ascending, each the sum of its values over the replicas in rank order
// (and within a replica in order), times 1 / group size when `average`. Every replica
// computes it from the same gathered bytes, so every replica gets the same bits.
GradientRows CollectiveAllGatherRows(const Scope& scope, const GradientRows& rows,
                                     int64_t instance_key, bool average);

// The replicas' mean gradients of `vars`: dense `grads[i]` bucketed and all-reduced as
// EnableCollectiveAllReduce describes; where `rows[i]` is set (grads[i] is then
// ignored) the rows are all-gathered and summed per row instead (instance key
// kGatherRowsInstanceKey on), so a table's gradient crosses the network as the rows a
// step touched, never as the dense table; under CollectiveTables::kOwnRows a table
// keeps this replica's own gradient. Every result depends on every collective of the
// step, so an update built on them starts only once all succeeded.
struct ReducedGradients {
  std::vector<Output> dense;                      // Set where rows[i] was not.
  std::vector<std::optional<GradientRows>> rows;  // Set where rows[i] was.
};
absl::StatusOr<ReducedGradients> ReduceGradients(
    const Scope& scope, const std::vector<Output>& grads,
    const std::vector<std::optional<GradientRows>>& rows, const std::vector<Variable>& vars);

// A NoOp "collective/broadcast_variables" that sets every variable of `vars` to the
// broadcast source's value (one CollectiveBroadcast node).
absl::StatusOr<Node*> BroadcastVariables(const Scope& scope, const std::vector<Variable>& vars);

// Describes the graph's collective nodes (names, keys, input shapes): replicas whose
// fingerprints differ built different graphs and cannot reduce together.
std::string CollectiveFingerprint(const Graph& graph);

void RegisterCollectiveOps(OpRegistry* registry);

}  // namespace tandem::ops

#endif  // TANDEM_FRAMEWORK_OPS_COLLECTIVE_OPS_H_

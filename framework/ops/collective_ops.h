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
//
// EnableCollectiveAllReduce marks a graph: every ops::Optimizer::ApplyGradients on it
// packs the dense gradients into buckets in backward order (the last variable's
// gradient first, as the backward pass makes them), the first bucket at most
// first_bucket_bytes and the others at most bytes_per_pack (PyTorch DDP's defaults,
// 1 MiB and 25 MiB), and applies the averaged gradients. Each bucket is one node that
// depends only on its gradients, so its all-reduce starts as soon as they exist and
// overlaps the rest of the backward pass. Instance keys follow bucket order, fixed at
// graph-building time. Sparse gradients are densified first.
//
// Thread safety: graph building, one thread per graph.
#ifndef TANDEM_FRAMEWORK_OPS_COLLECTIVE_OPS_H_
#define TANDEM_FRAMEWORK_OPS_COLLECTIVE_OPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/graph/op_registry.h"
#include "framework/graph/scope.h"
#include "framework/ops/state_ops.h"

namespace tandem::ops {

struct CollectiveAllReduceOptions {
  int64_t bytes_per_pack = int64_t{25} << 20;
  int64_t first_bucket_bytes = int64_t{1} << 20;
};

// The instance key of the variable broadcast; bucket i has key 1 + i.
inline constexpr int64_t kBroadcastInstanceKey = int64_t{1} << 20;

void EnableCollectiveAllReduce(const Scope& scope, const CollectiveAllReduceOptions& options = {});
bool CollectiveAllReduceEnabled(const Graph& graph);

// The nodes y = CollectiveAllReduce(xs); errors are recorded in the scope.
std::vector<Output> CollectiveAllReduce(const Scope& scope, const std::vector<Output>& xs,
                                        int64_t instance_key, bool average);
// Buckets `grads` (float32, the gradients of `vars` in order) as
// EnableCollectiveAllReduce describes and returns their averages in the same order.
absl::StatusOr<std::vector<Output>> AllReduceGradients(const Scope& scope,
                                                       const std::vector<Output>& grads,
                                                       const std::vector<Variable>& vars);

// A NoOp "collective/broadcast_variables" that sets every variable of `vars` to the
// broadcast source's value (one CollectiveBroadcast node).
absl::StatusOr<Node*> BroadcastVariables(const Scope& scope, const std::vector<Variable>& vars);

// Describes the graph's collective nodes (names, keys, input shapes): replicas whose
// fingerprints differ built different graphs and cannot reduce together.
std::string CollectiveFingerprint(const Graph& graph);

void RegisterCollectiveOps(OpRegistry* registry);

}  // namespace tandem::ops

#endif  // TANDEM_FRAMEWORK_OPS_COLLECTIVE_OPS_H_

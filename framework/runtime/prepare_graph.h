// framework/runtime/prepare_graph.h
//
// The graph a session runs is not the graph it is given: the precision policy
// (mixed_precision.h) rewrites it, then the remapper's passes (remapper.h) fuse bias
// and ReLU chains, move ReLU masks before MaxPoolGrad, read variables as bfloat16 and
// compute dense updates' MatMul gradients inside the updates.
// The passes look at a node's neighbours, so a node added later by Extend must be
// prepared in the context of the whole graph, or it would run as given (float32 and
// unfused under mixed_bfloat16).
//
// PreparedGraph keeps the caller's graph as given and the names of every node the
// session holds. An extension is prepared by running the passes on the whole graph
// (what was given so far plus the new nodes) and keeping only the nodes whose names the
// session does not hold yet. That is sound because every name the passes produce means
// the same value in any preparation: "X" is always X's float32 value, "X/bfloat16" its
// bfloat16 one, "t/i/to_bfloat16" the bfloat16 copy of tensor t:i, "L/fused" the value
// of the chain ending at L, "C/from_variable" the variable read by cast C's read, in
// bfloat16, "A/with_matmul" update A with its gradient computed inside. Nodes already in the
// session keep their definitions; a new consumer may only change which of those equivalent forms it
// reads (a chain that no longer fuses is read unfused by the new nodes, the old ones still read the
// fused node). As for Graph::AddGraphDef, nodes of an extension whose names the graph already has
// are skipped, so a caller may pass its whole graph each time.
//
// Thread safety: none; the owning session serialises Extend.
#ifndef TANDEM_FRAMEWORK_RUNTIME_PREPARE_GRAPH_H_
#define TANDEM_FRAMEWORK_RUNTIME_PREPARE_GRAPH_H_

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "framework/protos/graph.pb.h"
#include "framework/runtime/mixed_precision.h"

namespace tandem {

// The graph a session runs: ApplyPrecision(def, precision), then FuseBiasAndRelu,
// MaskBeforeMaxPoolGrad, BiasGradBeforeMaxPoolGrad and, where the session keeps its variables on
// the CPU (no GPU), FilterGradOfMaxPoolGrad, FuseConvAndMaxPool, ReadVariablesAsBfloat16
// and FuseGradientMatMulIntoApply. Logs the rewrites once
// per process.
absl::StatusOr<proto::GraphDef> PrepareGraph(const proto::GraphDef& def, Precision precision,
                                             bool variables_on_cpu = true);

class PreparedGraph {
 public:
  explicit PreparedGraph(Precision precision, bool variables_on_cpu = true)
      : precision_(precision), variables_on_cpu_(variables_on_cpu) {}

  // The prepared nodes that `extension` adds to the session's graph (on the first
  // call, the whole prepared graph). Changes nothing: call Commit once the session
  // holds them.
  absl::StatusOr<proto::GraphDef> Prepare(const proto::GraphDef& extension) const;
  // Records that the session now holds `extension` as `prepared` (Prepare's result).
  void Commit(const proto::GraphDef& extension, const proto::GraphDef& prepared);

 private:
  Precision precision_;
  bool variables_on_cpu_;
  proto::GraphDef given_;  // Every node the caller gave, as given.
  absl::flat_hash_set<std::string> given_names_;
  absl::flat_hash_set<std::string> held_;  // Names of the nodes the session holds.
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_RUNTIME_PREPARE_GRAPH_H_

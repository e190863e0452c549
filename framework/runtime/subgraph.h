// framework/runtime/subgraph.h
//
// Builds the executable graph of one Run signature: the nodes that the fetches and
// targets need (pruning stops at fed tensors), with each fed tensor replaced by an
// _Arg node (index = position in `feeds`) and each fetch read by a _Retval node
// (index = position in `fetches`). Stateful nodes that nothing needs are not run,
// as in TensorFlow.
//
// Thread safety: pure function of its arguments; `graph` is only read.
#ifndef TANDEM_FRAMEWORK_RUNTIME_SUBGRAPH_H_
#define TANDEM_FRAMEWORK_RUNTIME_SUBGRAPH_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "framework/graph/graph.h"

namespace tandem {

// The cache key of a Run signature. Sorts `feeds` and `targets` in place (their order
// does not change the step; the fetches' order does).
std::string RunSignature(std::vector<std::string>& feeds, absl::Span<const std::string> fetches,
                         std::vector<std::string>& targets);

absl::StatusOr<std::unique_ptr<Graph>> BuildExecutableGraph(const Graph& graph,
                                                            absl::Span<const std::string> feeds,
                                                            absl::Span<const std::string> fetches,
                                                            absl::Span<const std::string> targets);

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_RUNTIME_SUBGRAPH_H_

// framework/ops/summary_ops.h
//
// Scalar summaries inside a model function (tf.summary.scalar). Strings stay at tandem's
// input boundary, so a summary is not a serialised Summary proto: Scalar adds a
// "ScalarSummary" node (attr "tag", output: the value cast to float32) and records it in
// the graph collection ops::kSummaries. SummarySaverHook (hooks/) fetches every recorded
// summary when it fires and writes them as TensorBoard scalars; Evaluate writes its
// metrics the same way.
//
//   ops::summary::Scalar(scope, "loss", loss);
//   ops::summary::Scalar(scope, "learning_rate", lr);
//
// Tags are used as given (no name-scope prefix, as tf.compat.v1.summary.scalar with
// family unset strips it); a repeated tag gets "_1", "_2" suffixes.
//
// Thread safety: graph building, one thread.
#ifndef TANDEM_FRAMEWORK_OPS_SUMMARY_OPS_H_
#define TANDEM_FRAMEWORK_OPS_SUMMARY_OPS_H_

#include <string>
#include <vector>

#include "framework/graph/scope.h"

namespace tandem::ops::summary {

// Records `value` (a numeric scalar, or a tensor with one element) under `tag`. Returns
// the ScalarSummary output; errors (non-numeric dtype, more than one element when
// the shape is known, empty tag) are recorded in the scope.
Output Scalar(const Scope& scope, absl::string_view tag, Output value);

struct ScalarSummaryTensor {
  std::string tag;
  std::string tensor;  // "node:0".
};
// The scalar summaries recorded in `graph`, in creation order.
std::vector<ScalarSummaryTensor> ScalarSummaries(const Graph& graph);

}  // namespace tandem::ops::summary

#endif  // TANDEM_FRAMEWORK_OPS_SUMMARY_OPS_H_

// estimator/internal/mode_graph.h
//
// The graph of one Estimator mode: a placeholder per input component ("input/<name>",
// the batch dimension unknown), the global step, and the model function's spec built
// under a control dependency on the global step's read. Shared by Train, Evaluate,
// Predict and ExportSavedModel.
//
// Thread safety: value types and functions of their arguments.
#ifndef TANDEM_ESTIMATOR_INTERNAL_MODE_GRAPH_H_
#define TANDEM_ESTIMATOR_INTERNAL_MODE_GRAPH_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "estimator/estimator.h"
#include "framework/core/status.h"
#include "framework/ops/state_ops.h"

namespace tandem::internal {

class TrainingStrategy;

template <typename T>
absl::StatusOr<T> Annotated(absl::StatusOr<T> value, absl::string_view context) {
  if (!value.ok()) return AnnotateStatus(value.status(), context);
  return value;
}

struct ModeGraph {
  Scope root = Scope::NewRootScope();
  std::vector<std::string> feed_names;  // Per element component; "" = not fed.
  EstimatorSpec spec;
  ops::Variable global_step;
  Features features;  // The feature placeholders by name.
};

// The input of one call: an iterator with its first batch already taken (to shape the
// placeholders).
struct OpenInput {
  InputData data;
  std::unique_ptr<data::Iterator> iterator;
  std::optional<data::Element> first;

  absl::StatusOr<std::optional<data::Element>> Next();
  // The feature components of the first batch, per example (batch dimension dropped).
  ServingInputSpec FeatureSpec() const;
  // The label component, if the input has labels.
  std::optional<ServingInput> LabelSpec() const;
};

// Calls `input_fn` and reads the first element. The iterator is made knowing that the
// steps compute on `step_cpu_threads` CPU threads (data::ScopedStepCpuThreads; 0: not
// known).
absl::StatusOr<OpenInput> OpenInputFn(const InputFn& input_fn, ModeKey mode,
                                      const InputContext& context, int step_cpu_threads = 0);

// Builds the graph of `mode` with a placeholder per feature (and for the labels unless
// PREDICT ignores them), under `strategy`'s placement and, for TRAIN, with its updates
// (training_strategy.h); null: as the model builds it, in this process.
absl::Status BuildModeGraph(const EstimatorOptions& o, ModeKey mode,
                            const ServingInputSpec& features,
                            const std::optional<ServingInput>& labels,
                            const TrainingStrategy* strategy, ModeGraph* g);

// The feeds of one batch (components in the order BuildModeGraph made placeholders).
FeedMap Feeds(const ModeGraph& g, const data::Element& element);

}  // namespace tandem::internal

#endif  // TANDEM_ESTIMATOR_INTERNAL_MODE_GRAPH_H_

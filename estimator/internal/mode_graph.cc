// estimator/internal/mode_graph.cc
#include "estimator/internal/mode_graph.h"

#include "absl/strings/str_cat.h"
#include "estimator/internal/training_strategy.h"
#include "framework/core/status.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/optimizer.h"

namespace tandem::internal {
namespace {

// A component's per-example shape: the batch's without dimension 0. A scalar
// component (an unbatched input) has no batch dimension: its placeholder takes any
// shape (unknown rank).
ServingInput SpecOf(const std::string& name, const Tensor& batch) {
  Dims dims = batch.shape().dims();
  if (dims.empty()) return ServingInput{name, batch.dtype(), PartialShape::UnknownRank()};
  dims.erase(dims.begin());
  return ServingInput{name, batch.dtype(), PartialShape(absl::MakeConstSpan(dims))};
}

}  // namespace

absl::StatusOr<std::optional<data::Element>> OpenInput::Next() {
  if (first) {
    std::optional<data::Element> e = std::move(first);
    first.reset();
    return e;
  }
  return iterator->GetNext();
}

ServingInputSpec OpenInput::FeatureSpec() const {
  ServingInputSpec spec;
  for (size_t i = 0; i < data.feature_names.size(); ++i) {
    const std::string& name = data.feature_names[i];
    ServingInput in = SpecOf(name, (*first)[i]);
    if (auto it = data.feature_shapes.find(name); it != data.feature_shapes.end()) {
      in.shape = it->second;
    }
    spec.push_back(std::move(in));
  }
  return spec;
}

std::optional<ServingInput> OpenInput::LabelSpec() const {
  if (!data.has_labels) return std::nullopt;
  return SpecOf("labels", first->back());
}

absl::StatusOr<OpenInput> OpenInputFn(const InputFn& input_fn, ModeKey mode,
                                      const InputContext& context, int step_cpu_threads) {
  const std::string where = absl::StrCat("input_fn(", ModeKeyName(mode), ")");
  TANDEM_ASSIGN_OR_RETURN(InputData data, Annotated(input_fn(mode, context), where));
  if (data.dataset == nullptr) return absl::InvalidArgumentError(where + " returned no dataset");
  OpenInput in;
  {
    data::ScopedStepCpuThreads step_threads(step_cpu_threads);
    TANDEM_ASSIGN_OR_RETURN(in.iterator, data.dataset->MakeIterator());
  }
  TANDEM_ASSIGN_OR_RETURN(in.first, in.iterator->GetNext());
  if (!in.first) {
    return absl::FailedPreconditionError(absl::StrCat(where, ": the dataset is empty"));
  }
  const size_t want = data.feature_names.size() + (data.has_labels ? 1 : 0);
  if (data.feature_names.empty() || in.first->size() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": dataset elements have ", in.first->size(), " components, but feature_names has ",
        data.feature_names.size(), data.has_labels ? " (+1 for the labels)" : ""));
  }
  in.data = std::move(data);
  return in;
}

absl::Status BuildModeGraph(const EstimatorOptions& o, ModeKey mode,
                            const ServingInputSpec& features,
                            const std::optional<ServingInput>& labels,
                            const TrainingStrategy* strategy, ModeGraph* g) {
  if (o.config.tf_random_seed()) g->root.graph()->set_seed(*o.config.tf_random_seed());
  if (strategy != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(g->root, strategy->Place(g->root));
  }
  g->global_step = ops::GetOrCreateGlobalStep(g->root);
  if (strategy != nullptr && mode == ModeKey::kTrain) strategy->EnableUpdates(g->root);
  auto placeholder = [&](const ServingInput& in) {
    Dims dims = in.shape.known_rank() ? in.shape.dims() : Dims{};
    dims.insert(dims.begin(), -1);
    return ops::Placeholder(g->root.WithOpName("input/" + in.name), in.dtype,
                            in.shape.known_rank() ? PartialShape(absl::MakeConstSpan(dims))
                                                  : PartialShape::UnknownRank());
  };
  for (const ServingInput& in : features) {
    Output p = placeholder(in);
    g->feed_names.push_back(p.name());
    if (!g->features.emplace(in.name, p).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("input_fn: duplicate feature '", in.name, "'"));
    }
  }
  Output label_placeholder;
  if (labels) {
    if (mode == ModeKey::kPredict) {
      g->feed_names.push_back("");  // PREDICT ignores labels, as TensorFlow does.
    } else {
      label_placeholder = placeholder(*labels);
      g->feed_names.push_back(label_placeholder.name());
    }
  }
  TANDEM_RETURN_IF_ERROR(g->root.status());
  // As TensorFlow's Estimator does, the model is built under a control dependency on
  // the global step's read, so hooks fetching that read see the step before this run's
  // increment: "loss = 2.31, step = 0" for the first step.
  const Scope model_scope = g->root.WithControlDependencies({g->global_step.value()});
  TANDEM_ASSIGN_OR_RETURN(g->spec,
                          o.model_fn(model_scope, g->features, label_placeholder, mode, o.params));
  TANDEM_RETURN_IF_ERROR(AnnotateStatus(g->root.status(), "model_fn"));
  if (g->spec.mode != mode) {
    return absl::InvalidArgumentError(absl::StrCat("model_fn returned a spec for mode ",
                                                   ModeKeyName(g->spec.mode), " when asked for ",
                                                   ModeKeyName(mode)));
  }
  return g->spec.Validate();
}

FeedMap Feeds(const ModeGraph& g, const data::Element& element) {
  FeedMap feeds;
  for (size_t i = 0; i < element.size() && i < g.feed_names.size(); ++i) {
    if (!g.feed_names[i].empty()) feeds.emplace_back(g.feed_names[i], element[i]);
  }
  return feeds;
}

}  // namespace tandem::internal

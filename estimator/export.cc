// estimator/export.cc
//
// Estimator::ExportSavedModel: the PREDICT graph around serving placeholders, written
// by serving::ExportGraph with the weights of a checkpoint.
#include "absl/strings/str_cat.h"
#include "estimator/estimator.h"
#include "estimator/internal/mode_graph.h"
#include "framework/core/status.h"
#include "serving/export_writer.h"

namespace tandem {

absl::StatusOr<ServingInputSpec> Estimator::ServingInputFromInputFn(const InputFn& input_fn) {
  TANDEM_ASSIGN_OR_RETURN(internal::OpenInput in,
                          internal::OpenInputFn(input_fn, ModeKey::kPredict, InputContext{}));
  return in.FeatureSpec();
}

absl::StatusOr<std::string> Estimator::ExportSavedModel(const std::string& export_dir_base,
                                                        const ServingInputSpec& inputs,
                                                        const ExportOptions& options) {
  if (inputs.empty()) return absl::InvalidArgumentError("export: the serving input spec is empty");
  std::string checkpoint = options.checkpoint_path;
  if (checkpoint.empty()) checkpoint = LatestCheckpoint();
  if (checkpoint.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("export: could not find a trained model (no checkpoint) in ", model_dir()));
  }
  internal::ModeGraph g;
  TANDEM_RETURN_IF_ERROR(internal::BuildModeGraph(options_, ModeKey::kPredict, inputs, std::nullopt,
                                                  /*strategy=*/nullptr, &g));
  serving::ExportGraphOptions eo;
  eo.model_name = options.model_name.empty() ? "model" : options.model_name;
  eo.inputs = g.features;
  eo.outputs = g.spec.predictions;
  eo.checkpoint_prefix = checkpoint;
  eo.metrics = options.metrics;
  return serving::ExportGraph(g.root.graph(), eo, export_dir_base);
}

}  // namespace tandem

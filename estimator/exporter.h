// estimator/exporter.h
//
// Exporters (tf.estimator.FinalExporter / LatestExporter / BestExporter): after an
// evaluation in train_and_evaluate, the task that evaluated (local training, the
// evaluator, or the chief when it evaluates the final checkpoint) hands the result to
// each exporter of the EvalSpec, which may export the evaluated checkpoint for serving
// to model_dir/export/<name>/<version> (format: serving/signature.h) with the eval
// metrics recorded in the signature, then keeps the newest `keep` versions.
//
//   kFinal:  exports only the final evaluation (the checkpoint at max_steps, or the
//            last one when training ends).
//   kLatest: exports after every evaluation.
//   kBest:   exports when `metric` is better (lower with lower_is_better, else
//            higher) than in every earlier export of this exporter. A restarted task
//            starts from the best value recorded in the existing exports' signatures,
//            as TensorFlow's BestExporter reads its earlier eval events.
//
// A global step that is already the newest export is not exported again (the chief and
// an evaluator may both evaluate the final checkpoint; a restarted task may evaluate a
// checkpoint twice). The serving inputs are the PREDICT input's features
// (Estimator::ServingInputFromInputFn of `serving_input_fn`), found at the first export.
//
// Thread safety: one task calls an exporter at a time.
#ifndef TANDEM_ESTIMATOR_EXPORTER_H_
#define TANDEM_ESTIMATOR_EXPORTER_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "estimator/estimator.h"

namespace tandem {

struct ExporterOptions {
  enum class Strategy { kFinal, kLatest, kBest };
  Strategy strategy = Strategy::kLatest;
  std::string name = "exporter";
  InputFn serving_input_fn;  // Its PREDICT features give the serving inputs.
  std::string model_name;    // In the signature.
  int keep = 5;
  std::string metric = "loss";  // kBest only.
  bool lower_is_better = true;  // kBest only.
};

class Exporter {
 public:
  explicit Exporter(ExporterOptions options) : options_(std::move(options)) {}

  const std::string& name() const { return options_.name; }
  // model_dir/export/<name>.
  std::string ExportBase(const Estimator& estimator) const;
  // Exports `result`'s checkpoint if the strategy says so; returns the new version
  // directory, or nullopt when nothing was exported. INVALID_ARGUMENT when kBest's
  // metric is not among the results.
  absl::StatusOr<std::optional<std::string>> MaybeExport(Estimator& estimator,
                                                         const EvalResult& result, bool is_final);

 private:
  // kBest: the best metric of the existing exports, read once.
  absl::Status LoadBest(const std::string& base);

  const ExporterOptions options_;
  std::optional<ServingInputSpec> inputs_;
  bool best_loaded_ = false;
  std::optional<double> best_;
};

}  // namespace tandem

#endif  // TANDEM_ESTIMATOR_EXPORTER_H_

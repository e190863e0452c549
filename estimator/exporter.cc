// estimator/exporter.cc
#include "estimator/exporter.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "glog/logging.h"
#include "serving/export_writer.h"
#include "serving/exported_model.h"

namespace tandem {
namespace {

// The global step of the newest version under `base`, or -1.
int64_t NewestExportedStep(const std::string& base) {
  absl::StatusOr<std::vector<int64_t>> versions = serving::ListVersions(base);
  if (!versions.ok() || versions->empty()) return -1;
  absl::StatusOr<serving::Signature> sig =
      serving::ReadSignature(env::JoinPath(base, absl::StrCat(versions->back())));
  return sig.ok() ? sig->global_step : -1;
}

}  // namespace

std::string Exporter::ExportBase(const Estimator& estimator) const {
  return env::JoinPath(env::JoinPath(estimator.model_dir(), "export"), options_.name);
}

absl::Status Exporter::LoadBest(const std::string& base) {
  best_loaded_ = true;
  if (!env::IsDirectory(base)) return absl::OkStatus();
  TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> versions, serving::ListVersions(base));
  for (int64_t v : versions) {
    absl::StatusOr<serving::Signature> sig =
        serving::ReadSignature(env::JoinPath(base, absl::StrCat(v)));
    if (!sig.ok()) {
      LOG(WARNING) << "Exporter " << options_.name
                   << ": skipping an unreadable export: " << sig.status();
      continue;
    }
    auto it = sig->metrics.find(options_.metric);
    if (it == sig->metrics.end()) continue;
    if (!best_ || (options_.lower_is_better ? it->second < *best_ : it->second > *best_)) {
      best_ = it->second;
    }
  }
  if (best_) {
    LOG(INFO) << "Exporter " << options_.name << ": best " << options_.metric
              << " of the earlier exports is " << *best_;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> Exporter::MaybeExport(Estimator& estimator,
                                                                 const EvalResult& result,
                                                                 bool is_final) {
  using Strategy = ExporterOptions::Strategy;
  const std::string base = ExportBase(estimator);
  if (options_.strategy == Strategy::kFinal && !is_final) return std::nullopt;
  if (options_.strategy == Strategy::kBest) {
    if (!best_loaded_) TANDEM_RETURN_IF_ERROR(LoadBest(base));
    auto it = result.metrics.find(options_.metric);
    if (it == result.metrics.end()) {
      std::vector<std::string> names;
      for (const auto& [name, unused] : result.metrics) names.push_back(name);
      return ConfigError(absl::StrCat("[export] metric '", options_.metric,
                                      "' is not an evaluation metric of the model; it has ",
                                      absl::StrJoin(names, ", ")));
    }
    const double value = it->second;
    if (best_ && !(options_.lower_is_better ? value < *best_ : value > *best_)) {
      LOG(INFO) << "Exporter " << options_.name << ": " << options_.metric << " = " << value
                << " at step " << result.global_step << " is not better than " << *best_
                << "; not exported";
      return std::nullopt;
    }
    best_ = value;
  }
  // The chief and an evaluator may both evaluate the final checkpoint, and a restarted
  // task may evaluate one again: a step already exported is not exported twice.
  if (NewestExportedStep(base) == result.global_step) {
    LOG(INFO) << "Exporter " << options_.name << ": global step " << result.global_step
              << " is already the newest export in " << base;
    return std::nullopt;
  }
  if (!inputs_) {
    TANDEM_ASSIGN_OR_RETURN(inputs_, Estimator::ServingInputFromInputFn(options_.serving_input_fn));
  }
  ExportOptions eo;
  eo.checkpoint_path = result.checkpoint_path;
  eo.model_name = options_.model_name;
  for (const auto& [name, value] : result.metrics) eo.metrics[name] = value;
  TANDEM_ASSIGN_OR_RETURN(std::string dir, estimator.ExportSavedModel(base, *inputs_, eo));
  TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> deleted,
                          serving::GarbageCollectExports(base, options_.keep));
  for (int64_t v : deleted) {
    LOG(INFO) << "Exporter " << options_.name << ": deleted old version " << v;
  }
  return dir;
}

}  // namespace tandem

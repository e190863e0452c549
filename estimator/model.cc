// estimator/model.cc
//
// ModeKey names, EstimatorSpec validation (TensorFlow's rules), the model registry
// and the binding of a Model to a job.
#include "estimator/model.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "estimator/internal/did_you_mean.h"
#include "estimator/internal/partition_config.h"
#include "framework/core/status.h"

namespace tandem {

const char* ModeKeyName(ModeKey mode) {
  switch (mode) {
    case ModeKey::kTrain:
      return "train";
    case ModeKey::kEval:
      return "eval";
    case ModeKey::kPredict:
      return "infer";
  }
  return "unknown";
}

absl::Status EstimatorSpec::Validate() const {
  const std::string where = absl::StrCat("EstimatorSpec for mode ", ModeKeyName(mode), ": ");
  if (mode == ModeKey::kTrain || mode == ModeKey::kEval) {
    if (!loss.valid()) return absl::InvalidArgumentError(where + "missing loss");
    if (loss.dtype() != DType::kFloat) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "loss must be float32, got ", DTypeName(loss.dtype())));
    }
    const PartialShape& s = loss.shape();
    if (s.known_rank() && s.rank() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "loss must be a scalar, got shape ", s.DebugString()));
    }
  }
  if (mode == ModeKey::kTrain && train_op == nullptr) {
    return absl::InvalidArgumentError(where + "missing train_op");
  }
  if (mode == ModeKey::kPredict && predictions.empty()) {
    return absl::InvalidArgumentError(where + "missing predictions");
  }
  for (const auto& [key, tensor] : predictions) {
    if (!tensor.valid()) {
      return absl::InvalidArgumentError(absl::StrCat(where, "prediction '", key, "' is invalid"));
    }
    if (tensor.shape().known_rank() && tensor.shape().rank() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "prediction '", key,
                       "' must have the batch as its first dimension, got a scalar"));
    }
  }
  for (const auto& [name, metric] : eval_metric_ops) {
    if (!metric.value.valid() || !metric.update_op.valid()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "eval metric '", name, "' has no value or update_op"));
    }
  }
  return absl::OkStatus();
}

namespace {

absl::Status AddEntry(std::map<std::string, ModelRegistry::Entry>& factories,
                      const std::string& name, ModelRegistry::Entry entry, bool empty) {
  if (name.empty()) return absl::InvalidArgumentError("model name must not be empty");
  if (empty) return absl::InvalidArgumentError(absl::StrCat("model '", name, "': no factory"));
  if (!factories.emplace(name, std::move(entry)).second) {
    return absl::AlreadyExistsError(absl::StrCat("model '", name, "' is already registered"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Model>> NotNull(const std::string& name,
                                               absl::StatusOr<std::unique_ptr<Model>> model) {
  if (model.ok() && *model == nullptr) {
    return absl::InternalError(absl::StrCat("model '", name, "': factory returned null"));
  }
  return model;
}

}  // namespace

absl::Status ModelRegistry::Register(const std::string& name, ModelFactory factory) {
  const bool empty = !factory;
  return AddEntry(factories_, name, Entry{std::move(factory), nullptr}, empty);
}

absl::Status ModelRegistry::Register(const std::string& name, ConfiguredModelFactory factory) {
  const bool empty = !factory;
  return AddEntry(factories_, name, Entry{nullptr, std::move(factory)}, empty);
}

absl::StatusOr<const ModelRegistry::Entry*> ModelRegistry::Find(const std::string& name) const {
  auto it = factories_.find(name);
  if (it == factories_.end()) {
    return absl::NotFoundError(absl::StrCat("[model] name: unknown model '", name, "'",
                                            internal::DidYouMean(name, Names()),
                                            "; registered models: ", absl::StrJoin(Names(), ", ")));
  }
  return &it->second;
}

absl::StatusOr<std::unique_ptr<Model>> ModelRegistry::Create(const std::string& name) const {
  TANDEM_ASSIGN_OR_RETURN(const Entry* e, Find(name));
  if (!e->plain) {
    return absl::FailedPreconditionError(
        absl::StrCat("model '", name, "' is made from a job config: Create(name, job)"));
  }
  return NotNull(name, e->plain());
}

absl::StatusOr<std::unique_ptr<Model>> ModelRegistry::Create(const std::string& name,
                                                             const JobConfig& job) const {
  TANDEM_ASSIGN_OR_RETURN(const Entry* e, Find(name));
  if (e->plain && internal::PartitionerRequested(job.distribute)) {
    return ConfigError(absl::StrCat(
        "[distribute] partitioner = \"", job.distribute.partitioner, "\": model '", name,
        "' builds its own variables and partitions none of them; the partitioner applies "
        "to the tables of the premade estimators (and of models made from the job config "
        "that read it). Use partitioner = \"none\" or \"auto\""));
  }
  return NotNull(name, e->plain ? absl::StatusOr<std::unique_ptr<Model>>(e->plain())
                                : e->configured(job));
}

std::vector<std::string> ModelRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, unused] : factories_) names.push_back(name);
  return names;
}

InputFn BindInputFn(Model* model, const JobConfig* job) {
  return [model, job](ModeKey mode, const InputContext& context) {
    return model->InputFn(mode, context, *job);
  };
}

ModelFn BindModelFn(Model* model) {
  return [model](const Scope& scope, const Features& features, Output labels, ModeKey mode,
                 const ModelSection& params) {
    return model->ModelFn(scope, features, labels, mode, params);
  };
}

}  // namespace tandem

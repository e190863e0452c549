// estimator/training.cc
//
// train_and_evaluate and train: the dispatch on this task's role, and the local form,
// training with a checkpoint listener that evaluates the checkpoints it is told about,
// throttled (TensorFlow's _NewCheckpointListenerForEvaluate).
#include "estimator/training.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/core/termination.h"
#include "glog/logging.h"

namespace tandem {
namespace {

class EvaluateAfterSave : public CheckpointSaverListener {
 public:
  EvaluateAfterSave(Estimator* estimator, const EvalSpec* spec, std::optional<int64_t> max_steps)
      : estimator_(estimator), spec_(spec), max_steps_(max_steps) {}

  absl::StatusOr<bool> AfterSave(Session* session, int64_t global_step,
                                 const std::string& prefix) override {
    if (first_save_) {  // The model is not trained yet.
      first_save_ = false;
      return false;
    }
    const double now = Now();
    if (last_eval_time_ >= 0 && now - last_eval_time_ < spec_->throttle_secs) return false;
    TANDEM_RETURN_IF_ERROR(Evaluate(prefix, global_step, max_steps_));
    return false;
  }

  absl::Status End(Session* session, int64_t global_step) override {
    // A SIGTERM leaves seconds to exit: the checkpoint is saved, evaluation is not urgent.
    if (last_eval_step_ == global_step || termination::Requested()) return absl::OkStatus();
    return Evaluate(estimator_->LatestCheckpoint(), global_step, /*final_step=*/0);
  }

  const std::optional<EvalResult>& result() const { return result_; }

 private:
  static double Now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  absl::Status Evaluate(const std::string& prefix, int64_t global_step,
                        std::optional<int64_t> final_step) {
    TANDEM_ASSIGN_OR_RETURN(EvalResult r,
                            internal::EvaluateCheckpoint(*estimator_, *spec_, prefix, final_step));
    last_eval_time_ = Now();
    last_eval_step_ = global_step;
    result_ = std::move(r);
    return absl::OkStatus();
  }

  Estimator* estimator_;  // Not owned.
  const EvalSpec* spec_;  // Not owned.
  const std::optional<int64_t> max_steps_;
  bool first_save_ = true;
  double last_eval_time_ = -1;
  int64_t last_eval_step_ = -1;
  std::optional<EvalResult> result_;
};

absl::StatusOr<TaskResult> TrainLocally(Estimator& estimator, const TrainSpec& train_spec,
                                        const EvalSpec& eval_spec) {
  auto listener = std::make_shared<EvaluateAfterSave>(&estimator, &eval_spec, train_spec.max_steps);
  TrainOptions to;
  to.max_steps = train_spec.max_steps;
  to.hooks = train_spec.hooks;
  if (estimator.config().checkpoints_enabled()) to.saving_listeners.push_back(listener);
  TaskResult result{"local"};
  TANDEM_ASSIGN_OR_RETURN(result.global_step, estimator.Train(train_spec.input_fn, to));
  if (listener->result() && listener->result()->global_step == *result.global_step) {
    result.evaluation = *listener->result();
    return result;
  }
  // Training was skipped (already at max_steps) or checkpoints are off: evaluate now.
  TANDEM_ASSIGN_OR_RETURN(result.evaluation, internal::EvaluateCheckpoint(estimator, eval_spec, "",
                                                                          /*final_step=*/0));
  return result;
}

// A chief, master or worker of a cluster; the chief evaluates (eval_spec non-null and
// final_on_chief) and ends the cluster.
absl::StatusOr<TaskResult> TrainOnCluster(Estimator& estimator, const TrainSpec& train_spec,
                                          const EvalSpec* eval_spec) {
  const RunConfig& config = estimator.config();
  TrainOptions to;
  to.max_steps = train_spec.max_steps;
  to.hooks = train_spec.hooks;
  TaskResult result{config.task_type()};
  TANDEM_ASSIGN_OR_RETURN(result.global_step, estimator.Train(train_spec.input_fn, to));
  if (!config.is_chief()) return result;
  if (eval_spec != nullptr && eval_spec->final_on_chief) {
    TANDEM_ASSIGN_OR_RETURN(result.evaluation, internal::EvaluateCheckpoint(estimator, *eval_spec,
                                                                            "", /*final_step=*/0));
  }
  TANDEM_RETURN_IF_ERROR(internal::EndCluster(config, estimator.security()));
  return result;
}

absl::Status CheckSpecs(const TrainSpec& train_spec, const EvalSpec* eval_spec) {
  if (!train_spec.input_fn || (eval_spec != nullptr && !eval_spec->input_fn)) {
    return absl::InvalidArgumentError("train_and_evaluate: TrainSpec and EvalSpec need input_fn");
  }
  if (eval_spec != nullptr && (eval_spec->throttle_secs < 0 || eval_spec->start_delay_secs < 0)) {
    return absl::InvalidArgumentError("EvalSpec: throttle_secs and start_delay_secs must be >= 0");
  }
  return absl::OkStatus();
}

}  // namespace

namespace internal {

absl::StatusOr<EvalResult> EvaluateCheckpoint(Estimator& estimator, const EvalSpec& spec,
                                              const std::string& checkpoint,
                                              std::optional<int64_t> final_step) {
  EvalOptions eo;
  eo.steps = spec.steps;
  eo.hooks = spec.hooks;
  eo.name = spec.name;
  eo.checkpoint_path = checkpoint;
  TANDEM_ASSIGN_OR_RETURN(EvalResult result, estimator.Evaluate(spec.input_fn, eo));
  const bool is_final = final_step && result.global_step >= *final_step;
  for (const std::shared_ptr<Exporter>& exporter : spec.exporters) {
    TANDEM_RETURN_IF_ERROR(
        AnnotateStatus(exporter->MaybeExport(estimator, result, is_final).status(),
                       absl::StrCat("exporter '", exporter->name(), "'")));
  }
  return result;
}

}  // namespace internal

absl::StatusOr<TaskResult> TrainAndEvaluate(Estimator& estimator, const TrainSpec& train_spec,
                                            const EvalSpec& eval_spec) {
  TANDEM_RETURN_IF_ERROR(CheckSpecs(train_spec, &eval_spec));
  const std::string& type = estimator.config().task_type();
  if (type == kJobEvaluator) return internal::RunEvaluator(estimator, train_spec, eval_spec);
  if (type == kJobPs) return internal::RunParameterServer(estimator, train_spec.max_steps);
  if (estimator.config().TrainsOnCluster()) {
    return TrainOnCluster(estimator, train_spec, &eval_spec);
  }
  return TrainLocally(estimator, train_spec, eval_spec);
}

absl::StatusOr<TaskResult> Train(Estimator& estimator, const TrainSpec& train_spec) {
  TANDEM_RETURN_IF_ERROR(CheckSpecs(train_spec, nullptr));
  const std::string& type = estimator.config().task_type();
  if (type == kJobEvaluator) {
    return ConfigError(
        "this task is the evaluator (TF_CONFIG task.type), which trains nothing: run "
        "`train_and_evaluate` to evaluate checkpoints as they appear, or `evaluate` for one",
        absl::StatusCode::kFailedPrecondition);
  }
  if (type == kJobPs) return internal::RunParameterServer(estimator, train_spec.max_steps);
  if (estimator.config().TrainsOnCluster()) return TrainOnCluster(estimator, train_spec, nullptr);
  TrainOptions to;
  to.max_steps = train_spec.max_steps;
  to.hooks = train_spec.hooks;
  TaskResult result{"local"};
  TANDEM_ASSIGN_OR_RETURN(result.global_step, estimator.Train(train_spec.input_fn, to));
  return result;
}

}  // namespace tandem

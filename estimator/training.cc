// estimator/training.cc
//
// Local train_and_evaluate: training with a checkpoint listener that evaluates the
// checkpoints it is told about, throttled (TensorFlow's
// _NewCheckpointListenerForEvaluate).
#include "estimator/training.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "glog/logging.h"

namespace tandem {
namespace {

class EvaluateAfterSave : public CheckpointSaverListener {
 public:
  EvaluateAfterSave(Estimator* estimator, const EvalSpec* spec)
      : estimator_(estimator), spec_(spec) {}

  absl::StatusOr<bool> AfterSave(Session* session, int64_t global_step,
                                 const std::string& prefix) override {
    if (first_save_) {  // The model is not trained yet.
      first_save_ = false;
      return false;
    }
    const double now = Now();
    if (last_eval_time_ >= 0 && now - last_eval_time_ < spec_->throttle_secs) return false;
    TANDEM_RETURN_IF_ERROR(Evaluate(prefix, global_step));
    return false;
  }

  absl::Status End(Session* session, int64_t global_step) override {
    if (last_eval_step_ == global_step) return absl::OkStatus();
    return Evaluate(estimator_->LatestCheckpoint(), global_step);
  }

  const std::optional<EvalResult>& result() const { return result_; }

 private:
  static double Now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  absl::Status Evaluate(const std::string& prefix, int64_t global_step) {
    EvalOptions eo;
    eo.steps = spec_->steps;
    eo.hooks = spec_->hooks;
    eo.name = spec_->name;
    eo.checkpoint_path = prefix;
    TANDEM_ASSIGN_OR_RETURN(EvalResult r, estimator_->Evaluate(spec_->input_fn, eo));
    last_eval_time_ = Now();
    last_eval_step_ = global_step;
    result_ = std::move(r);
    return absl::OkStatus();
  }

  Estimator* estimator_;  // Not owned.
  const EvalSpec* spec_;  // Not owned.
  bool first_save_ = true;
  double last_eval_time_ = -1;
  int64_t last_eval_step_ = -1;
  std::optional<EvalResult> result_;
};

}  // namespace

absl::StatusOr<EvalResult> TrainAndEvaluate(Estimator& estimator, const TrainSpec& train_spec,
                                            const EvalSpec& eval_spec) {
  const RunConfig& config = estimator.config();
  if (config.is_distributed() || config.task_type() == "evaluator") {
    return absl::UnimplementedError(
        absl::StrCat("train_and_evaluate as task '", config.task_type(),
                     "' of a cluster is not implemented yet (the Estimator does not drive the "
                     "distributed runtime); run without a cluster (local mode)"));
  }
  if (!train_spec.input_fn || !eval_spec.input_fn) {
    return absl::InvalidArgumentError("train_and_evaluate: TrainSpec and EvalSpec need input_fn");
  }
  if (eval_spec.throttle_secs < 0) {
    return absl::InvalidArgumentError("EvalSpec: throttle_secs must be >= 0");
  }
  auto listener = std::make_shared<EvaluateAfterSave>(&estimator, &eval_spec);
  TrainOptions to;
  to.max_steps = train_spec.max_steps;
  to.hooks = train_spec.hooks;
  if (config.checkpoints_enabled()) to.saving_listeners.push_back(listener);
  TANDEM_ASSIGN_OR_RETURN(int64_t step, estimator.Train(train_spec.input_fn, to));
  if (listener->result() && listener->result()->global_step == step) return *listener->result();
  // Training was skipped (already at max_steps) or checkpoints are off: evaluate now.
  EvalOptions eo;
  eo.steps = eval_spec.steps;
  eo.hooks = eval_spec.hooks;
  eo.name = eval_spec.name;
  return estimator.Evaluate(eval_spec.input_fn, eo);
}

}  // namespace tandem

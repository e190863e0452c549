// estimator/training.h
//
// train_and_evaluate (tf.estimator.train_and_evaluate) and train, for whatever task
// the Estimator's RunConfig says this process is (docs/architecture.md).
// Every task of a cluster runs the same call; only TF_CONFIG differs.
//
//   local, or a cluster of one task: trains until TrainSpec::max_steps, evaluating
//     after each checkpoint save (except the one made when the session is created)
//     when at least throttle_secs passed since the last evaluation, and once more at
//     the end unless the last checkpoint was just evaluated. start_delay_secs applies
//     to an evaluator task only, as in TensorFlow.
//   chief / master: trains with its variables on the ps tasks (Estimator::Train on
//     the cluster) to max_steps and writes the final checkpoint; evaluates that
//     checkpoint itself when EvalSpec::final_on_chief; waits (up to ten minutes,
//     naming the tasks still up every 30 s) until every worker task has exited; then
//     sends Shutdown to every ps task.
//   worker: trains on its input shard until the shared global_step reaches max_steps.
//   ps: serves this task's variables until a Shutdown RPC (the chief, after
//     training), then returns. If the chief dies, the ps keeps serving, so a restarted
//     chief finds it; a ps that finds the checkpoint at max_steps in model_dir and no
//     chief answering (twice, 10 s apart) returns as well.
//
// SIGTERM / SIGINT (framework/core/termination.h) end every role early with
// CANCELLED: a training task after its current step (the chief writes a checkpoint
// first and skips its final evaluation), the ps at once, the evaluator between
// evaluations. Recoverable errors (a task of the cluster died) re-create the
// session; a training task whose step fails that way after the chief saved the
// checkpoint at max_steps returns that checkpoint's step.
//   evaluator: trains nothing and starts no server. Waits start_delay_secs, then
//     evaluates each new checkpoint of model_dir (the newest one when several
//     appeared), at most once per throttle_secs, in a local session, writing
//     model_dir/eval_<name>; returns after evaluating a checkpoint at or past
//     max_steps. It needs TrainSpec::max_steps (a config error otherwise). Restarted,
//     it skips checkpoints at or below the highest step model_dir/eval_<name> already
//     holds (so none is evaluated twice), and returns at once when that is max_steps.
//
// Exporters (EvalSpec::exporters) run after each evaluation, in the task that made it:
// the local process, the evaluator, or the chief for the final checkpoint when
// final_on_chief (set it false when an evaluator exports, so one task writes each
// export directory).
//
// Train (for `trainer train`) is the same without evaluation; an evaluator task is a
// config error there (it has nothing to train).
//
// Thread safety: one call at a time per Estimator.
#ifndef TANDEM_ESTIMATOR_TRAINING_H_
#define TANDEM_ESTIMATOR_TRAINING_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "estimator/estimator.h"
#include "estimator/exporter.h"

namespace tandem {

struct TrainSpec {
  InputFn input_fn;
  std::optional<int64_t> max_steps;  // Unset: until the input ends.
  std::vector<std::shared_ptr<SessionRunHook>> hooks;
};

struct EvalSpec {
  InputFn input_fn;
  std::optional<int64_t> steps = 100;  // Unset: until the input ends.
  std::string name;
  std::vector<std::shared_ptr<SessionRunHook>> hooks;
  int64_t start_delay_secs = 120;
  int64_t throttle_secs = 600;
  // On a cluster: the chief evaluates the final checkpoint after training.
  bool final_on_chief = true;
  // Given each evaluation's result by the task that evaluated (estimator/exporter.h).
  std::vector<std::shared_ptr<Exporter>> exporters;
};

// What this task did.
struct TaskResult {
  std::string role;                    // "local", "chief", "master", "worker", "ps" or "evaluator".
  std::optional<int64_t> global_step;  // Training tasks: the step training ended at.
  std::optional<EvalResult> evaluation;  // The last evaluation this task made.
  std::string stop_reason;               // ps: why it stopped serving.
};

absl::StatusOr<TaskResult> TrainAndEvaluate(Estimator& estimator, const TrainSpec& train_spec,
                                            const EvalSpec& eval_spec);
absl::StatusOr<TaskResult> Train(Estimator& estimator, const TrainSpec& train_spec);

namespace internal {
// The roles of a cluster (cluster_roles.cc).
// max_steps: when set, the ps also ends once model_dir holds a checkpoint at
// max_steps and the chief does not answer (it finished while this ps was down).
absl::StatusOr<TaskResult> RunParameterServer(const Estimator& estimator,
                                              std::optional<int64_t> max_steps);
absl::StatusOr<TaskResult> RunEvaluator(Estimator& estimator, const TrainSpec& train_spec,
                                        const EvalSpec& eval_spec);
// Evaluates `checkpoint` ("" = the latest) with the spec's steps, hooks and name, then
// hands the result to the spec's exporters; the evaluation is final (for kFinal
// exporters) when its global step is at least `final_step`.
absl::StatusOr<EvalResult> EvaluateCheckpoint(Estimator& estimator, const EvalSpec& spec,
                                              const std::string& checkpoint,
                                              std::optional<int64_t> final_step);
// After the chief trained: waits for the workers to exit, then shuts the ps down.
absl::Status EndCluster(const RunConfig& config, const TransportSecurity& security);
}  // namespace internal

}  // namespace tandem

#endif  // TANDEM_ESTIMATOR_TRAINING_H_

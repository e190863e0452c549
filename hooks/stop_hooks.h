// hooks/stop_hooks.h
//
// The hooks that decide when a worker trains and when training stops, with
// TensorFlow's behaviour:
//   StopAtStepHook        stop after `num_steps` more steps or at `last_step`
//   GlobalStepWaiterHook  delays a worker until the global step reaches a value
//   EarlyStoppingHook     stops when an eval metric has not improved for N steps
//
// Hooks that need the global step find it in Begin (ops::GetGlobalStep) and fail with
// FAILED_PRECONDITION naming the hook when the graph has none. As in TensorFlow, the
// global step fetched alongside a train op may be the value before or after that
// step's increment; hooks that stop at a step re-read it when it matters.
//
// Thread safety: see session_run_hook.h.
#ifndef TANDEM_HOOKS_STOP_HOOKS_H_
#define TANDEM_HOOKS_STOP_HOOKS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hooks/session_run_hook.h"

namespace tandem {

class StopAtStepHook : public SessionRunHook {
 public:
  // Exactly one of num_steps (steps from the global step at AfterCreateSession) and
  // last_step (an absolute global step); INVALID_ARGUMENT from Begin otherwise.
  StopAtStepHook(std::optional<int64_t> num_steps, std::optional<int64_t> last_step);
  absl::Status Begin(Graph* graph) override;
  absl::Status AfterCreateSession(Session* session) override;
  absl::StatusOr<SessionRunArgs> BeforeRun(SessionRunContext& context) override;
  absl::Status AfterRun(SessionRunContext& context, const SessionRunValues& values) override;

 private:
  std::optional<int64_t> num_steps_, last_step_;
  std::string global_step_tensor_;
};

class GlobalStepWaiterHook : public SessionRunHook {
 public:
  // BeforeRun blocks (polling every `poll_secs`) until the global step >= wait_until_step.
  explicit GlobalStepWaiterHook(int64_t wait_until_step, double poll_secs = 1.0);
  absl::Status Begin(Graph* graph) override;
  absl::StatusOr<SessionRunArgs> BeforeRun(SessionRunContext& context) override;

 private:
  int64_t wait_until_step_;
  double poll_secs_;
  bool waited_ = false;
  std::string global_step_tensor_;
};

// tf.estimator.experimental.stop_if_no_{increase,decrease}_hook: every `every` it reads
// the scalars `metric_name` written to `eval_dir` (event files of Evaluate) and stops
// training when the best value is at least `max_steps_without_improvement` global
// steps older than an evaluation (TensorFlow's >=, scanning evaluations in step order).
// Not before `min_steps`: no check while the global step is below it, and evaluations
// of earlier steps are ignored (as TensorFlow's min_steps).
class EarlyStoppingHook : public SessionRunHook {
 public:
  EarlyStoppingHook(std::string eval_dir, std::string metric_name, bool higher_is_better,
                    int64_t max_steps_without_improvement, int64_t min_steps = 0,
                    Every every = Every::Secs(60));
  absl::Status Begin(Graph* graph) override;
  absl::StatusOr<SessionRunArgs> BeforeRun(SessionRunContext& context) override;
  absl::Status AfterRun(SessionRunContext& context, const SessionRunValues& values) override;

 private:
  std::string eval_dir_, metric_name_;
  bool higher_is_better_;
  int64_t max_steps_without_improvement_, min_steps_;
  SecondOrStepTimer timer_;
  std::string global_step_tensor_;
};

}  // namespace tandem

#endif  // TANDEM_HOOKS_STOP_HOOKS_H_

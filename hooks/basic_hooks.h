// hooks/basic_hooks.h
//
// The built-in SessionRunHooks (tf.train.*Hook), with TensorFlow's behaviour:
//
//   StopAtStepHook        stop after `num_steps` more steps or at `last_step`
//   CheckpointSaverHook   save every N secs/steps, after session creation and at the end;
//                         CheckpointSaverListeners around each save
//   StepCounterHook       "global_step/sec" summary and log line every N steps/secs
//   LoggingTensorHook     logs named tensors every N steps/secs:
//                         "loss = 0.0381, step = 100 (0.452 sec)"
//   NanTensorHook         fails (or stops) when the loss is NaN/inf
//   SummarySaverHook      writes the graph's scalar summaries every N steps/secs
//   ProfilerHook          Chrome trace JSON (timeline-<step>.json) every N steps/secs
//   GlobalStepWaiterHook  delays a worker until the global step reaches a value
//   FinalOpsHook          runs tensors at End and keeps their values
//   EarlyStoppingHook     stops when an eval metric has not improved for N steps
//
// Hooks that need the global step find it in Begin (ops::GetGlobalStep) and fail with
// FAILED_PRECONDITION naming the hook when the graph has none. As in TensorFlow, the
// global step fetched alongside a train op may be the value before or after that
// step's increment; hooks that stop at a step re-read it when it matters.
//
// Thread safety: see session_run_hook.h.
#ifndef TANDEM_HOOKS_BASIC_HOOKS_H_
#define TANDEM_HOOKS_BASIC_HOOKS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hooks/scaffold.h"
#include "hooks/session_run_hook.h"
#include "hooks/summary_writer.h"

namespace tandem {

// How often a timed hook fires: exactly one of the two.
struct Every {
  std::optional<double> secs;
  std::optional<int64_t> steps;
  static Every Steps(int64_t n) { return Every{std::nullopt, n}; }
  static Every Secs(double s) { return Every{s, std::nullopt}; }
};

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

// Called around checkpoint saves (tf.train.CheckpointSaverListener).
class CheckpointSaverListener {
 public:
  virtual ~CheckpointSaverListener() = default;
  virtual absl::Status Begin() { return absl::OkStatus(); }
  virtual absl::Status BeforeSave(Session* session, int64_t global_step) {
    return absl::OkStatus();
  }
  // Returning true asks the training loop to stop.
  virtual absl::StatusOr<bool> AfterSave(Session* session, int64_t global_step,
                                         const std::string& checkpoint_prefix) {
    return false;
  }
  virtual absl::Status End(Session* session, int64_t global_step) { return absl::OkStatus(); }
};

class CheckpointSaverHook : public SessionRunHook {
 public:
  // Saves with `scaffold`'s saver (not owned; finalised before AfterCreateSession).
  CheckpointSaverHook(std::string checkpoint_dir, Every every, Scaffold* scaffold,
                      std::vector<std::shared_ptr<CheckpointSaverListener>> listeners = {});
  absl::Status Begin(Graph* graph) override;
  absl::Status AfterCreateSession(Session* session) override;
  absl::StatusOr<SessionRunArgs> BeforeRun(SessionRunContext& context) override;
  absl::Status AfterRun(SessionRunContext& context, const SessionRunValues& values) override;
  absl::Status End(Session* session) override;

 private:
  // Saves at `step`; sets *stop when a listener asks to stop.
  absl::Status Save(Session* session, int64_t step, bool* stop);

  std::string checkpoint_dir_;
  SecondOrStepTimer timer_;
  Scaffold* scaffold_;  // Not owned.
  std::vector<std::shared_ptr<CheckpointSaverListener>> listeners_;
  std::string global_step_tensor_;
  int64_t steps_per_run_ = 1;
};

class StepCounterHook : public SessionRunHook {
 public:
  // Writes "global_step/sec" to the summary writer of `output_dir` ("" = log only).
  StepCounterHook(Every every, std::string output_dir);
  absl::Status Begin(Graph* graph) override;
  absl::StatusOr<SessionRunArgs> BeforeRun(SessionRunContext& context) override;
  absl::Status AfterRun(SessionRunContext& context, const SessionRunValues& values) override;

 private:
  SecondOrStepTimer timer_;
  std::string output_dir_;
  std::shared_ptr<SummaryWriter> writer_;
  std::string global_step_tensor_;
};

class LoggingTensorHook : public SessionRunHook {
 public:
  // `tensors`: display name -> tensor name, logged in the given order; scalars print as
  // numbers, small tensors as lists.
  LoggingTensorHook(std::vector<std::pair<std::string, std::string>> tensors, Every every,
                    bool at_end = false);
  absl::StatusOr<SessionRunArgs> BeforeRun(SessionRunContext& context) override;
  absl::Status AfterRun(SessionRunContext& context, const SessionRunValues& values) override;
  absl::Status End(Session* session) override;
  // The last line logged (for tests).
  const std::string& last_line() const { return last_line_; }

 private:
  std::vector<std::pair<std::string, std::string>> tensors_;
  SecondOrStepTimer timer_;
  bool at_end_;
  int64_t iter_ = 0;
  bool should_trigger_ = false;
  std::string last_line_;
};

class NanTensorHook : public SessionRunHook {
 public:
  // When the scalar `loss_tensor` is NaN or inf: INTERNAL "NaN loss during training."
  // if fail_on_nan_loss, else a logged error and a stop request.
  explicit NanTensorHook(std::string loss_tensor, bool fail_on_nan_loss = true);
  absl::StatusOr<SessionRunArgs> BeforeRun(SessionRunContext& context) override;
  absl::Status AfterRun(SessionRunContext& context, const SessionRunValues& values) override;

 private:
  std::string loss_tensor_;
  bool fail_on_nan_loss_;
};

class SummarySaverHook : public SessionRunHook {
 public:
  // Writes the graph's scalar summaries (ops::summary, collection kSummaries, found in
  // Begin) to the summary writer of `output_dir` when the timer fires.
  // Every session created also writes SessionLog START at the global step it starts
  // from.
  SummarySaverHook(Every every, std::string output_dir);
  absl::Status Begin(Graph* graph) override;
  absl::Status AfterCreateSession(Session* session) override;
  absl::StatusOr<SessionRunArgs> BeforeRun(SessionRunContext& context) override;
  absl::Status AfterRun(SessionRunContext& context, const SessionRunValues& values) override;
  absl::Status End(Session* session) override;

 private:
  SecondOrStepTimer timer_;
  std::string output_dir_;
  std::shared_ptr<SummaryWriter> writer_;
  std::vector<std::pair<std::string, std::string>> summaries_;  // tag -> tensor
  std::string global_step_tensor_;
  bool request_summary_ = false;
  int64_t next_step_ = -1;
};

class ProfilerHook : public SessionRunHook {
 public:
  // Writes `output_dir`/timeline-<step>.json (Chrome trace event format) of a traced
  // step when the timer fires.
  ProfilerHook(Every every, std::string output_dir);
  absl::Status Begin(Graph* graph) override;
  absl::StatusOr<SessionRunArgs> BeforeRun(SessionRunContext& context) override;
  absl::Status AfterRun(SessionRunContext& context, const SessionRunValues& values) override;

 private:
  SecondOrStepTimer timer_;
  std::string output_dir_;
  std::string global_step_tensor_;
  bool request_trace_ = false;
  int64_t next_step_ = -1;
};

// Chrome trace JSON ({"traceEvents": [...]}) of one step's stats.
std::string StepStatsToChromeTrace(const StepStats& stats);

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

class FinalOpsHook : public SessionRunHook {
 public:
  // Fetches `final_tensors` with `feeds` at End.
  explicit FinalOpsHook(std::vector<std::string> final_tensors, FeedMap feeds = {});
  absl::Status End(Session* session) override;
  const std::vector<Tensor>& final_values() const { return values_; }

 private:
  std::vector<std::string> final_tensors_;
  FeedMap feeds_;
  std::vector<Tensor> values_;
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

// One SummaryWriter per directory, shared by every hook writing there (TensorFlow's
// FileWriterCache), so a directory gets one event file per process.
absl::StatusOr<std::shared_ptr<SummaryWriter>> SummaryWriterForDir(const std::string& dir);

}  // namespace tandem

#endif  // TANDEM_HOOKS_BASIC_HOOKS_H_

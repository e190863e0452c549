// hooks/logging_hooks.h
//
// The hooks that fetch tensors and report them, with TensorFlow's behaviour:
//   StepCounterHook       "global_step/sec" summary and log line every N steps/secs
//   LoggingTensorHook     logs named tensors every N steps/secs:
//                         "loss = 0.0381, step = 100 (0.452 sec)"
//   NanTensorHook         fails (or stops) when the loss is NaN/inf
//   FinalOpsHook          runs tensors at End and keeps their values
//
// Hooks that need the global step find it in Begin (ops::GetGlobalStep) and fail with
// FAILED_PRECONDITION naming the hook when the graph has none. As in TensorFlow, the
// global step fetched alongside a train op may be the value before or after that
// step's increment; hooks that stop at a step re-read it when it matters.
//
// Thread safety: see session_run_hook.h.
#ifndef TANDEM_HOOKS_LOGGING_HOOKS_H_
#define TANDEM_HOOKS_LOGGING_HOOKS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hooks/session_run_hook.h"
#include "hooks/summary_writer.h"

namespace tandem {

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

}  // namespace tandem

#endif  // TANDEM_HOOKS_LOGGING_HOOKS_H_

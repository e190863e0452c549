// hooks/profiler_hook.h
//
// ProfilerHook (tf.train.ProfilerHook): writes a Chrome trace JSON
// (timeline-<step>.json) of a traced step every N steps/secs.
//
// Thread safety: see session_run_hook.h.
#ifndef TANDEM_HOOKS_PROFILER_HOOK_H_
#define TANDEM_HOOKS_PROFILER_HOOK_H_

#include <cstdint>
#include <string>

#include "hooks/session_run_hook.h"

namespace tandem {

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

}  // namespace tandem

#endif  // TANDEM_HOOKS_PROFILER_HOOK_H_

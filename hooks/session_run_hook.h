// hooks/session_run_hook.h
//
// SessionRunHook: code that runs around every step of a MonitoredSession, with
// TensorFlow 1.x's lifecycle (tf.train.SessionRunHook):
//
//   Begin(graph)                 once, before the session exists; may add ops to the graph
//   AfterCreateSession(session)  once the session exists and is initialised/restored
//   per step:
//     BeforeRun(context)  -> SessionRunArgs: extra fetches (and feeds) for this step
//     <the step runs: the caller's fetches plus every hook's>
//     AfterRun(context, values)  values.results[i] is the hook's fetches[i]
//   End(session)                 once, when the monitored session is closed normally
//                                (not after an error)
//
// A hook asks the loop to stop with context.RequestStop(); the step in progress still
// finishes and every hook still sees its AfterRun, and End is called at close. Hooks are
// called in the order they were given, for every phase.
//
// Errors: any phase may return an error; the monitored session stops and returns it
// (End is not called then, as in TensorFlow).
//
// SecondOrStepTimer fires every N seconds or every N steps (TensorFlow's timer for
// logging, summaries and checkpoints).
//
// Thread safety: a hook is driven by one monitored session from one thread.
#ifndef TANDEM_HOOKS_SESSION_RUN_HOOK_H_
#define TANDEM_HOOKS_SESSION_RUN_HOOK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "framework/graph/graph.h"
#include "framework/runtime/session.h"
#include "framework/runtime/step_stats.h"

namespace tandem {

// What the caller of MonitoredSession::Run asked for.
struct SessionRunRequest {
  FeedMap feeds;
  std::vector<std::string> fetches;  // Tensor names.
  std::vector<std::string> targets;  // Node names.
};

// What a hook adds to the step.
struct SessionRunArgs {
  std::vector<std::string> fetches;  // Tensor names; their values come back in AfterRun.
  std::vector<std::string> targets;  // Node names run without fetching.
  FeedMap feeds;                     // Must not feed a tensor another party feeds.
  bool trace = false;                // Ask for step stats (RunMetadata) this step.
};

// What a hook gets back after the step.
struct SessionRunValues {
  std::vector<Tensor> results;  // One per SessionRunArgs::fetches, in order.
  RunMetadata run_metadata;     // Step stats when any hook asked for a trace.
};

class SessionRunContext {
 public:
  SessionRunContext(const SessionRunRequest* original_args, Session* session)
      : original_args_(original_args), session_(session) {}

  const SessionRunRequest& original_args() const { return *original_args_; }
  Session* session() const { return session_; }  // Not owned.
  void RequestStop() { stop_requested_ = true; }
  bool stop_requested() const { return stop_requested_; }

 private:
  const SessionRunRequest* original_args_;  // Not owned.
  Session* session_;                        // Not owned.
  bool stop_requested_ = false;
};

class SessionRunHook {
 public:
  virtual ~SessionRunHook() = default;

  // Called once before the session is created; `graph` (not owned) may be extended.
  virtual absl::Status Begin(Graph* graph) { return absl::OkStatus(); }
  // Called once the session is created, initialised or restored.
  virtual absl::Status AfterCreateSession(Session* session) { return absl::OkStatus(); }
  virtual absl::StatusOr<SessionRunArgs> BeforeRun(SessionRunContext& context) {
    return SessionRunArgs();
  }
  virtual absl::Status AfterRun(SessionRunContext& context, const SessionRunValues& values) {
    return absl::OkStatus();
  }
  // Called when the monitored session closes without error; may run the session.
  virtual absl::Status End(Session* session) { return absl::OkStatus(); }
};

// How often a timed hook fires: exactly one of the two.
struct Every {
  std::optional<double> secs;
  std::optional<int64_t> steps;
  static Every Steps(int64_t n) { return Every{std::nullopt, n}; }
  static Every Secs(double s) { return Every{s, std::nullopt}; }
};

// Fires when `every_secs` seconds or `every_steps` steps have passed since it last
// triggered (exactly one of them set, else the timer never fires). Always triggers at
// the first step it is asked about.
class SecondOrStepTimer {
 public:
  SecondOrStepTimer(std::optional<double> every_secs, std::optional<int64_t> every_steps);

  // True when the timer should fire at `step`.
  bool ShouldTrigger(int64_t step) const;
  // Records that it fired at `step` now; returns the seconds and steps elapsed since
  // the last trigger (nullopt the first time).
  std::optional<std::pair<double, int64_t>> UpdateLastTriggered(int64_t step);
  std::optional<int64_t> last_triggered_step() const { return last_step_; }
  void Reset() { last_step_.reset(); }

 private:
  std::optional<double> every_secs_;
  std::optional<int64_t> every_steps_;
  std::optional<int64_t> last_step_;
  double last_time_ = 0;  // Monotonic seconds.
};

}  // namespace tandem

#endif  // TANDEM_HOOKS_SESSION_RUN_HOOK_H_

// hooks/sync_replicas_hook.h
//
// SyncReplicasHook drives synchronous replicas (framework/ops/sync_replicas.h) from a
// training task: TensorFlow's SyncReplicasOptimizerHook plus the chief's queue
// runner, and what TensorFlow lacks: a chief that notices missing replicas.
//
//   every replica: each step feeds its local step and replica id and fetches the
//     next local step the barrier releases it at; after a session is created (or
//     re-created) the local step is the global step, so a replica that joins or
//     rejoins starts at the current step.
//   chief: after each session creation runs chief_init, and starts (once) a runner
//     thread with a session of its own (`factory`): it waits until
//     `replicas_to_aggregate` gradients are in every accumulator and runs the update
//     (one global_step per aggregated update). When a wait times out without them it
//     asks `missing_replicas` which replica tasks do not answer; with fewer live
//     replicas than replicas_to_aggregate:
//       kWait (default): it keeps waiting and names the missing tasks every 30 s;
//         after patience_secs (0: no bound) the chief's next step fails with
//         UNAVAILABLE naming them;
//       kContinue: it aggregates as many gradients as replicas are live (at least
//         one) until the missing ones come back, saying so when that changes.
//     A failed runner step (a ps restarting) re-creates its session after a second.
//     Each update also fetches the accumulators' counts; every 100 updates and at End
//     the chief writes the summaries
//     sync_replicas/stale_gradients and sync_replicas/duplicate_gradients (dropped
//     so far, counted by the accumulators) to summary_dir, and End logs them.
//
// Thread safety: the hook methods run on the training thread; the runner is internal.
#ifndef TANDEM_HOOKS_SYNC_REPLICAS_HOOK_H_
#define TANDEM_HOOKS_SYNC_REPLICAS_HOOK_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "framework/ops/sync_replicas.h"
#include "framework/protos/graph.pb.h"
#include "hooks/monitored_session.h"
#include "hooks/session_run_hook.h"

namespace tandem {

struct SyncReplicasHookOptions {
  bool is_chief = false;
  int64_t replica_id = 0;
  int replicas_to_aggregate = 1;
  int total_num_replicas = 1;
  enum class OnMissing { kWait, kContinue };
  OnMissing on_missing = OnMissing::kWait;
  double patience_secs = 0;  // kWait: 0 waits forever.
  // The replica tasks ("worker:1 (host:port)") that do not answer now.
  std::function<std::vector<std::string>()> missing_replicas;
  // The chief runner's session.
  SessionFactory factory;
  SessionOptions session_options;
  std::string summary_dir;  // "": no summaries.
};

class SyncReplicasHook : public SessionRunHook {
 public:
  explicit SyncReplicasHook(SyncReplicasHookOptions options);
  ~SyncReplicasHook() override;

  absl::Status Begin(Graph* graph) override;
  absl::Status AfterCreateSession(Session* session) override;
  absl::StatusOr<SessionRunArgs> BeforeRun(SessionRunContext& context) override;
  absl::Status AfterRun(SessionRunContext& context, const SessionRunValues& values) override;
  absl::Status End(Session* session) override;

  // Aggregated updates the chief's runner made.
  int64_t updates() const { return updates_.load(); }

 private:
  void StartRunner();
  void StopRunner();
  void RunnerLoop();
  // True when the runner may aggregate `*required` gradients now; lowers or restores
  // `*required` (kContinue) and logs missing replicas.
  bool CheckReplicas(int* required);
  // Writes the dropped-gradient counts the last update fetched.
  void WriteDropped();

  SyncReplicasHookOptions options_;
  Graph* graph_ = nullptr;
  ops::SyncReplicasGraph names_;
  std::string global_step_tensor_;
  int64_t local_step_ = 0;

  std::thread runner_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> updates_{0};
  // After the last update: its global step, and the most stale / duplicate gradients
  // any accumulator counted.
  std::atomic<int64_t> step_{0}, stale_{0}, duplicates_{0};
  proto::GraphDef graph_def_;
  absl::Mutex mu_;
  absl::Status runner_error_ ABSL_GUARDED_BY(mu_);  // Returned by the next BeforeRun.
  double waiting_since_ = -1, last_missing_log_ = -1;
};

}  // namespace tandem

#endif  // TANDEM_HOOKS_SYNC_REPLICAS_HOOK_H_

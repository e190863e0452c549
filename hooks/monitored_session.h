// hooks/monitored_session.h
//
// MonitoredSession (tf.train.MonitoredSession) drives training steps through hooks and
// recovers from a lost session; MonitoredTrainingSession builds one with TensorFlow's
// default hooks for a chief or a worker.
//
//   Create(graph, creator, hooks):
//     hooks[i]->Begin(graph)             in order; may add ops
//     creator->CreateSession(graph)      finalises the Scaffold, creates the session,
//                                        restores or initialises (chief) or waits until
//                                        ready (worker)
//     hooks[i]->AfterCreateSession(s)
//   Run(request): BeforeRun of every hook, one Session::Run of the caller's and the
//     hooks' fetches/targets/feeds, AfterRun of every hook; returns the caller's fetches.
//     ShouldStop() is true once a hook requested a stop.
//   Close(): End(session) of every hook (skipped after an error), then closes the session.
//
// Recovery, one RecoveryPolicy for creating the session and for the steps: when a step
// (or a hook's session use) fails with ABORTED or UNAVAILABLE, or DEADLINE_EXCEEDED (a
// step past its deadline: a task that stopped answering), the session is closed and
// created again by the creator (the chief restores the latest checkpoint),
// AfterCreateSession runs again, and the error is returned to the caller with
// recovered() true: its next Run goes to the new session (TensorFlow's
// _RecoverableSession retries the step; tandem returns the error so the input batch
// is not silently replayed). A creation that fails with ABORTED or UNAVAILABLE is
// tried again, a second apart, up to the policy's create_attempts (at Create and
// after a failed step; a failed re-creation is tried again by the next Run). Past
// max_consecutive_failures failed steps in a row the error is final (recovered()
// false). After any such error the policy's finished_elsewhere predicate is asked
// first: when training ended on another task, the session stops (ShouldStop,
// finished_elsewhere()) instead of retrying, and Create returns such a stopped
// session rather than the error. Any other error is returned and the session stays
// as it is.
//
// Session creators separate the chief from the workers (the distributed seam):
//   ChiefSessionCreator   with keep_ready_variables, nothing when every variable is
//                         already initialised; else restore checkpoint_filename_with_path, else the
//                         latest checkpoint of checkpoint_dir, else run init_op (+ init_fn); then
//                         local_init_op. Only "no checkpoint at all" (checkpoint::IsNoCheckpoint)
//                         means initialise; any other restore error (a checkpoint lacking a
//                         variable, every listed checkpoint unreadable) is returned. After
//                         restoring/initialising, FAILED_PRECONDITION naming the variables still
//                         uninitialised (TensorFlow's "Init operations did not make model ready").
//   WorkerSessionCreator  runs before_ready_wait, then waits (polling) until every
//                         global variable is initialised, up to max_wait_secs
//                         (DEADLINE_EXCEEDED naming the uninitialised variables;
//                         CANCELLED once a SIGTERM asked the process to stop), then runs
//                         local_init_op.
// Both create sessions through a SessionFactory: NewDirectSession by default,
// GrpcSession when the options name a grpc:// target.
//
// Thread safety: one thread drives a MonitoredSession.
#ifndef TANDEM_HOOKS_MONITORED_SESSION_H_
#define TANDEM_HOOKS_MONITORED_SESSION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hooks/checkpoint_saver_hook.h"
#include "hooks/scaffold.h"
#include "hooks/session_run_hook.h"

namespace tandem {

using SessionFactory = std::function<absl::StatusOr<std::unique_ptr<Session>>(
    const proto::GraphDef&, const SessionOptions&)>;
// NewDirectSession. For a non-empty SessionOptions::target it returns UNIMPLEMENTED
// (hooks/ does not depend on framework/distributed): pass a factory that makes remote
// sessions.
SessionFactory DefaultSessionFactory();

class SessionCreator {
 public:
  virtual ~SessionCreator() = default;
  // A new, ready session for `graph` (not owned).
  virtual absl::StatusOr<std::unique_ptr<Session>> CreateSession(Graph* graph) = 0;
};

struct SessionCreatorOptions {
  std::shared_ptr<Scaffold> scaffold;  // Null: a default Scaffold.
  SessionOptions session_options;
  SessionFactory factory;  // Null: DefaultSessionFactory().
  // ChiefSessionCreator: when every variable is already initialised (the ps tasks
  // kept them while the chief restarted), use them: they are newer than any
  // checkpoint. Set on a cluster; in-process sessions start empty anyway.
  bool keep_ready_variables = false;
  // ChiefSessionCreator: this process writes checkpoints to checkpoint_dir (the
  // training chief): newer unreadable checkpoints are set aside when an older one is
  // restored (Saver::RestoreLatest), so that no save overwrites them.
  bool set_aside_unreadable = false;
  // WorkerSessionCreator: runs on each new session before it waits for the model to
  // be ready (the hybrid strategy's replicas initialise the variables they hold
  // themselves). May be empty.
  std::function<absl::Status(Session*)> before_ready_wait;
};

class ChiefSessionCreator : public SessionCreator {
 public:
  ChiefSessionCreator(SessionCreatorOptions options, std::string checkpoint_dir = "",
                      std::string checkpoint_filename_with_path = "");
  absl::StatusOr<std::unique_ptr<Session>> CreateSession(Graph* graph) override;
  // The checkpoint the last CreateSession restored ("" when it initialised).
  const std::string& restored_from() const { return restored_from_; }

 private:
  SessionCreatorOptions options_;
  std::string checkpoint_dir_, checkpoint_filename_with_path_;
  std::string restored_from_;
};

class WorkerSessionCreator : public SessionCreator {
 public:
  explicit WorkerSessionCreator(SessionCreatorOptions options, double max_wait_secs = 7200,
                                double poll_secs = 1.0);
  absl::StatusOr<std::unique_ptr<Session>> CreateSession(Graph* graph) override;

 private:
  SessionCreatorOptions options_;
  double max_wait_secs_, poll_secs_;
};

// ABORTED or UNAVAILABLE: a task of the cluster was lost or restarted; creating the
// session again can succeed.
bool IsLostTaskError(const absl::Status& s);
// IsLostTaskError, or DEADLINE_EXCEEDED (a step past SessionOptions::
// operation_timeout_ms): a step failing so is retried in a re-created session.
bool IsRecoverableStepError(const absl::Status& s);

// How a MonitoredSession recovers from a lost task (file comment).
struct RecoveryPolicy {
  // Tries at creating a session when one fails with ABORTED or UNAVAILABLE, a second
  // apart; 1: no second try. A SIGTERM (termination::Requested) ends the tries.
  int create_attempts = 1;
  // Failed steps in a row that re-create the session; the next one is final.
  int max_consecutive_failures = 10;
  // Asked after each lost-task error: true when training ended on another task (the
  // chief saved the checkpoint at max_steps, and may have shut the ps tasks down).
  // Empty: never.
  std::function<bool()> finished_elsewhere;
};

class MonitoredSession {
 public:
  static absl::StatusOr<std::unique_ptr<MonitoredSession>> Create(
      Graph* graph, std::unique_ptr<SessionCreator> creator,
      std::vector<std::shared_ptr<SessionRunHook>> hooks, RecoveryPolicy recovery = {});
  ~MonitoredSession();  // Closes (without calling End) if Close was not called.
  MonitoredSession(const MonitoredSession&) = delete;
  MonitoredSession& operator=(const MonitoredSession&) = delete;

  // One step; returns the values of request.fetches.
  absl::StatusOr<std::vector<Tensor>> Run(const SessionRunRequest& request);
  bool ShouldStop() const { return stop_requested_; }
  // End of every hook, then Session::Close. Idempotent.
  absl::Status Close();
  // The current underlying session (changes after a recovery). Not owned.
  Session* raw_session() const { return session_.get(); }
  // How many times the session was re-created after ABORTED/UNAVAILABLE.
  int recoveries() const { return recoveries_; }
  // The last Run failed with a lost-task error within the policy's budget: the caller
  // may go on with its next step.
  bool recovered() const { return recovered_; }
  // Training ended on another task (the policy's predicate said so): ShouldStop.
  bool finished_elsewhere() const { return finished_elsewhere_; }

 private:
  MonitoredSession(Graph* graph, std::unique_ptr<SessionCreator> creator,
                   std::vector<std::shared_ptr<SessionRunHook>> hooks, RecoveryPolicy recovery);
  absl::Status CreateAndNotify();
  // CreateAndNotify, tried again after a lost-task error per the policy.
  absl::Status CreateWithRetries();
  // Asks the policy whether training ended elsewhere; if so, stops.
  bool EndedElsewhere();
  // After the lost-task error `s`: counts it against the budget of failures in a row;
  // false when training ended elsewhere or the budget is spent.
  bool MayRetry(const absl::Status& s);
  // After the lost-task error `s` of a step: stops, re-creates or gives up (file comment).
  absl::Status Recover(const absl::Status& s);

  Graph* graph_;  // Not owned.
  std::unique_ptr<SessionCreator> creator_;
  std::vector<std::shared_ptr<SessionRunHook>> hooks_;
  std::unique_ptr<Session> session_;
  bool stop_requested_ = false;
  bool closed_ = false;
  bool failed_ = false;  // A step or hook returned a non-recoverable error: Close skips End.
  int recoveries_ = 0;
  const RecoveryPolicy recovery_;
  int consecutive_failures_ = 0;
  bool recovered_ = false;
  bool finished_elsewhere_ = false;
};

struct MonitoredTrainingSessionOptions {
  bool is_chief = true;
  std::string checkpoint_dir;  // "": no restore, no checkpoints.
  std::string summary_dir;     // "": checkpoint_dir.
  std::shared_ptr<Scaffold> scaffold;
  std::vector<std::shared_ptr<SessionRunHook>> hooks;
  std::vector<std::shared_ptr<SessionRunHook>> chief_only_hooks;
  // TensorFlow's defaults; 0 or unset disables the corresponding hook.
  bool keep_ready_variables = false;  // SessionCreatorOptions::keep_ready_variables.
  std::optional<double> save_checkpoint_secs = 600;
  std::optional<int64_t> save_checkpoint_steps;
  std::optional<int64_t> save_summaries_steps = 100;
  std::optional<double> save_summaries_secs;
  int64_t log_step_count_steps = 100;
  std::vector<std::shared_ptr<CheckpointSaverListener>> saving_listeners;
  SessionOptions session_options;
  SessionFactory factory;
  double max_wait_secs = 7200;
  // How the session recovers from a lost task.
  RecoveryPolicy recovery;
  // The factory's first session is kept for the MonitoredSession's life: re-creating
  // the session after a lost task hands out the same one again (its variables stay;
  // the creator finds them ready), and closing it leaves it open. The collective
  // strategy's replicas hold their variables in their own process this way.
  bool persistent_session = false;
  // Collective replicas: a task that is not the chief restores or initialises its own
  // variables as the chief does (without setting unreadable checkpoints aside) instead
  // of waiting for a chief to initialise shared ones.
  bool initialize_locally = false;
  // Runs on each new session once it is restored or initialised, before any hook's
  // AfterCreateSession (the collective group's formation and variable broadcast); an
  // error fails the creation. May be empty.
  std::function<absl::Status(Session*)> after_restore;
  // SessionCreatorOptions::before_ready_wait, for a worker that is not the chief and
  // does not initialize_locally.
  std::function<absl::Status(Session*)> before_ready_wait;
};

// Chief: ChiefSessionCreator, hooks = chief_only_hooks, StepCounterHook,
// SummarySaverHook, CheckpointSaverHook (each when enabled and a directory is set),
// then hooks. Worker: WorkerSessionCreator (ChiefSessionCreator with
// initialize_locally) and only `hooks`.
absl::StatusOr<std::unique_ptr<MonitoredSession>> NewMonitoredTrainingSession(
    Graph* graph, MonitoredTrainingSessionOptions options);

}  // namespace tandem

#endif  // TANDEM_HOOKS_MONITORED_SESSION_H_

// estimator/internal/collective_replicas.h
//
// The collective strategy's part of Estimator::Train (MultiWorkerMirroredStrategy):
//
//   - The group: the chief (or master) and the workers in RunConfig::replica_index
//     order (the chief, or worker 0 without one, is rank 0), set on this task's
//     CollectiveExecutor.
//   - One in-process session per Train call, shared by every session the monitored
//     session (re)creates: a failed collective step re-forms the group without losing
//     this replica's live variables.
//   - After each (re)creation (MonitoredTrainingSessionOptions::after_restore): join the
//     group with this replica's global step, broadcast the variables of the replica with
//     the newest one (the lowest rank among equals), and check that every replica now
//     holds the same values.
//   - ReplicaCheckHook: every check_replicas_steps global steps, the replicas compare
//     checksums of their variables; a difference is an INTERNAL error naming them. It
//     also carries SIGTERM/SIGINT to every replica: a signalled replica marks its next
//     all-reduce, and every replica stops after the step in which they all saw it.
//
// Thread safety: functions are thread-safe; a hook is used by one training loop.
#ifndef TANDEM_ESTIMATOR_INTERNAL_COLLECTIVE_REPLICAS_H_
#define TANDEM_ESTIMATOR_INTERNAL_COLLECTIVE_REPLICAS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "estimator/run_config.h"
#include "framework/distributed/collective/collective_executor.h"
#include "framework/graph/scope.h"
#include "framework/ops/state_ops.h"
#include "hooks/monitored_session.h"
#include "hooks/session_run_hook.h"

namespace tandem::internal {

// The training tasks ("/job:chief/replica:0/task:0", ...) in rank order.
std::vector<std::string> CollectiveMembers(const RunConfig& config);

// Sets `executor`'s group from `config` with the given timeout.
absl::Status ConfigureCollectiveGroup(const RunConfig& config, int64_t timeout_secs,
                                      CollectiveExecutor* executor);

// A factory of in-process sessions whose collective ops run over `executor`
// (SessionOptions::collective). The collective strategy uses it with
// MonitoredTrainingSessionOptions::persistent_session: a replica's variables live in
// its one session, which a re-created MonitoredSession keeps.
SessionFactory CollectiveSessionFactory(CollectiveExecutor* executor);

struct ReplicaVariables {
  std::string global_step;         // Tensor name of the global step's read.
  std::string broadcast_op;        // ops::BroadcastVariables' node.
  std::vector<std::string> reads;  // A read of every mirrored variable.
  std::string fingerprint;         // ops::CollectiveFingerprint of the graph.
  // Per mirrored variable: its name, a VarIsInitializedOp tensor and its initializer.
  std::vector<std::string> names, initialized, initializers;
};

// The mirrored variables of `graph` (every global variable, or with `skip_tables`
// every one that is not a table) with `global_step`'s read; adds their broadcast and
// initialisation checks to the graph under `root`. INVALID_ARGUMENT when there is
// nothing to mirror.
absl::StatusOr<ReplicaVariables> AddReplicaVariables(const Scope& root,
                                                     const ops::Variable& global_step,
                                                     bool skip_tables);

// Initialises the mirrored variables that are not (a hybrid replica's own copies,
// before it waits for the tables on the ps tasks), leaving the others as they are.
absl::Status InitializeUninitialized(Session* session, const ReplicaVariables& vars);

// Forms the group and broadcasts the variables (see above), waiting up to `wait_ms`
// for every replica.
std::function<absl::Status(Session*)> FormGroupAndBroadcast(CollectiveExecutor* executor,
                                                            ReplicaVariables vars, int64_t wait_ms);

class ReplicaCheckHook : public SessionRunHook {
 public:
  // every_steps == 0: no periodic comparison (signals are still carried).
  ReplicaCheckHook(CollectiveExecutor* executor, ReplicaVariables vars, int64_t every_steps);
  absl::StatusOr<SessionRunArgs> BeforeRun(SessionRunContext& context) override;
  absl::Status AfterRun(SessionRunContext& context, const SessionRunValues& values) override;

 private:
  CollectiveExecutor* const executor_;
  const ReplicaVariables vars_;
  const int64_t every_steps_;
};

// Compares a checksum of `vars.reads` across the group at `step`; INTERNAL naming the
// replicas that differ from rank 0.
absl::Status CheckReplicasAgree(Session* session, CollectiveExecutor* executor,
                                const ReplicaVariables& vars, int64_t step);

}  // namespace tandem::internal

#endif  // TANDEM_ESTIMATOR_INTERNAL_COLLECTIVE_REPLICAS_H_

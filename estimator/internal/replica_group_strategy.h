// estimator/internal/replica_group_strategy.h
//
// ReplicaGroupStrategy: what the strategies whose training tasks form one all-reduce
// group share (collective_strategy.cc, hybrid_strategy.cc). Each replica joins this
// task's server's collective group and mirrors variables that the group keeps equal:
// after each session creation the group forms and every replica takes the variables of
// the one with the newest global step (collective_replicas.h), and ReplicaCheckHook
// compares them every check_replicas_steps. A lost replica is waited for; a signal to
// any replica stops every replica after the same step, and the run then ends ABORTED
// on the replicas that did not get it.
//
// Thread safety: as TrainingStrategy.
#ifndef TANDEM_ESTIMATOR_INTERNAL_REPLICA_GROUP_STRATEGY_H_
#define TANDEM_ESTIMATOR_INTERNAL_REPLICA_GROUP_STRATEGY_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "estimator/internal/collective_replicas.h"
#include "estimator/internal/training_strategy.h"
#include "framework/ops/collective_ops.h"

namespace tandem::internal {

class ReplicaGroupStrategy : public TrainingStrategy {
 public:
  explicit ReplicaGroupStrategy(StrategyEnv env);

  // The group's hooks and settings (ReplicaCheckHook, the group formed and the newest
  // replica's variables broadcast after each session creation, variables kept when
  // ready); a subclass adds its session options.
  void Configure(MonitoredTrainingSessionOptions& mts) const override;
  bool RecoversLostTasks() const override { return true; }
  // Every replica goes on until all have seen the signal (ReplicaCheckHook), so that
  // they all stop after the same step.
  bool StopsAtSignal() const override { return false; }
  // ABORTED when the group agreed to stop because another replica was signalled.
  absl::Status AfterClose(int64_t global_step) const override;

 protected:
  // The all-reduce of the gradients, in buckets of the settings' bytes_per_pack.
  ops::CollectiveAllReduceOptions AllReduceOptions() const;
  // Joins this task's server's collective group and mirrors the variables of the TRAIN
  // graph built under `scope`, with `global_step` (its tables too unless
  // `skip_tables`); returns the server.
  absl::StatusOr<Server*> JoinGroup(const Scope& scope, const ops::Variable& global_step,
                                    bool skip_tables);

  const CollectiveSettings settings_;
  CollectiveExecutor* group_ = nullptr;  // This task's server's; set by JoinGroup.
  ReplicaVariables replica_vars_;
};

}  // namespace tandem::internal

#endif  // TANDEM_ESTIMATOR_INTERNAL_REPLICA_GROUP_STRATEGY_H_

// estimator/internal/replica_group_strategy.cc
#include "estimator/internal/replica_group_strategy.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/distributed/server.h"

namespace tandem::internal {

ReplicaGroupStrategy::ReplicaGroupStrategy(StrategyEnv env)
    : TrainingStrategy(std::move(env)),
      settings_(env_.options->collective.value_or(CollectiveSettings{})) {}

void ReplicaGroupStrategy::Configure(MonitoredTrainingSessionOptions& mts) const {
  mts.hooks.push_back(
      std::make_shared<ReplicaCheckHook>(group_, replica_vars_, settings_.check_replicas_steps));
  mts.keep_ready_variables = true;
  mts.after_restore = FormGroupAndBroadcast(group_, replica_vars_, kWaitForClusterMs);
}

absl::Status ReplicaGroupStrategy::AfterClose(int64_t global_step) const {
  if (!group_->StopAgreed()) return absl::OkStatus();
  return absl::AbortedError(absl::StrCat("training stopped at global step ", global_step,
                                         ": another replica was asked to stop (SIGTERM or "
                                         "SIGINT)",
                                         config().is_chief() ? "; checkpoint saved" : ""));
}

ops::CollectiveAllReduceOptions ReplicaGroupStrategy::AllReduceOptions() const {
  ops::CollectiveAllReduceOptions co;
  co.bytes_per_pack = settings_.bytes_per_pack;
  co.first_bucket_bytes = std::min<int64_t>(co.first_bucket_bytes, co.bytes_per_pack);
  return co;
}

absl::StatusOr<Server*> ReplicaGroupStrategy::JoinGroup(const Scope& scope,
                                                        const ops::Variable& global_step,
                                                        bool skip_tables) {
  TANDEM_ASSIGN_OR_RETURN(Server * server, env_.server());
  group_ = server->collective();
  TANDEM_RETURN_IF_ERROR(ConfigureCollectiveGroup(config(), settings_.timeout_secs, group_));
  TANDEM_ASSIGN_OR_RETURN(replica_vars_, AddReplicaVariables(scope, global_step, skip_tables));
  return server;
}

}  // namespace tandem::internal

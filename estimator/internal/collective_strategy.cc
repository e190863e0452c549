// estimator/internal/collective_strategy.cc
//
// The collective strategy (MultiWorkerMirroredStrategy): every training task builds
// the whole graph on its own device, and its optimizers average the gradients by
// all-reduce before the same update runs everywhere. Each task restores or initialises
// its own copy; the replicas then form their group and take the variables of the one
// with the newest global step (collective_replicas.h), again after a failed step. A
// signal to any replica stops every replica after the same step (ReplicaCheckHook),
// and the run then ends ABORTED on the replicas that did not get it. The parts the hybrid
// strategy shares are here too (JoinReplicaGroup, StoppedByAnotherReplica).
#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "estimator/internal/collective_replicas.h"
#include "estimator/internal/training_strategy.h"
#include "framework/core/status.h"
#include "framework/distributed/server.h"
#include "framework/ops/collective_ops.h"
#include "framework/ops/state_ops.h"
#include "glog/logging.h"

namespace tandem::internal {
namespace {

class CollectiveStrategy : public TrainingStrategy {
 public:
  explicit CollectiveStrategy(StrategyEnv env)
      : TrainingStrategy(std::move(env)),
        settings_(env_.options->collective.value_or(CollectiveSettings{})) {}
  Strategy kind() const override { return Strategy::kCollective; }

  void EnableUpdates(const Scope& root) const override {
    ops::CollectiveAllReduceOptions co;
    co.bytes_per_pack = settings_.bytes_per_pack;
    co.first_bucket_bytes = std::min<int64_t>(co.first_bucket_bytes, co.bytes_per_pack);
    ops::EnableCollectiveAllReduce(root, co);
  }

  absl::Status SetUp(ModeGraph& g, SessionFactory* factory) override {
    TANDEM_ASSIGN_OR_RETURN(Server * server, env_.server());
    group_ = server->collective();
    TANDEM_RETURN_IF_ERROR(ConfigureCollectiveGroup(config(), settings_.timeout_secs, group_));
    TANDEM_ASSIGN_OR_RETURN(replica_vars_,
                            AddReplicaVariables(g.root, g.global_step, /*skip_tables=*/false));
    if (!*factory) *factory = CollectiveSessionFactory(group_);
    LOG(INFO) << "Training as collective replica " << group_->rank() << " of " << group_->size()
              << " (" << server->task_name() << "); global batch = " << group_->size()
              << " x the per-replica batch; " << env_.input_pipeline;
    return absl::OkStatus();
  }

  void Configure(MonitoredTrainingSessionOptions& mts) const override {
    JoinReplicaGroup(mts, group_, replica_vars_, settings_.check_replicas_steps);
    mts.session_options = SessionOptionsFor(config(), /*cluster_master=*/false);
    mts.initialize_locally = true;
    mts.persistent_session = true;
  }

  bool RecoversLostTasks() const override { return true; }
  // Every replica goes on until all have seen the signal (ReplicaCheckHook), so that
  // they all stop after the same step.
  bool StopsAtSignal() const override { return false; }

  absl::Status AfterClose(int64_t global_step) const override {
    return StoppedByAnotherReplica(group_, global_step, config().is_chief());
  }

 private:
  const CollectiveSettings settings_;
  CollectiveExecutor* group_ = nullptr;
  ReplicaVariables replica_vars_;
};

}  // namespace

void JoinReplicaGroup(MonitoredTrainingSessionOptions& mts, CollectiveExecutor* group,
                      const ReplicaVariables& vars, int64_t check_steps) {
  mts.hooks.push_back(std::make_shared<ReplicaCheckHook>(group, vars, check_steps));
  mts.keep_ready_variables = true;
  mts.after_restore = FormGroupAndBroadcast(group, vars, kWaitForClusterMs);
}

absl::Status StoppedByAnotherReplica(CollectiveExecutor* group, int64_t global_step,
                                     bool is_chief) {
  if (!group->StopAgreed()) return absl::OkStatus();
  return absl::AbortedError(absl::StrCat("training stopped at global step ", global_step,
                                         ": another replica was asked to stop (SIGTERM or "
                                         "SIGINT)",
                                         is_chief ? "; checkpoint saved" : ""));
}

std::unique_ptr<TrainingStrategy> NewCollectiveStrategy(StrategyEnv env) {
  return std::make_unique<CollectiveStrategy>(std::move(env));
}

}  // namespace tandem::internal

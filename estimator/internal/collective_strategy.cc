// estimator/internal/collective_strategy.cc
//
// The collective strategy (MultiWorkerMirroredStrategy): every training task builds
// the whole graph on its own device, and its optimizers average the gradients by
// all-reduce before the same update runs everywhere. Each task restores or initialises
// its own copy; the replicas then form their group and take the variables of the one
// with the newest global step (collective_replicas.h), again after a failed step. A
// signal to any replica stops every replica after the same step (ReplicaCheckHook),
// and the run then ends ABORTED on the replicas that did not get it
// (replica_group_strategy.h, which the hybrid strategy shares).
#include <memory>

#include "estimator/internal/collective_replicas.h"
#include "estimator/internal/replica_group_strategy.h"
#include "framework/core/status.h"
#include "framework/distributed/server.h"
#include "framework/ops/collective_ops.h"
#include "glog/logging.h"

namespace tandem::internal {
namespace {

class CollectiveStrategy : public ReplicaGroupStrategy {
 public:
  using ReplicaGroupStrategy::ReplicaGroupStrategy;
  Strategy kind() const override { return Strategy::kCollective; }

  void EnableUpdates(const Scope& root) const override {
    ops::EnableCollectiveAllReduce(root, AllReduceOptions());
  }

  absl::Status SetUp(ModeGraph& g, SessionFactory* factory) override {
    TANDEM_ASSIGN_OR_RETURN(Server * server,
                            JoinGroup(g.root, g.global_step, /*skip_tables=*/false));
    if (!*factory) *factory = CollectiveSessionFactory(group_);
    LOG(INFO) << "Training as collective replica " << group_->rank() << " of " << group_->size()
              << " (" << server->task_name() << "); global batch = " << group_->size()
              << " x the per-replica batch; " << env_.input_pipeline;
    return absl::OkStatus();
  }

  void Configure(MonitoredTrainingSessionOptions& mts) const override {
    ReplicaGroupStrategy::Configure(mts);
    mts.session_options = SessionOptionsFor(config(), /*cluster_master=*/false);
    mts.initialize_locally = true;
    mts.persistent_session = true;
  }
};

}  // namespace

std::unique_ptr<TrainingStrategy> NewCollectiveStrategy(StrategyEnv env) {
  return std::make_unique<CollectiveStrategy>(std::move(env));
}

}  // namespace tandem::internal

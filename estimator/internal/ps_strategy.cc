// estimator/internal/ps_strategy.cc
//
// The parameter-server strategy (TensorFlow 1.x's between-graph replication): the
// graph is built under the replica device setter (variables, global_step and slots on
// the ps tasks, round-robin; the rest on this task) and run through a GrpcSession to
// this task's server. Creating the session waits for the ps tasks in slices, between
// which it looks whether training ended elsewhere; while training, the tasks this one
// waits on are watched and named when silent. With synchronous replicas the optimizers
// aggregate through the ps and the SyncReplicasHook runs the chief's updates.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "estimator/internal/training_strategy.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/distributed/cluster_control.h"
#include "framework/distributed/new_session.h"
#include "framework/distributed/peer_watch.h"
#include "framework/distributed/replica_device_setter.h"
#include "framework/distributed/server.h"
#include "framework/ops/sync_replicas.h"
#include "glog/logging.h"
#include "hooks/sync_replicas_hook.h"

namespace tandem::internal {
namespace {

// Creating a session waits for the cluster in slices this long.
constexpr int64_t kWaitSliceMs = 30000;

}  // namespace

SessionFactory WaitingInSlices(SessionFactory base, std::function<bool()> over) {
  return [base = std::move(base), over = std::move(over)](const proto::GraphDef& def,
                                                          const SessionOptions& so) {
    SessionOptions slice = so;
    slice.wait_for_workers_ms = std::min<int64_t>(kWaitSliceMs, so.wait_for_workers_ms);
    const int64_t deadline = env::NowMicros() / 1000 + so.wait_for_workers_ms;
    while (true) {
      absl::StatusOr<std::unique_ptr<Session>> s = base(def, slice);
      if (s.ok() || !IsLostTaskError(s.status()) || env::NowMicros() / 1000 >= deadline) return s;
      if (over()) {
        return absl::StatusOr<std::unique_ptr<Session>>(absl::UnavailableError(
            absl::StrCat("training ended elsewhere while this task waited for the cluster: ",
                         s.status().message())));
      }
    }
  };
}

std::unique_ptr<PeerWatch> WatchPeers(const RunConfig& config, const TransportSecurity& security) {
  const ClusterSpec& cluster = config.cluster_spec();
  const TaskId self = config.task();
  std::vector<WatchedTask> tasks = TasksOf(cluster, {kJobPs}, &self);
  for (WatchedTask& t : config.is_chief() ? TasksOf(cluster, {kJobWorker}, &self)
                                          : TasksOf(cluster, {kJobChief, kJobMaster}, &self)) {
    tasks.push_back(std::move(t));
  }
  PeerWatchOptions options;
  options.waiter = absl::StrCat(self.job, ":", self.index);
  return std::make_unique<PeerWatch>(std::move(tasks), security, options);
}

SessionFactory ClusterSessionFactory(const StrategyEnv& env, SessionFactory factory) {
  if (!factory) {
    factory = [security = env.options->security](const proto::GraphDef& def,
                                                 const SessionOptions& so) {
      return NewSession(def, so, security);
    };
  }
  if (env.finished_elsewhere) factory = WaitingInSlices(std::move(factory), env.finished_elsewhere);
  return factory;
}

namespace {

// The sync replicas hook of this task: the chief's runner sessions come from
// `factory`; missing replicas are the chief and worker tasks that do not answer.
SyncReplicasHookOptions SyncReplicasOptionsFor(const RunConfig& config,
                                               const SyncReplicasSettings& sync,
                                               const SessionFactory& factory,
                                               const TransportSecurity& security) {
  SyncReplicasHookOptions o;
  o.is_chief = config.is_chief();
  o.replica_id = config.replica_index().value_or(0);
  o.total_num_replicas = config.num_worker_replicas();
  o.replicas_to_aggregate =
      sync.replicas_to_aggregate > 0 ? sync.replicas_to_aggregate : o.total_num_replicas;
  o.on_missing = sync.continue_when_missing ? SyncReplicasHookOptions::OnMissing::kContinue
                                            : SyncReplicasHookOptions::OnMissing::kWait;
  o.patience_secs = sync.patience_secs;
  o.factory = factory;
  o.session_options = SessionOptionsFor(config, /*cluster_master=*/true);
  o.summary_dir = config.model_dir();
  const TaskId self = config.task();
  o.missing_replicas =
      [replicas = TasksOf(config.cluster_spec(), {kJobChief, kJobMaster, kJobWorker}, &self),
       security] {
        std::vector<std::string> missing;
        for (const WatchedTask& t : replicas) {
          if (!ProbeTask(t.address, security, /*timeout_ms=*/2000).ok()) {
            missing.push_back(t.Describe());
          }
        }
        return missing;
      };
  return o;
}

class ParameterServerStrategy : public TrainingStrategy {
 public:
  using TrainingStrategy::TrainingStrategy;
  Strategy kind() const override { return Strategy::kParameterServer; }

  absl::StatusOr<Scope> Place(const Scope& root) const override {
    ReplicaDeviceSetterOptions rds;
    rds.cluster = config().cluster_spec();
    rds.worker_device = config().task_device_name();
    Scope placed = WithReplicaDeviceSetter(root, rds);
    TANDEM_RETURN_IF_ERROR(AnnotateStatus(placed.status(), "replica device setter"));
    return placed;
  }

  void EnableUpdates(const Scope& root) const override {
    if (env_.options->sync_replicas) ops::EnableSyncReplicas(root);
  }

  absl::Status SetUp(ModeGraph& g, SessionFactory* factory) override {
    TANDEM_ASSIGN_OR_RETURN(Server * server, env_.server());
    *factory = ClusterSessionFactory(env_, std::move(*factory));
    factory_ = *factory;
    watch_ = WatchPeers(config(), env_.options->security);
    LOG(INFO) << "Training as " << server->task_name() << " on a cluster of "
              << config().cluster_spec().TotalTasks() << " tasks; " << env_.input_pipeline;
    return absl::OkStatus();
  }

  void Configure(MonitoredTrainingSessionOptions& mts) const override {
    if (env_.options->sync_replicas) {
      mts.hooks.push_back(std::make_shared<SyncReplicasHook>(SyncReplicasOptionsFor(
          config(), *env_.options->sync_replicas, factory_, env_.options->security)));
    }
    mts.session_options = SessionOptionsFor(config(), /*cluster_master=*/true);
    mts.keep_ready_variables = true;
  }

  bool RecoversLostTasks() const override { return true; }

 private:
  SessionFactory factory_;
  std::unique_ptr<PeerWatch> watch_;  // Names silent tasks while training.
};

}  // namespace

std::unique_ptr<TrainingStrategy> NewParameterServerStrategy(StrategyEnv env) {
  return std::make_unique<ParameterServerStrategy>(std::move(env));
}

}  // namespace tandem::internal

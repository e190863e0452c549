// estimator/internal/hybrid_strategy.cc
//
// The hybrid strategy: the model's tables (ops::VariableOptions::table: feature
// columns' embedding and linear weights, or any variable a model marks) live on the ps
// tasks, partitioned as the parameter-server strategy partitions them; every other
// variable, global_step included, is mirrored on each training task.
//
// One step of a training task is one step of a GrpcSession to its own task, whose
// partitions run on this task and the ps tasks: the lookups gather only this step's
// rows on the ps, the dense gradients are averaged by all-reduce among the training
// tasks (in buckets that start while the backward pass runs, CollectiveExecutor of
// this task's server), and, once every collective of the step succeeded, the dense
// updates run here and each table's rows are applied where that table lives, as this
// task computed them (asynchronously with respect to the other tasks' rows). With
// sync = true the tables' rows are all-gathered and averaged like the dense gradients,
// replica 0 applies them, and every replica's step ends after that update
// (ops::CollectiveTables::kAppliedOnce): the step is one process's step on the global
// batch. global_step counts the synchronous dense steps.
//
// Creating the session: the chief restores the newest checkpoint or initialises every
// variable (tables on the ps, its own mirrored copies) unless every variable is
// already initialised; another task initialises only its own mirrored copies that are
// not, and waits for the tables. Then the group forms and every replica takes the
// mirrored variables of the one with the newest global step (collective_replicas.h),
// again after a failed step. A lost ps fails the step, and the chief restores the
// newest checkpoint; a lost training task fails the other replicas' step within
// collective_timeout_secs, and the group waits for it to come back. SIGTERM to any
// replica stops every replica after the same step; the chief's checkpoints hold the
// tables (written by the ps tasks) and one copy of the mirrored variables.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "estimator/internal/collective_replicas.h"
#include "estimator/internal/replica_group_strategy.h"
#include "estimator/job_config.h"
#include "framework/core/status.h"
#include "framework/distributed/peer_watch.h"
#include "framework/distributed/replica_device_setter.h"
#include "framework/distributed/server.h"
#include "framework/ops/collective_ops.h"
#include "framework/ops/state_ops.h"
#include "glog/logging.h"

namespace tandem::internal {
namespace {

// The tables of `graph` with their shapes and devices, for the log; `*slots` gets the
// number of table variables that follow a table (its optimizer slots).
std::vector<std::string> DescribeTables(Graph* graph, int* slots) {
  std::vector<std::string> tables;
  *slots = 0;
  absl::StatusOr<std::vector<ops::Variable>> vars =
      ops::VariablesInCollection(graph, ops::kGlobalVariables);
  if (!vars.ok()) return tables;
  for (const ops::Variable& v : *vars) {
    const Node& h = *v.handle().node;
    if (!ops::IsTableHandle(h)) continue;
    if (h.requested_device().empty()) {
      ++*slots;  // Colocated with its table: placed with it.
      continue;
    }
    tables.push_back(
        absl::StrCat(v.name(), " ", v.shape().DebugString(), " on ", h.requested_device()));
  }
  return tables;
}

class HybridStrategy : public ReplicaGroupStrategy {
 public:
  using ReplicaGroupStrategy::ReplicaGroupStrategy;
  Strategy kind() const override { return Strategy::kHybrid; }

  absl::StatusOr<Scope> Place(const Scope& root) const override {
    ReplicaDeviceSetterOptions rds;
    rds.cluster = config().cluster_spec();
    rds.worker_device = config().task_device_name();
    rds.is_ps_op = [](const NodeSpec& spec) {
      return spec.op == "VarHandleOp" && GetAttrOr<bool>(spec.attrs, ops::kTableAttr, false);
    };
    Scope placed = WithReplicaDeviceSetter(root, rds);
    TANDEM_RETURN_IF_ERROR(AnnotateStatus(placed.status(), "hybrid device setter"));
    return placed;
  }

  void EnableUpdates(const Scope& root) const override {
    ops::CollectiveAllReduceOptions co = AllReduceOptions();
    if (env_.options->sync_replicas) {
      // Synchronous tables: rows all-gathered, applied by replica 0.
      co.tables = ops::CollectiveTables::kAppliedOnce;
      co.applies_tables = config().replica_index().value_or(0) == 0;
    } else {
      co.tables = ops::CollectiveTables::kOwnRows;
    }
    ops::EnableCollectiveAllReduce(root, co);
  }

  absl::Status SetUp(ModeGraph& g, SessionFactory* factory) override {
    int slots = 0;
    const std::vector<std::string> tables = DescribeTables(g.root.graph(), &slots);
    if (tables.empty()) {
      return ConfigError(
          "[distribute] strategy = \"hybrid\" keeps the model's tables on the ps tasks, but "
          "this model has none (feature columns' embedding and categorical linear weights, or "
          "variables made with ops::VariableOptions::table); use strategy = \"collective\" "
          "without ps tasks, or \"parameter_server\"");
    }
    TANDEM_ASSIGN_OR_RETURN(Server * server,
                            JoinGroup(g.root.WithDevice(config().task_device_name()), g.global_step,
                                      /*skip_tables=*/true));
    *factory = ClusterSessionFactory(env_, std::move(*factory));
    watch_ = WatchPeers(config(), env_.options->security);
    LOG(INFO) << "Training as hybrid replica " << group_->rank() << " of " << group_->size() << " ("
              << server->task_name() << "): " << tables.size() << " table variable(s) and " << slots
              << " slot(s) of theirs on the ps tasks, " << replica_vars_.names.size()
              << " mirrored variable(s) all-reduced; global batch = " << group_->size()
              << " x the per-replica batch; " << env_.input_pipeline;
    for (const std::string& t : tables) LOG(INFO) << "Table " << t;
    return absl::OkStatus();
  }

  void Configure(MonitoredTrainingSessionOptions& mts) const override {
    ReplicaGroupStrategy::Configure(mts);
    mts.session_options = SessionOptionsFor(config(), /*cluster_master=*/true);
    mts.before_ready_wait = [vars = replica_vars_](Session* session) {
      return InitializeUninitialized(session, vars);
    };
  }

 private:
  std::unique_ptr<PeerWatch> watch_;  // Names silent tasks while training.
};

}  // namespace

std::unique_ptr<TrainingStrategy> NewHybridStrategy(StrategyEnv env) {
  return std::make_unique<HybridStrategy>(std::move(env));
}

}  // namespace tandem::internal

// estimator/internal/collective_replicas.cc
#include "estimator/internal/collective_replicas.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "framework/core/crc32c.h"
#include "framework/core/status.h"
#include "framework/core/termination.h"
#include "framework/ops/collective_ops.h"
#include "glog/logging.h"

namespace tandem::internal {

absl::StatusOr<ReplicaVariables> AddReplicaVariables(const Scope& root,
                                                     const ops::Variable& global_step,
                                                     bool skip_tables) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<ops::Variable> all,
                          ops::VariablesInCollection(root.graph(), ops::kGlobalVariables));
  std::vector<ops::Variable> vars;
  for (const ops::Variable& v : all) {
    if (!skip_tables || !ops::IsTableHandle(*v.handle().node)) vars.push_back(v);
  }
  if (vars.empty()) {
    return absl::InvalidArgumentError("collective replicas: the graph has no variable to mirror");
  }
  ReplicaVariables r;
  TANDEM_ASSIGN_OR_RETURN(Node * broadcast, ops::BroadcastVariables(root, vars));
  r.broadcast_op = broadcast->name();
  r.global_step = global_step.value().name();
  const Scope s = root.NewSubScope("replica_init");
  for (const ops::Variable& v : vars) {
    r.reads.push_back(v.value().name());
    r.names.push_back(v.name());
    r.initialized.push_back(
        ops::VarIsInitializedOp(
            s.WithOpName(v.name() + "/is_initialized").ColocateWith(v.handle().node), v.handle())
            .name());
    r.initializers.push_back(v.initializer()->name());
  }
  TANDEM_RETURN_IF_ERROR(s.status());
  r.fingerprint = ops::CollectiveFingerprint(*root.graph());
  return r;
}

absl::Status InitializeUninitialized(Session* session, const ReplicaVariables& vars) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<Tensor> ready, session->Run({}, vars.initialized));
  std::vector<std::string> targets;
  for (size_t i = 0; i < ready.size(); ++i) {
    if (!ready[i].scalar<bool>()) targets.push_back(vars.initializers[i]);
  }
  if (targets.empty()) return absl::OkStatus();
  LOG(INFO) << "Initialising " << targets.size() << " of this replica's " << vars.names.size()
            << " mirrored variables";
  return AnnotateStatus(session->Run({}, {}, targets).status(),
                        "initialising this replica's mirrored variables");
}

std::vector<std::string> CollectiveMembers(const RunConfig& config) {
  const ClusterSpec& cluster = config.cluster_spec();
  std::vector<std::string> members;
  for (absl::string_view job : {kJobChief, kJobMaster, kJobWorker}) {
    for (int index : cluster.TaskIndices(job)) {
      members.push_back(ClusterSpec::TaskDeviceName(job, index));
    }
  }
  return members;
}

absl::Status ConfigureCollectiveGroup(const RunConfig& config, int64_t timeout_secs,
                                      CollectiveExecutor* executor) {
  CollectiveGroup group;
  group.members = CollectiveMembers(config);
  group.rank = config.replica_index().value_or(-1);
  CollectiveOptions options;
  options.timeout_ms = timeout_secs * 1000;
  options.probe_after_ms = std::min<int64_t>(options.probe_after_ms, options.timeout_ms / 2);
  return executor->Configure(std::move(group), options);
}

SessionFactory CollectiveSessionFactory(CollectiveExecutor* executor) {
  return [executor](const proto::GraphDef& def,
                    const SessionOptions& options) -> absl::StatusOr<std::unique_ptr<Session>> {
    SessionOptions so = options;
    so.collective = executor;
    return NewDirectSession(def, so);
  };
}

absl::Status CheckReplicasAgree(Session* session, CollectiveExecutor* executor,
                                const ReplicaVariables& vars, int64_t step) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<Tensor> values, session->Run({}, vars.reads));
  uint32_t sum[2] = {0, 0};
  for (const Tensor& v : values) sum[0] = crc32c::Extend(sum[0], v.raw_data(), v.TotalBytes());
  sum[1] = static_cast<uint32_t>(values.size());
  Tensor mine(DType::kUInt8, TensorShape({8}));
  std::memcpy(mine.raw_data(), sum, sizeof(sum));
  absl::Notification done;
  absl::StatusOr<std::vector<Tensor>> all;
  executor->AllGather(ops::kChecksumInstanceKey, mine,
                      [&](absl::StatusOr<std::vector<Tensor>> got) {
                        all = std::move(got);
                        done.Notify();
                      });
  done.WaitForNotification();
  TANDEM_RETURN_IF_ERROR(all.status());
  std::vector<std::string> differ;
  for (size_t r = 1; r < all->size(); ++r) {
    if (std::memcmp((*all)[r].raw_data(), (*all)[0].raw_data(), sizeof(sum)) != 0) {
      differ.push_back(executor->MemberName(static_cast<int>(r)));
    }
  }
  if (!differ.empty()) {
    return absl::InternalError(absl::StrCat("collective replicas diverged at global step ", step,
                                            ": the variables of ", absl::StrJoin(differ, ", "),
                                            " differ from those of ", executor->MemberName(0),
                                            " (checksums of ", vars.reads.size(), " variables)"));
  }
  return absl::OkStatus();
}

std::function<absl::Status(Session*)> FormGroupAndBroadcast(CollectiveExecutor* executor,
                                                            ReplicaVariables vars,
                                                            int64_t wait_ms) {
  return [executor, vars = std::move(vars), wait_ms](Session* session) -> absl::Status {
    TANDEM_ASSIGN_OR_RETURN(std::vector<Tensor> step, session->Run({}, {vars.global_step}));
    const int64_t mine = step[0].scalar<int64_t>();
    TANDEM_ASSIGN_OR_RETURN(CollectiveExecutor::Formation f,
                            executor->Join(mine, vars.fingerprint, wait_ms));
    TANDEM_RETURN_IF_ERROR(session->Run({}, {}, {vars.broadcast_op}).status());
    const int64_t agreed = f.global_steps[f.source];
    TANDEM_RETURN_IF_ERROR(CheckReplicasAgree(session, executor, vars, agreed));
    LOG(INFO) << "Collective group formed: replica " << executor->rank() << " of "
              << executor->size() << "; variables from " << executor->MemberName(f.source)
              << " at global step " << agreed
              << (mine != agreed ? absl::StrCat(" (this replica was at ", mine, ")") : "");
    return absl::OkStatus();
  };
}

ReplicaCheckHook::ReplicaCheckHook(CollectiveExecutor* executor, ReplicaVariables vars,
                                   int64_t every_steps)
    : executor_(executor), vars_(std::move(vars)), every_steps_(every_steps) {}

absl::StatusOr<SessionRunArgs> ReplicaCheckHook::BeforeRun(SessionRunContext& context) {
  if (termination::Requested()) executor_->RequestStop();
  SessionRunArgs args;
  args.fetches = {vars_.global_step};
  return args;
}

absl::Status ReplicaCheckHook::AfterRun(SessionRunContext& context,
                                        const SessionRunValues& values) {
  // The read is taken before this step's increment.
  const int64_t step = values.results[0].scalar<int64_t>() + 1;
  if (every_steps_ > 0 && step % every_steps_ == 0) {
    TANDEM_RETURN_IF_ERROR(CheckReplicasAgree(context.session(), executor_, vars_, step));
  }
  if (executor_->StopAgreed()) {
    LOG(WARNING) << "A replica was asked to stop: every replica stops after global step " << step
                 << ".";
    context.RequestStop();
  }
  return absl::OkStatus();
}

}  // namespace tandem::internal

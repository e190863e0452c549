#include "framework/runtime/direct_session.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/runtime/prepare_graph.h"
#include "framework/runtime/runtime_kernels.h"
#include "framework/runtime/subgraph.h"

namespace tandem {
DirectSession::DirectSession(const SessionOptions& options)
    : options_(options), prepared_(options.precision) {}
DirectSession::~DirectSession() = default;

absl::StatusOr<std::unique_ptr<DirectSession>> DirectSession::Create(
    const proto::GraphDef& graph, const SessionOptions& options) {
  EnsureKernels();
  std::unique_ptr<DirectSession> s(new DirectSession(options));
  s->devices_ = DeviceMgr::CreateLocal("localhost", 0, 0);
  int inter = ThreadPool::DefaultSize(options.inter_op_threads);
  int intra = ThreadPool::DefaultSize(options.intra_op_threads);
  s->inter_op_pool_ = std::make_unique<ThreadPool>("inter_op", inter);
  s->intra_op_pool_ = std::make_unique<ThreadPool>("intra_op", std::max(1, intra - 1));
  s->intra_op_threads_ = intra;
  absl::MutexLock lock(&s->mu_);
  s->graph_ = std::make_unique<Graph>(OpRegistry::Global());
  TANDEM_RETURN_IF_ERROR(s->ExtendLocked(graph));
  return s;
}

absl::Status DirectSession::PlaceNodes() {
  for (const auto& node : graph_->nodes()) {
    if (!node->assigned_device().empty()) continue;
    TANDEM_ASSIGN_OR_RETURN(DeviceSpec want, DeviceSpec::Parse(node->requested_device()));
    // A local session ignores job/replica/task: everything is this process.
    want.job.reset();
    want.replica.reset();
    want.task.reset();
    Device* d = devices_->FindMatching(want);
    if (d == nullptr) {
      if (!options_.allow_soft_placement) {
        return absl::InvalidArgumentError(
            absl::StrCat("cannot assign a device for node '", node->name(), "': requested ",
                         node->requested_device(), ", which this process does not have"));
      }
      d = devices_->default_device();
    }
    node->set_assigned_device(d->name());
  }
  return absl::OkStatus();
}

absl::Status DirectSession::Extend(const proto::GraphDef& graph) {
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::FailedPreconditionError("session is closed");
  return ExtendLocked(graph);
}

absl::Status DirectSession::ExtendLocked(const proto::GraphDef& graph) {
  TANDEM_ASSIGN_OR_RETURN(proto::GraphDef def, prepared_.Prepare(graph));
  TANDEM_RETURN_IF_ERROR(graph_->AddGraphDef(def));
  prepared_.Commit(graph, def);
  return PlaceNodes();
}

absl::StatusOr<std::shared_ptr<const DirectSession::Executable>> DirectSession::GetExecutable(
    std::vector<std::string> feeds, absl::Span<const std::string> fetches,
    absl::Span<const std::string> targets) {
  std::vector<std::string> sorted_targets(targets.begin(), targets.end());
  std::string key = RunSignature(feeds, fetches, sorted_targets);
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::FailedPreconditionError("session is closed");
  auto it = executables_.find(key);
  if (it != executables_.end()) return it->second;
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Graph> sub,
                          BuildExecutableGraph(*graph_, feeds, fetches, sorted_targets));
  for (const auto& node : sub->nodes()) {
    if (node->assigned_device().empty()) {
      node->set_assigned_device(devices_->default_device()->name());
    }
  }
  auto exec = std::make_shared<Executable>();
  for (const std::string& f : feeds) {
    TANDEM_ASSIGN_OR_RETURN(Output o, graph_->FindOutput(f));
    exec->feed_endpoints.push_back(o);
  }
  exec->feeds = feeds;
  TANDEM_ASSIGN_OR_RETURN(exec->executor,
                          Executor::Create(std::move(sub), devices_->default_device(),
                                           KernelRegistry::Global(), &stateful_kernels_));
  executables_[key] = exec;
  return std::shared_ptr<const Executable>(exec);
}

absl::StatusOr<std::vector<Tensor>> DirectSession::Run(const FeedMap& feeds,
                                                       absl::Span<const std::string> fetches,
                                                       absl::Span<const std::string> targets,
                                                       const RunOptions& options,
                                                       RunMetadata* metadata) {
  std::vector<std::string> names;
  for (const auto& [name, value] : feeds) names.push_back(name);
  TANDEM_ASSIGN_OR_RETURN(auto exec, GetExecutable(names, fetches, targets));
  // Arrange fed values in the executable's (sorted) order and check them.
  std::vector<Tensor> args(exec->feeds.size());
  for (const auto& [name, value] : feeds) {
    size_t i = std::lower_bound(exec->feeds.begin(), exec->feeds.end(), name) - exec->feeds.begin();
    const Output& endpoint = exec->feed_endpoints[i];
    if (value.dtype() != endpoint.dtype()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot feed a ", DTypeName(value.dtype()), " value to tensor '", name,
                       "', which has dtype ", DTypeName(endpoint.dtype())));
    }
    if (!endpoint.shape().IsCompatibleWith(PartialShape(value.shape()))) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot feed a value of shape ", value.shape().DebugString(), " to tensor '",
                       name, "', which has shape ", endpoint.shape().DebugString()));
    }
    args[i] = value;
  }
  std::vector<Tensor> rets;
  ExecutorArgs ea;
  ea.step_id = next_step_id_.fetch_add(1);
  ea.args = &args;
  ea.retvals = &rets;
  ea.inter_op_pool = inter_op_pool_.get();
  ea.intra_op_pool = intra_op_pool_.get();
  ea.intra_op_threads = intra_op_threads_;
  ea.collective = options_.collective;
  if (options.trace && metadata != nullptr) ea.stats = &metadata->step_stats;
  if (options.timeout_ms > 0) ea.deadline_micros = env::NowMicros() + options.timeout_ms * 1000;
  TANDEM_RETURN_IF_ERROR(exec->executor->Run(ea));
  return rets;
}

absl::Status DirectSession::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  executables_.clear();
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Session>> NewDirectSession(const proto::GraphDef& graph,
                                                          const SessionOptions& options) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<DirectSession> s, DirectSession::Create(graph, options));
  return std::unique_ptr<Session>(std::move(s));
}

}  // namespace tandem

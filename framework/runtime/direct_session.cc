#include "framework/runtime/direct_session.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/runtime/partitioner.h"
#include "framework/runtime/placer.h"
#include "framework/runtime/prepare_graph.h"
#include "framework/runtime/rendezvous.h"
#include "framework/runtime/runtime_kernels.h"
#include "framework/runtime/subgraph.h"

namespace tandem {
// Variables live on the GPU where there is one, and _ReadVariableAsBfloat16 has no GPU
// kernel: only a CPU-only session reads them as their bfloat16 copies.
DirectSession::DirectSession(const SessionOptions& options, std::unique_ptr<DeviceMgr> devices)
    : options_(options),
      devices_(std::move(devices)),
      prepared_(options.precision, devices_->num_gpus() == 0) {}
DirectSession::~DirectSession() = default;

absl::StatusOr<std::unique_ptr<DirectSession>> DirectSession::Create(
    const proto::GraphDef& graph, const SessionOptions& options) {
  EnsureKernels();
  LocalDeviceOptions local;
  local.num_gpus = options.num_gpus;
  local.gpu_memory_fraction = options.gpu_memory_fraction;
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<DeviceMgr> devices,
                          DeviceMgr::CreateLocal("localhost", 0, 0, local));
  std::unique_ptr<DirectSession> s(new DirectSession(options, std::move(devices)));
  // inter_op_threads 0 picks one: the caller runs the ops one at a time, each with all
  // intra-op threads inside it. oneDNN runs each op on an OpenMP team of its own, so two
  // ops at once bring two teams and oversubscribe the cores (fashion_mlp's step at 2
  // threads on a 2-vCPU EPYC: 33-42k examples/s with a pool thread beside the caller,
  // 64-85k without).
  int inter = options.inter_op_threads > 0 ? options.inter_op_threads : 1;
  int intra = ThreadPool::DefaultSize(options.intra_op_threads);
  // The caller runs ops too: inter - 1 pool threads. With one inter-op thread the
  // caller runs every op of the step, one at a time, unless a collective's or another
  // device's callbacks must hand successors to a thread of the session's own.
  const bool caller_only =
      inter == 1 && options.collective == nullptr && s->devices_->num_gpus() == 0;
  if (!caller_only) {
    s->inter_op_pool_ = std::make_unique<ThreadPool>("inter_op", std::max(1, inter - 1));
  }
  // The caller computes too: intra - 1 pool threads, and none for one thread.
  if (intra > 1) s->intra_op_pool_ = std::make_unique<ThreadPool>("intra_op", intra - 1);
  s->intra_op_threads_ = intra;
  absl::MutexLock lock(&s->mu_);
  s->graph_ = std::make_unique<Graph>(OpRegistry::Global());
  TANDEM_RETURN_IF_ERROR(s->ExtendLocked(graph));
  return s;
}

absl::Status DirectSession::PlaceNodes() {
  if (devices_->num_gpus() > 0) {
    std::vector<std::string> names;
    for (const auto& d : devices_->devices()) names.push_back(d->name());
    PlacerOptions placer;
    placer.default_device = "/job:localhost/replica:0/task:0";
    placer.allow_soft_placement = options_.allow_soft_placement;
    return PlaceGraph(graph_.get(), names, placer);
  }
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
    exec->feeds.push_back({f, o.dtype(), o.shape()});
  }
  TANDEM_RETURN_IF_ERROR(CreateExecutors(std::move(sub), exec.get()));
  executables_[key] = exec;
  return std::shared_ptr<const Executable>(exec);
}

absl::Status DirectSession::CreateExecutors(std::unique_ptr<Graph> sub, Executable* exec) {
  bool one_device = true;
  for (const auto& node : sub->nodes()) {
    one_device &= node->assigned_device() == devices_->default_device()->name();
  }
  if (one_device) {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Executor> e,
                            Executor::Create(std::move(sub), devices_->default_device(),
                                             KernelRegistry::Global(), &stateful_kernels_));
    exec->executors.push_back(std::move(e));
    return absl::OkStatus();
  }
  PartitionOptions cut;
  for (const auto& d : devices_->devices()) cut.incarnations[d->name()] = d->incarnation();
  TANDEM_ASSIGN_OR_RETURN(auto parts, PartitionGraph(*sub, cut));
  // The CPU's partition first: it holds the _Arg and _Retval nodes.
  std::vector<std::string> order;
  for (const auto& [device, def] : parts) {
    if (device == devices_->default_device()->name())
      order.insert(order.begin(), device);
    else
      order.push_back(device);
  }
  if (order.front() != devices_->default_device()->name()) order.insert(order.begin(), "");
  for (const std::string& name : order) {
    Device* device = devices_->default_device();
    auto graph = std::make_unique<Graph>(OpRegistry::Global());
    if (!name.empty()) {
      TANDEM_ASSIGN_OR_RETURN(device, devices_->Lookup(name));
      TANDEM_RETURN_IF_ERROR(graph->AddGraphDef(parts.at(name)));
    }
    for (const auto& node : graph->nodes()) node->set_assigned_device(device->name());
    TANDEM_ASSIGN_OR_RETURN(
        std::unique_ptr<Executor> e,
        Executor::Create(std::move(graph), device, KernelRegistry::Global(), &stateful_kernels_));
    exec->executors.push_back(std::move(e));
  }
  return absl::OkStatus();
}

absl::Status DirectSession::RunPartitions(const Executable& exec, const ExecutorArgs& args) {
  LocalRendezvous rendezvous;
  absl::Mutex mu;
  int pending = static_cast<int>(exec.executors.size());
  absl::Status status;
  std::vector<std::vector<Tensor>> unused(exec.executors.size());  // Partitions > 0 have none.
  const std::vector<Tensor> no_args;
  std::vector<StepStats> stats(exec.executors.size());  // Merged at the end.
  for (size_t i = 0; i < exec.executors.size(); ++i) {
    ExecutorArgs a = args;
    a.rendezvous = &rendezvous;
    if (args.stats != nullptr) a.stats = &stats[i];
    if (i > 0) {
      a.args = &no_args;
      a.retvals = &unused[i];
    }
    exec.executors[i]->RunAsync(a, [&](const absl::Status& s) {
      if (!s.ok()) rendezvous.StartAbort(s);  // Wakes the other partitions' _Recv.
      absl::MutexLock lock(&mu);
      if (!s.ok() && status.ok()) status = s;
      --pending;
    });
  }
  absl::MutexLock lock(&mu);
  mu.Await(absl::Condition(
      +[](int* n) { return *n == 0; }, &pending));
  if (args.stats != nullptr) {
    for (StepStats& s : stats) {
      for (NodeExecStats& n : s.nodes) args.stats->nodes.push_back(std::move(n));
    }
  }
  return status;
}

absl::StatusOr<std::vector<Tensor>> DirectSession::Run(const FeedMap& feeds,
                                                       absl::Span<const std::string> fetches,
                                                       absl::Span<const std::string> targets,
                                                       const RunOptions& options,
                                                       RunMetadata* metadata) {
  std::vector<std::string> names;
  for (const auto& [name, value] : feeds) names.push_back(name);
  TANDEM_ASSIGN_OR_RETURN(auto exec, GetExecutable(names, fetches, targets));
  // Fed values in the executable's (sorted) order, checked against the graph.
  TANDEM_ASSIGN_OR_RETURN(std::vector<Tensor> args, ArrangeFeeds(exec->feeds, feeds));
  std::vector<Tensor> rets;
  ExecutorArgs ea;
  ea.step_id = next_step_id_.fetch_add(1);
  ea.args = &args;
  ea.retvals = &rets;
  ea.inter_op_pool = inter_op_pool_.get();
  ea.intra_op_pool = intra_op_pool_.get();
  // Without an inter-op pool the caller runs every op of the step, one at a time.
  ea.ops_one_at_a_time = inter_op_pool_ == nullptr;
  ea.intra_op_threads = intra_op_threads_;
  ea.collective = options_.collective;
  if (options.trace && metadata != nullptr) ea.stats = &metadata->step_stats;
  if (options.timeout_ms > 0) ea.deadline_micros = env::NowMicros() + options.timeout_ms * 1000;
  if (exec->executors.size() == 1) {
    TANDEM_RETURN_IF_ERROR(exec->executors[0]->Run(ea));
  } else {
    TANDEM_RETURN_IF_ERROR(RunPartitions(*exec, ea));
  }
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

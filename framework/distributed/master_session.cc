#include "framework/distributed/master_session.h"

#include <algorithm>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "framework/core/env.h"
#include "framework/core/random.h"
#include "framework/core/status.h"
#include "framework/distributed/cluster_spec.h"
#include "framework/distributed/rpc_policy.h"
#include "framework/graph/op_registry.h"
#include "framework/runtime/partitioner.h"
#include "framework/runtime/placer.h"
#include "framework/runtime/subgraph.h"
#include "glog/logging.h"

namespace tandem {
namespace {

bool TaskMatchesFilters(const std::string& task, const std::vector<std::string>& filters) {
  if (filters.empty()) return true;
  auto task_spec = DeviceSpec::Parse(task);
  if (!task_spec.ok()) return false;
  for (const std::string& f : filters) {
    auto spec = DeviceSpec::Parse(f);
    if (spec.ok() && spec->IsCompatibleWith(*task_spec)) return true;
  }
  return false;
}

// Calls `fn(i)` for i in [0, n) concurrently and waits for all of them; `fn` calls its
// callback exactly once.
void ParallelCalls(int n, const std::function<void(int, StatusCallback)>& fn,
                   std::vector<absl::Status>* results) {
  results->assign(n, absl::OkStatus());
  absl::Mutex mu;
  int pending = n;
  for (int i = 0; i < n; ++i) {
    fn(i, [&, i](const absl::Status& s) {
      absl::MutexLock lock(&mu);
      (*results)[i] = s;
      --pending;
    });
  }
  absl::MutexLock lock(&mu);
  mu.Await(absl::Condition(
      +[](int* p) { return *p == 0; }, &pending));
}

absl::Status Annotate(const absl::Status& s, absl::string_view task, absl::string_view what) {
  return absl::Status(s.code(), absl::StrCat(what, " on ", task, ": ", s.message()));
}

int64_t RandomStepIdBase() {
  return static_cast<int64_t>(RandomId() >> 2) + 1;  // Positive, with room to count up.
}

}  // namespace

absl::StatusOr<std::vector<proto::DeviceAttributes>> ListClusterDevices(
    WorkerCacheInterface* cache, const std::vector<std::string>& filters, int64_t wait_ms) {
  if (wait_ms <= 0) wait_ms = kWaitForTasksMs;
  std::vector<proto::DeviceAttributes> devices;
  for (const std::string& task : cache->ListTasks()) {
    if (!TaskMatchesFilters(task, filters)) continue;
    TANDEM_ASSIGN_OR_RETURN(WorkerInterface * w, cache->GetWorker(task));
    WireMessage<proto::GetStatusResponse> resp;
    absl::Status s = RetryWithBackoff(
        wait_ms, /*retry_deadline_exceeded=*/true,
        [&] {
          WireMessage<proto::GetStatusRequest> req;
          resp = {};
          CallOptions opts;
          opts.set_timeout_ms(std::max<int64_t>(100, wait_ms / 10));
          return CallAndWait(w, &WorkerInterface::GetStatusAsync, req, &resp, &opts);
        },
        [&](const absl::Status& e) {
          LOG_EVERY_N(INFO, 10) << "waiting for " << task << " to start: " << e.message();
        });
    if (!s.ok()) {
      return Annotate(s, task, absl::StrCat("waiting ", wait_ms, " ms for the task to answer"));
    }
    for (auto& d : *resp.proto.mutable_device()) {
      // A task that answers with another task's devices is another process on this
      // task's address (a stale task, or a cluster spec that gives two tasks one port);
      // placing on it would run this task's ops there.
      TANDEM_ASSIGN_OR_RETURN(DeviceSpec spec, DeviceSpec::Parse(d.name()));
      if (TaskNameOf(spec) != task) {
        return absl::FailedPreconditionError(
            absl::StrCat("the address of ", task, " is answered by ", TaskNameOf(spec), " (device ",
                         d.name(), "): another process listens on that task's address"));
      }
      // Only devices that match the filters (a task may hold GPUs the session must
      // not use).
      if (TaskMatchesFilters(d.name(), filters)) devices.push_back(std::move(d));
    }
  }
  if (devices.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("no device of the cluster matches the filters [",
                                                   absl::StrJoin(filters, ", "), "]"));
  }
  return devices;
}

absl::StatusOr<std::vector<std::string>> TasksOfDevices(
    const std::vector<proto::DeviceAttributes>& devices) {
  std::vector<std::string> tasks;
  for (const auto& d : devices) {
    TANDEM_ASSIGN_OR_RETURN(DeviceSpec spec, DeviceSpec::Parse(d.name()));
    std::string task = TaskNameOf(spec);
    if (std::find(tasks.begin(), tasks.end(), task) == tasks.end()) tasks.push_back(task);
  }
  return tasks;
}

MasterSession::MasterSession(const MasterEnv& env, std::string handle)
    : env_(env), handle_(std::move(handle)), next_step_id_(RandomStepIdBase()) {}

MasterSession::~MasterSession() = default;

absl::StatusOr<std::unique_ptr<MasterSession>> MasterSession::Create(
    const MasterEnv& env, std::string handle, const proto::GraphDef& graph,
    const proto::SessionConfig& config) {
  std::unique_ptr<MasterSession> s(new MasterSession(env, std::move(handle)));
  s->config_ = config;
  std::vector<std::string> filters(config.device_filters().begin(), config.device_filters().end());
  TANDEM_ASSIGN_OR_RETURN(
      s->devices_, ListClusterDevices(env.worker_cache, filters, config.wait_for_workers_ms()));
  TANDEM_ASSIGN_OR_RETURN(s->tasks_, TasksOfDevices(s->devices_));
  for (const std::string& task : s->tasks_) {
    TANDEM_ASSIGN_OR_RETURN(WorkerInterface * w, env.worker_cache->GetWorker(task));
    WireMessage<proto::CreateWorkerSessionRequest> req;
    WireMessage<proto::CreateWorkerSessionResponse> resp;
    req.proto.set_session_handle(s->handle_);
    absl::Status st = CallAndWait(w, &WorkerInterface::CreateWorkerSessionAsync, req, &resp);
    if (!st.ok()) return Annotate(st, task, "creating the worker session");
  }
  absl::MutexLock lock(&s->mu_);
  s->graph_ = std::make_unique<Graph>(OpRegistry::Global());
  TANDEM_RETURN_IF_ERROR(s->ExtendLocked(graph, 0).status());
  return s;
}

absl::StatusOr<int64_t> MasterSession::Extend(const proto::GraphDef& graph,
                                              int64_t current_version) {
  absl::MutexLock lock(&mu_);
  return ExtendLocked(graph, current_version);
}

absl::StatusOr<int64_t> MasterSession::ExtendLocked(const proto::GraphDef& graph,
                                                    int64_t current_version) {
  if (closed_) return absl::FailedPreconditionError("session is closed");
  if (current_version != graph_version_) {
    return absl::FailedPreconditionError(absl::StrCat("ExtendSession at graph version ",
                                                      current_version, " but the session is at ",
                                                      graph_version_));
  }
  TANDEM_RETURN_IF_ERROR(graph_->AddGraphDef(graph));
  std::vector<std::string> names;
  for (const auto& d : devices_) names.push_back(d.name());
  PlacerOptions opts;
  opts.default_device = env_.task_name;
  opts.allow_soft_placement = config_.allow_soft_placement();
  opts.device_filters.assign(config_.device_filters().begin(), config_.device_filters().end());
  bool own_task_listed = false;
  for (const std::string& t : tasks_) own_task_listed |= (t == env_.task_name);
  if (!own_task_listed) opts.default_device = "";  // Then the first listed device.
  TANDEM_RETURN_IF_ERROR(PlaceGraph(graph_.get(), names, opts));
  return ++graph_version_;
}

absl::StatusOr<std::shared_ptr<MasterSession::Plan>> MasterSession::BuildPlan(
    const std::vector<std::string>& feeds, const std::vector<std::string>& fetches,
    const std::vector<std::string>& targets) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Graph> sub,
                          BuildExecutableGraph(*graph_, feeds, fetches, targets));
  std::string fallback = devices_.front().name();
  for (const auto& d : devices_) {
    if (absl::StartsWith(d.name(), env_.task_name + "/")) {
      fallback = d.name();
      break;
    }
  }
  // Fed values go where they are consumed; fetched values stay where they are made.
  for (const auto& node : sub->nodes()) {
    if (node->op() != "_Arg") continue;
    std::string device = fallback;
    for (const auto& [consumer, slot] : node->out_edges()) {
      if (!consumer->assigned_device().empty()) {
        device = consumer->assigned_device();
        break;
      }
    }
    node->set_assigned_device(device);
  }
  for (const auto& node : sub->nodes()) {
    if (node->op() != "_Retval") continue;
    const std::string& d = node->input(0).node->assigned_device();
    node->set_assigned_device(d.empty() ? fallback : d);
  }
  PartitionOptions popts;
  for (const auto& d : devices_) popts.incarnations[d.name()] = d.incarnation();
  TANDEM_ASSIGN_OR_RETURN(auto partitions, PartitionGraph(*sub, popts));

  auto plan = std::make_shared<Plan>();
  for (const std::string& f : feeds) {
    TANDEM_ASSIGN_OR_RETURN(Output o, graph_->FindOutput(f));
    plan->feeds.push_back({f, o.dtype(), o.shape()});
  }
  for (auto& [device, def] : partitions) {
    Part part;
    TANDEM_ASSIGN_OR_RETURN(DeviceSpec spec, DeviceSpec::Parse(device));
    part.task = TaskNameOf(spec);
    TANDEM_ASSIGN_OR_RETURN(part.worker, env_.worker_cache->GetWorker(part.task));
    // Renumber _Arg and _Retval densely within the partition.
    std::vector<std::pair<int64_t, proto::NodeDef*>> args, rets;
    for (proto::NodeDef& n : *def.mutable_node()) {
      if (n.op() != "_Arg" && n.op() != "_Retval") continue;
      int64_t index = n.attr().at("index").i();
      (n.op() == "_Arg" ? args : rets).push_back({index, &n});
    }
    std::sort(args.begin(), args.end());
    std::sort(rets.begin(), rets.end());
    for (size_t i = 0; i < args.size(); ++i) {
      part.arg_global.push_back(static_cast<int>(args[i].first));
      (*args[i].second->mutable_attr())["index"].set_i(static_cast<int64_t>(i));
    }
    for (size_t i = 0; i < rets.size(); ++i) {
      part.retval_global.push_back(static_cast<int>(rets[i].first));
      (*rets[i].second->mutable_attr())["index"].set_i(static_cast<int64_t>(i));
    }
    part.def = std::move(def);
    if (std::find(plan->tasks.begin(), plan->tasks.end(), part.task) == plan->tasks.end()) {
      plan->tasks.push_back(part.task);
    }
    plan->parts.push_back(std::move(part));
  }
  return plan;
}

absl::Status MasterSession::RegisterPlan(Plan* plan) {
  struct Call {
    WireMessage<proto::RegisterGraphRequest> request;
    WireMessage<proto::RegisterGraphResponse> response;
    absl::Status status;
  };
  std::vector<Call> calls(plan->parts.size());
  absl::BlockingCounter pending(static_cast<int>(calls.size()));
  for (size_t i = 0; i < calls.size(); ++i) {
    Part& part = plan->parts[i];
    calls[i].request.proto.set_session_handle(handle_);
    *calls[i].request.proto.mutable_graph() = std::move(part.def);
    part.def.Clear();
    part.worker->RegisterGraphAsync(nullptr, &calls[i].request, &calls[i].response,
                                    [&calls, &pending, i](const absl::Status& s) {
                                      calls[i].status = s;
                                      pending.DecrementCount();
                                    });
  }
  pending.Wait();
  absl::Status first;
  Plan registered;  // The parts that were registered, to drop on an error.
  for (size_t i = 0; i < calls.size(); ++i) {
    Part& part = plan->parts[i];
    if (calls[i].status.ok()) {
      part.graph_handle = calls[i].response.proto.graph_handle();
      registered.parts.push_back(part);
    } else if (first.ok()) {
      absl::Status s = calls[i].status;
      // Nothing here cancels a registration: a CANCELLED one was cut off by its task's
      // server stopping (the chief shutting a ps down at the end of training), which
      // is a lost task to whoever creates the session.
      if (absl::IsCancelled(s)) {
        s = absl::UnavailableError(absl::StrCat("the task's server stopped: ", s.message()));
      }
      first = Annotate(s, part.task, "registering a partition");
    }
  }
  if (!first.ok()) Deregister(registered);
  return first;
}

absl::StatusOr<std::shared_ptr<const MasterSession::Plan>> MasterSession::GetPlan(
    std::vector<std::string> feeds, const std::vector<std::string>& fetches,
    std::vector<std::string> targets) {
  std::string key = RunSignature(feeds, fetches, targets);
  std::shared_ptr<Plan> plan;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return absl::FailedPreconditionError("session is closed");
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
    TANDEM_ASSIGN_OR_RETURN(plan, BuildPlan(feeds, fetches, targets));
  }
  TANDEM_RETURN_IF_ERROR(RegisterPlan(plan.get()));
  std::shared_ptr<const Plan> existing;
  bool closed;
  {
    absl::MutexLock lock(&mu_);
    closed = closed_;
    auto it = plans_.find(key);
    if (!closed && it == plans_.end()) {
      plans_[key] = plan;
      return std::shared_ptr<const Plan>(plan);
    }
    if (!closed) existing = it->second;
  }
  // Closed meanwhile, or another step of the same signature registered first.
  Deregister(*plan);
  if (closed) return absl::FailedPreconditionError("session is closed");
  return existing;
}

absl::Status MasterSession::Run(const WireMessage<proto::RunStepRequest>& request,
                                WireMessage<proto::RunStepResponse>* response) {
  const proto::RunStepRequest& req = request.proto;
  if (request.tensors.size() != static_cast<size_t>(req.feed_size())) {
    return absl::InvalidArgumentError(absl::StrCat("RunStep names ", req.feed_size(),
                                                   " feeds but carries ", request.tensors.size(),
                                                   " tensors"));
  }
  std::vector<std::string> feeds(req.feed().begin(), req.feed().end());
  std::vector<std::string> fetches(req.fetch().begin(), req.fetch().end());
  std::vector<std::string> targets(req.target().begin(), req.target().end());
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, GetPlan(feeds, fetches, targets));
  // Fed values in the plan's sorted order, checked against the graph.
  FeedMap fed;
  fed.reserve(req.feed_size());
  for (int i = 0; i < req.feed_size(); ++i) fed.emplace_back(req.feed(i), request.tensors[i]);
  TANDEM_ASSIGN_OR_RETURN(std::vector<Tensor> sorted, ArrangeFeeds(plan->feeds, fed));
  return RunPlan(*plan, sorted, req, response);
}

absl::Status MasterSession::RunPlan(const Plan& plan, const std::vector<Tensor>& feeds,
                                    const proto::RunStepRequest& options,
                                    WireMessage<proto::RunStepResponse>* response) {
  const int64_t step_id = next_step_id_.fetch_add(1);
  const int n = static_cast<int>(plan.parts.size());
  struct Call {
    CallOptions options;
    WireMessage<proto::RunGraphRequest> request;
    WireMessage<proto::RunGraphResponse> response;
  };
  std::vector<Call> calls(n);
  // Each task's first partition carries the steps it may now forget.
  std::vector<std::pair<std::string, std::vector<int64_t>>> taken;
  {
    absl::MutexLock lock(&cleanup_mu_);
    for (int i = 0; i < n; ++i) {
      auto it = finished_steps_.find(plan.parts[i].task);
      if (it == finished_steps_.end() || it->second.empty()) continue;
      for (int64_t s : it->second) calls[i].request.proto.add_cleanup_step_ids(s);
      taken.emplace_back(it->first, std::move(it->second));
      finished_steps_.erase(it);
    }
  }
  absl::Mutex mu;
  absl::Status first_error;  // Guarded by mu.
  std::vector<absl::Status> results;
  // Remote partitions first: this task's own run their cheap first nodes on this
  // thread before returning, which should not hold up the requests to the others.
  std::vector<int> order;
  for (int local = 0; local < 2; ++local) {
    for (int i = 0; i < n; ++i) {
      if ((plan.parts[i].task == env_.task_name) == (local == 1)) order.push_back(i);
    }
  }
  ParallelCalls(
      n,
      [&](int k, StatusCallback done) {
        const int i = order[k];
        const Part& part = plan.parts[i];
        Call& c = calls[i];
        c.request.proto.set_session_handle(handle_);
        c.request.proto.set_graph_handle(part.graph_handle);
        c.request.proto.set_step_id(step_id);
        c.request.proto.set_timeout_ms(options.timeout_ms());
        c.request.proto.set_trace(options.trace());
        if (options.timeout_ms() > 0) c.options.set_timeout_ms(options.timeout_ms() + 1000);
        for (int g : part.arg_global) c.request.tensors.push_back(feeds[g]);
        part.worker->RunGraphAsync(
            &c.options, &c.request, &c.response, [&, i, done](const absl::Status& s) {
              if (!s.ok()) {
                bool first = false;
                {
                  absl::MutexLock lock(&mu);
                  if (first_error.ok()) {
                    first_error = Annotate(s, plan.parts[i].task, "running a partition");
                    first = true;
                  }
                }
                if (first) {
                  // Cancel the other partitions' calls; their workers are aborted below.
                  for (int k = 0; k < n; ++k) {
                    if (k != i) calls[k].options.StartCancel();
                  }
                }
              }
              done(s);
            });
      },
      &results);
  absl::Status status;
  {
    absl::MutexLock lock(&mu);
    status = first_error;
  }
  if (status.ok()) {
    // Every task forgets the step at its next RunGraph.
    absl::MutexLock lock(&cleanup_mu_);
    for (const std::string& task : plan.tasks) finished_steps_[task].push_back(step_id);
  } else {
    // Abort the step on every task now. The steps this one carried may not have
    // reached their tasks: send them on their own (forgetting a step twice is harmless).
    for (const std::string& task : plan.tasks) CleanupAsync(task, step_id, status);
    for (const auto& [task, steps] : taken) {
      for (int64_t s : steps) CleanupAsync(task, s, absl::OkStatus());
    }
    return status;
  }
  response->tensors.assign(options.fetch_size(), Tensor());
  for (int i = 0; i < n; ++i) {
    const Part& part = plan.parts[i];
    std::vector<Tensor>& got = calls[i].response.tensors;
    if (got.size() != part.retval_global.size()) {
      return absl::InternalError(absl::StrCat(part.task, " returned ", got.size(),
                                              " values, expected ", part.retval_global.size()));
    }
    for (size_t k = 0; k < got.size(); ++k) {
      response->tensors[part.retval_global[k]] = std::move(got[k]);
    }
    for (const auto& ns : calls[i].response.proto.node_stats()) {
      *response->proto.add_node_stats() = ns;
    }
  }
  return absl::OkStatus();
}

void MasterSession::CleanupAsync(const std::string& task, int64_t step_id,
                                 const absl::Status& abort) {
  auto w = env_.worker_cache->GetWorker(task);
  if (!w.ok()) return;
  auto req = std::make_shared<WireMessage<proto::CleanupGraphRequest>>();
  auto resp = std::make_shared<WireMessage<proto::CleanupGraphResponse>>();
  req->proto.set_step_id(step_id);
  if (!abort.ok()) {
    req->proto.set_abort_code(static_cast<int>(abort.code()));
    req->proto.set_abort_message(std::string(abort.message()));
  }
  (*w)->CleanupGraphAsync(nullptr, req.get(), resp.get(), [req, resp](const absl::Status&) {});
}

void MasterSession::Deregister(const Plan& plan) {
  for (const Part& p : plan.parts) {
    WireMessage<proto::DeregisterGraphRequest> req;
    WireMessage<proto::DeregisterGraphResponse> resp;
    req.proto.set_session_handle(handle_);
    req.proto.set_graph_handle(p.graph_handle);
    CallAndWait(p.worker, &WorkerInterface::DeregisterGraphAsync, req, &resp).IgnoreError();
  }
}

absl::Status MasterSession::Close() {
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::OkStatus();
  closed_ = true;
  plans_.clear();  // Worker sessions go with their graphs.
  {
    absl::MutexLock cleanup_lock(&cleanup_mu_);
    for (const auto& [task, steps] : finished_steps_) {
      for (int64_t s : steps) CleanupAsync(task, s, absl::OkStatus());
    }
    finished_steps_.clear();
  }
  for (const std::string& task : tasks_) {
    auto w = env_.worker_cache->GetWorker(task);
    if (!w.ok()) continue;
    WireMessage<proto::DeleteWorkerSessionRequest> req;
    WireMessage<proto::DeleteWorkerSessionResponse> resp;
    req.proto.set_session_handle(handle_);
    CallOptions opts;
    opts.set_timeout_ms(kCloseRpcMs);
    absl::Status s = CallAndWait(*w, &WorkerInterface::DeleteWorkerSessionAsync, req, &resp, &opts);
    if (!s.ok()) LOG(WARNING) << "closing session " << handle_ << " on " << task << ": " << s;
  }
  return absl::OkStatus();
}

}  // namespace tandem

#include "framework/distributed/worker.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/distributed/collective/collective_executor.h"
#include "framework/distributed/tensor_wire.h"
#include "framework/graph/op_registry.h"
#include "framework/kernels/kernel_registry.h"
#include "framework/runtime/runtime_kernels.h"

namespace tandem {
namespace {

absl::Status Aborted(absl::string_view what, absl::string_view handle) {
  return absl::AbortedError(absl::StrCat(what, " '", handle,
                                         "' is not known to this worker; it may have "
                                         "restarted: re-create the session"));
}

}  // namespace

Worker::Worker(WorkerEnv env) : env_(std::move(env)) { EnsureKernels(); }

Worker::~Worker() {
  AbortAllSteps(absl::CancelledError("worker shutting down"));
  absl::MutexLock lock(&mu_);
  steps_.clear();
}

namespace {

// What waits on a step that its master cleaned up without an error of its own.
absl::Status EndedByCleanup(int64_t step_id, const std::string& task) {
  return absl::AbortedError(absl::StrCat("step ", step_id, " has ended on ", task));
}

}  // namespace

void Worker::AbortAllSteps(const absl::Status& status) {
  std::vector<std::shared_ptr<WorkerRendezvous>> live;
  absl::Status why;
  {
    absl::MutexLock lock(&mu_);
    if (abort_all_.ok()) abort_all_ = status;
    why = abort_all_;
    for (auto& [id, r] : steps_) live.push_back(r);
  }
  // Outside the lock: an abort cancels calls, whose handlers may end steps here.
  for (const auto& r : live) r->StartAbort(why);
}

void Worker::GetStatusAsync(CallOptions*, const WireMessage<proto::GetStatusRequest>*,
                            WireMessage<proto::GetStatusResponse>* response, StatusCallback done) {
  for (const auto& d : env_.devices->devices()) {
    proto::DeviceAttributes* a = response->proto.add_device();
    a->set_name(d->name());
    a->set_device_type(d->type().name);
    a->set_incarnation(d->incarnation());
  }
  done(absl::OkStatus());
}

void Worker::CreateWorkerSessionAsync(CallOptions*,
                                      const WireMessage<proto::CreateWorkerSessionRequest>* request,
                                      WireMessage<proto::CreateWorkerSessionResponse>*,
                                      StatusCallback done) {
  const std::string& handle = request->proto.session_handle();
  if (handle.empty()) {
    done(absl::InvalidArgumentError("CreateWorkerSession needs a session_handle"));
    return;
  }
  absl::MutexLock lock(&mu_);
  auto& slot = sessions_[handle];
  if (!slot) slot = std::make_shared<Session>();
  done(absl::OkStatus());
}

void Worker::DeleteWorkerSessionAsync(CallOptions*,
                                      const WireMessage<proto::DeleteWorkerSessionRequest>* request,
                                      WireMessage<proto::DeleteWorkerSessionResponse>*,
                                      StatusCallback done) {
  absl::MutexLock lock(&mu_);
  sessions_.erase(request->proto.session_handle());
  done(absl::OkStatus());
}

absl::StatusOr<std::shared_ptr<Worker::Session>> Worker::FindSession(
    const std::string& handle) const {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(handle);
  if (it == sessions_.end()) return Aborted("session", handle);
  return it->second;
}

absl::StatusOr<std::shared_ptr<const Worker::Partition>> Worker::FindGraph(
    const std::string& session, const std::string& graph) const {
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Session> s, FindSession(session));
  absl::MutexLock lock(&s->mu);
  auto it = s->graphs.find(graph);
  if (it == s->graphs.end()) return Aborted("graph", graph);
  return it->second;
}

absl::StatusOr<std::unique_ptr<Worker::Partition>> Worker::BuildPartition(
    const proto::GraphDef& def, Session* session) const {
  auto graph = std::make_unique<Graph>(OpRegistry::Global());
  TANDEM_RETURN_IF_ERROR(graph->AddGraphDef(def));
  auto part = std::make_unique<Partition>();
  int num_args = 0;
  for (const auto& node : graph->nodes()) {
    if (node->requested_device().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("node '", node->name(), "' of the registered graph has no device"));
    }
    TANDEM_ASSIGN_OR_RETURN(Device * d, env_.devices->Lookup(node->requested_device()));
    if (part->device == nullptr) part->device = d;
    if (d != part->device) {
      return absl::InvalidArgumentError(
          absl::StrCat("a registered graph must be on one device: node '", node->name(), "' is on ",
                       d->name(), ", others on ", part->device->name()));
    }
    node->set_assigned_device(d->name());
    if (node->op() == "_Arg") ++num_args;
  }
  if (part->device == nullptr) return absl::InvalidArgumentError("the registered graph is empty");
  part->arg_dtypes.assign(num_args, DType::kInvalid);
  for (const auto& node : graph->nodes()) {
    if (node->op() != "_Arg") continue;
    int64_t index = GetAttrOr<int64_t>(node->attrs(), "index", -1);
    if (index < 0 || index >= num_args || part->arg_dtypes[index] != DType::kInvalid) {
      return absl::InvalidArgumentError(
          absl::StrCat("_Arg '", node->name(), "' has index ", index, " of ", num_args));
    }
    part->arg_dtypes[index] = node->output_dtype(0);
  }
  TANDEM_ASSIGN_OR_RETURN(part->executor,
                          Executor::Create(std::move(graph), part->device, KernelRegistry::Global(),
                                           &session->kernels));
  return part;
}

void Worker::RegisterGraphAsync(CallOptions*,
                                const WireMessage<proto::RegisterGraphRequest>* request,
                                WireMessage<proto::RegisterGraphResponse>* response,
                                StatusCallback done) {
  auto session = FindSession(request->proto.session_handle());
  if (!session.ok()) {
    done(session.status());
    return;
  }
  auto part = BuildPartition(request->proto.graph(), session->get());
  if (!part.ok()) {
    done(absl::Status(part.status().code(), absl::StrCat(env_.task_name, ": registering a graph: ",
                                                         part.status().message())));
    return;
  }
  Session* s = session->get();
  absl::MutexLock lock(&s->mu);
  std::string handle = absl::StrCat("graph_", s->next_graph++);
  s->graphs[handle] = std::shared_ptr<const Partition>(std::move(*part));
  response->proto.set_graph_handle(handle);
  done(absl::OkStatus());
}

void Worker::DeregisterGraphAsync(CallOptions*,
                                  const WireMessage<proto::DeregisterGraphRequest>* request,
                                  WireMessage<proto::DeregisterGraphResponse>*,
                                  StatusCallback done) {
  auto session = FindSession(request->proto.session_handle());
  if (session.ok()) {
    absl::MutexLock lock(&(*session)->mu);
    (*session)->graphs.erase(request->proto.graph_handle());
  }
  done(absl::OkStatus());  // Deregistering what is gone is not an error.
}

absl::StatusOr<std::shared_ptr<WorkerRendezvous>> Worker::StepRendezvous(int64_t step_id) {
  absl::MutexLock lock(&mu_);
  if (ended_.contains(step_id)) {
    return absl::AbortedError(absl::StrCat("step ", step_id, " has already ended on ",
                                           env_.task_name, " (its partitions were cleaned up)"));
  }
  auto& slot = steps_[step_id];
  if (!slot) {
    slot = std::make_shared<WorkerRendezvous>(env_.task_name, step_id, env_.worker_cache);
    if (!abort_all_.ok()) slot->StartAbort(abort_all_);
  }
  return slot;
}

void Worker::RunGraphAsync(CallOptions* options, const WireMessage<proto::RunGraphRequest>* request,
                           WireMessage<proto::RunGraphResponse>* response, StatusCallback done) {
  const proto::RunGraphRequest& req = request->proto;
  for (int64_t step : req.cleanup_step_ids()) {
    EndStep(step, EndedByCleanup(step, env_.task_name));
  }
  auto part = FindGraph(req.session_handle(), req.graph_handle());
  if (!part.ok()) {
    done(part.status());
    return;
  }
  const std::vector<DType>& want = (*part)->arg_dtypes;
  if (request->tensors.size() != want.size()) {
    done(absl::InvalidArgumentError(absl::StrCat("RunGraph of ", req.graph_handle(), " needs ",
                                                 want.size(), " fed tensors, got ",
                                                 request->tensors.size())));
    return;
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (request->tensors[i].dtype() != want[i]) {
      done(absl::InvalidArgumentError(absl::StrCat("RunGraph argument ", i, " is ",
                                                   DTypeName(request->tensors[i].dtype()),
                                                   ", the graph expects ", DTypeName(want[i]))));
      return;
    }
  }
  absl::StatusOr<std::shared_ptr<WorkerRendezvous>> step = StepRendezvous(req.step_id());
  if (!step.ok()) {
    done(step.status());
    return;
  }
  std::shared_ptr<WorkerRendezvous> rendezvous = *std::move(step);
  auto stats = std::make_shared<StepStats>();  // Filled until the step ends.
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  ExecutorArgs args;  // RunAsync copies it.
  args.step_id = req.step_id();
  args.args = &request->tensors;
  args.retvals = &response->tensors;
  args.inter_op_pool = env_.inter_op_pool;
  args.intra_op_pool = env_.intra_op_pool;
  args.intra_op_threads = env_.intra_op_threads;
  args.rendezvous = rendezvous.get();
  args.recv_batching = rendezvous.get();
  args.collective = env_.collective;  // The hybrid strategy's all-reduce runs in partitions.
  if (req.trace()) args.stats = stats.get();
  if (req.timeout_ms() > 0) args.deadline_micros = env::NowMicros() + req.timeout_ms() * 1000;
  args.cancelled = cancelled.get();
  ++running_graphs_;
  if (options != nullptr) {
    // Runs at once when the call is already cancelled: the step then fails at its
    // first node. The worker outlives every call it serves.
    options->SetCancelCallback([this, cancelled, step_id = req.step_id()] {
      cancelled->store(true);
      // ABORTED for whatever else waits on the step, here or on other tasks: a step
      // its caller gave up on is over, and the training loop re-creates its session
      // after ABORTED (CANCELLED would end it).
      EndStep(step_id, absl::AbortedError(
                           absl::StrCat("the RunGraph of step ", step_id, " on ", env_.task_name,
                                        " was cancelled by its caller (or its deadline passed)")));
    });
  }
  // The partition and the rendezvous live until the step ends.
  std::shared_ptr<const Partition> partition = *part;
  partition->executor->RunAsync(args, [this, options, stats, cancelled, partition, rendezvous,
                                       response, done = std::move(done)](const absl::Status& s) {
    // `options` belongs to the caller, who may free it once `done` has run.
    if (options != nullptr) options->ClearCancelCallback();
    if (!s.ok()) {
      // Stop this step's other partitions here; the master aborts the other tasks.
      rendezvous->StartAbort(s);
      response->tensors.clear();
    }
    for (const NodeExecStats& n : stats->nodes) {
      proto::NodeStats* p = response->proto.add_node_stats();
      p->set_node_name(n.node_name);
      p->set_op(n.op);
      p->set_device(n.device);
      p->set_start_micros(n.start_micros);
      p->set_end_micros(n.end_micros);
      p->set_thread_id(n.thread_id);
    }
    --running_graphs_;
    done(s);
  });
}

absl::StatusOr<ParsedKey> Worker::ParseAndCheckKey(const std::string& text) const {
  TANDEM_ASSIGN_OR_RETURN(ParsedKey key, ParseRendezvousKey(text));
  TANDEM_RETURN_IF_ERROR(CheckKey(key));
  return key;
}

absl::Status Worker::CheckKey(const ParsedKey& key) const {
  absl::StatusOr<Device*> d = env_.devices->Lookup(key.src_device);
  if (!d.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("RecvTensor: this task (", env_.task_name,
                                                   ") has no device ", key.src_device));
  }
  if ((*d)->incarnation() != key.src_incarnation) {
    return absl::AbortedError(
        absl::StrCat("RecvTensor: ", key.src_device, " has restarted (the key names incarnation ",
                     absl::Hex(key.src_incarnation), ", it is now ", absl::Hex((*d)->incarnation()),
                     "): re-create the session"));
  }
  return absl::OkStatus();
}

namespace {

// Describes in `r` the bytes of `value` from `offset` (at most `chunk` of them) and
// returns them (sharing the value's buffer).
Tensor Chunk(const Tensor& value, uint64_t offset, uint64_t chunk, proto::RecvTensorResponse* r) {
  const uint64_t total = value.TotalBytes();
  const uint64_t n = std::min(chunk, total - offset);
  r->set_chunked(true);
  r->set_offset(offset);
  r->set_total_bytes(total);
  r->set_dtype(static_cast<proto::DataType>(value.dtype()));
  for (int64_t d : value.shape().dims()) r->add_dim(d);
  return value.ByteRange(offset, n);
}

// Fills `response` with the bytes of `value` from `offset` (at most `chunk` of them).
void ReplyWithChunk(const Tensor& value, uint64_t offset, uint64_t chunk,
                    WireMessage<proto::RecvTensorResponse>* response) {
  response->tensors = {Chunk(value, offset, chunk, &response->proto)};
}

// Keys a RecvTensor call may ask for at once.
constexpr int kMaxKeysPerRecvTensor = 4096;

// Key `i` of a RecvTensor call: 0 is rendezvous_key, then more_keys.
const std::string& KeyOf(const proto::RecvTensorRequest& request, int i) {
  return i == 0 ? request.rendezvous_key() : request.more_keys(i - 1);
}

}  // namespace

void Worker::RecvTensorAsync(CallOptions* options,
                             const WireMessage<proto::RecvTensorRequest>* request,
                             WireMessage<proto::RecvTensorResponse>* response,
                             StatusCallback done) {
  if (request->proto.more_keys_size() > 0) {
    RecvTensorsAsync(options, request->proto, response, std::move(done));
    return;
  }
  absl::StatusOr<ParsedKey> key = ParseAndCheckKey(request->proto.rendezvous_key());
  if (!key.ok()) {
    done(key.status());
    return;
  }
  const int64_t step_id = request->proto.step_id();
  absl::StatusOr<std::shared_ptr<WorkerRendezvous>> step = StepRendezvous(step_id);
  if (!step.ok()) {
    done(absl::Status(step.status().code(), absl::StrCat("RecvTensor of '", key->edge_name,
                                                         "': ", step.status().message())));
    return;
  }
  std::shared_ptr<WorkerRendezvous> r = *std::move(step);
  const uint64_t chunk = env_.recv_chunk_bytes;
  const uint64_t offset = request->proto.offset();
  if (offset > 0) {  // A later chunk of a large tensor.
    absl::StatusOr<Tensor> value = r->TakeChunk(key->full_key);
    if (!value.ok() || offset >= value->TotalBytes()) {
      done(value.ok() ? absl::InvalidArgumentError(
                            absl::StrCat("RecvTensor: offset ", offset, " is past the ",
                                         value->TotalBytes(), " bytes of '", key->edge_name, "'"))
                      : value.status());
      return;
    }
    ++chunks_sent_;
    ReplyWithChunk(*value, offset, chunk, response);
    done(absl::OkStatus());
    return;
  }
  EndStepIfCancelled(options, step_id);
  std::string full_key = key->full_key;
  r->RecvLocalAsync(*key, [this, options, r, full_key, response, done = std::move(done)](
                              const absl::Status& s, const Tensor& value, bool is_dead) {
    if (options != nullptr) options->ClearCancelCallback();
    if (!s.ok()) {
      done(s);
      return;
    }
    response->tensors = {ReplyWith(*r, full_key, value, is_dead, &response->proto)};
    done(absl::OkStatus());
  });
}

void Worker::EndStepIfCancelled(CallOptions* options, int64_t step_id) {
  if (options == nullptr) return;
  // The caller gave up (its step failed, or its task went away): so has this step.
  options->SetCancelCallback([this, step_id] {
    EndStep(step_id,
            absl::AbortedError(absl::StrCat("a RecvTensor of step ", step_id, " from ",
                                            env_.task_name, " was cancelled by its caller")));
  });
}

Tensor Worker::ReplyWith(WorkerRendezvous& step, const std::string& key, const Tensor& value,
                         bool is_dead, proto::RecvTensorResponse* r) {
  r->set_is_dead(is_dead);
  const uint64_t chunk = env_.recv_chunk_bytes;
  if (!HasWireBytes(value.dtype()) || value.TotalBytes() <= chunk) return value;
  ++chunks_sent_;
  step.Stash(key, value, static_cast<int64_t>((value.TotalBytes() - 1) / chunk));
  return Chunk(value, 0, chunk, r);
}

void Worker::RecvTensorsAsync(CallOptions* options, const proto::RecvTensorRequest& request,
                              WireMessage<proto::RecvTensorResponse>* response,
                              StatusCallback done) {
  const int n = 1 + request.more_keys_size();
  if (n > kMaxKeysPerRecvTensor || request.offset() != 0) {
    done(absl::InvalidArgumentError(absl::StrCat("RecvTensor of ", n, " keys at offset ",
                                                 request.offset(), ": at most ",
                                                 kMaxKeysPerRecvTensor, " keys, at offset 0")));
    return;
  }
  std::vector<ParsedKey> keys;
  absl::flat_hash_set<absl::string_view> seen;
  for (int i = 0; i < n; ++i) {
    const std::string& text = KeyOf(request, i);
    absl::StatusOr<ParsedKey> key = ParseAndCheckKey(text);
    if (!key.ok()) {
      done(key.status());
      return;
    }
    if (!seen.insert(text).second) {
      done(absl::InvalidArgumentError(
          absl::StrCat("RecvTensor asks twice for '", key->edge_name, "'")));
      return;
    }
    keys.push_back(*std::move(key));
  }
  const int64_t step_id = request.step_id();
  absl::StatusOr<std::shared_ptr<WorkerRendezvous>> step = StepRendezvous(step_id);
  if (!step.ok()) {
    done(absl::Status(step.status().code(),
                      absl::StrCat("RecvTensor of '", keys[0].edge_name, "' and ", n - 1,
                                   " more: ", step.status().message())));
    return;
  }
  std::shared_ptr<WorkerRendezvous> r = *std::move(step);
  EndStepIfCancelled(options, step_id);
  // The request outlives `done`: the answer's keys are read from it.
  r->RecvLocalAnyAsync(std::move(keys),
                       [this, options, r, &request, response, done = std::move(done)](
                           const absl::Status& s, std::vector<WorkerRendezvous::Ready> ready) {
                         if (options != nullptr) options->ClearCancelCallback();
                         if (!s.ok()) {
                           // What was taken out of the table is lost with the call, as when a
                           // single receive fails: the step is over.
                           done(s);
                           return;
                         }
                         for (WorkerRendezvous::Ready& v : ready) {
                           proto::RecvTensorResponse* entry = response->proto.add_ready();
                           entry->set_key_index(v.index);
                           response->tensors.push_back(
                               ReplyWith(*r, KeyOf(request, v.index), v.value, v.is_dead, entry));
                         }
                         done(absl::OkStatus());
                       });
}

void Worker::CleanupGraphAsync(CallOptions*, const WireMessage<proto::CleanupGraphRequest>* request,
                               WireMessage<proto::CleanupGraphResponse>*, StatusCallback done) {
  const proto::CleanupGraphRequest& req = request->proto;
  absl::Status why =
      req.abort_code() != 0
          ? absl::Status(static_cast<absl::StatusCode>(req.abort_code()), req.abort_message())
          : EndedByCleanup(req.step_id(), env_.task_name);
  EndStep(req.step_id(), why);
  done(absl::OkStatus());
}

void Worker::CleanupAllAsync(CallOptions*, const WireMessage<proto::CleanupAllRequest>* request,
                             WireMessage<proto::CleanupAllResponse>*, StatusCallback done) {
  for (const auto& d : env_.devices->devices()) {
    ResourceMgr* rm = d->resource_manager();
    if (request->proto.container_size() > 0) {
      for (const std::string& c : request->proto.container()) rm->Cleanup(c);
      continue;
    }
    for (const auto& [container, name] : rm->List()) rm->Delete(container, name).IgnoreError();
  }
  done(absl::OkStatus());
}

void Worker::ShutdownAsync(CallOptions*, const WireMessage<proto::ShutdownRequest>* request,
                           WireMessage<proto::ShutdownResponse>*, StatusCallback done) {
  if (!env_.on_shutdown) {
    done(absl::FailedPreconditionError("this worker cannot be shut down remotely"));
    return;
  }
  done(absl::OkStatus());
  env_.on_shutdown(request->proto.reason());
}

void Worker::CollectiveDataAsync(CallOptions*,
                                 const WireMessage<proto::CollectiveDataRequest>* request,
                                 WireMessage<proto::CollectiveDataResponse>*, StatusCallback done) {
  if (env_.collective == nullptr) {
    done(absl::FailedPreconditionError(env_.task_name + " runs no collective group"));
    return;
  }
  env_.collective->HandleData(*request, std::move(done));
}

void Worker::CollectiveJoinAsync(CallOptions*,
                                 const WireMessage<proto::CollectiveJoinRequest>* request,
                                 WireMessage<proto::CollectiveJoinResponse>* response,
                                 StatusCallback done) {
  if (env_.collective == nullptr) {
    done(absl::FailedPreconditionError(env_.task_name + " runs no collective group"));
    return;
  }
  env_.collective->HandleJoin(request->proto, &response->proto, std::move(done));
}

void Worker::EndStep(int64_t step_id, const absl::Status& why) {
  std::shared_ptr<WorkerRendezvous> r;
  {
    absl::MutexLock lock(&mu_);
    auto it = steps_.find(step_id);
    if (it != steps_.end()) {
      r = std::move(it->second);
      steps_.erase(it);
    }
    if (ended_.insert(step_id).second) {
      ended_order_.push_back(step_id);
      if (ended_order_.size() > static_cast<size_t>(kRememberedEndedSteps)) {
        ended_.erase(ended_order_.front());
        ended_order_.pop_front();
      }
    }
  }
  // Outside the lock: waiters' callbacks run inline and reply to their callers.
  if (r != nullptr) r->StartAbort(why);
}

int Worker::NumLiveSteps() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(steps_.size());
}

}  // namespace tandem

#include "framework/distributed/worker_rendezvous.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "framework/distributed/tensor_wire.h"

namespace tandem {

WorkerRendezvous::WorkerRendezvous(std::string task, int64_t step_id, WorkerCacheInterface* cache)
    : task_(std::move(task)), cache_(cache), calls_(std::make_shared<Calls>()) {
  calls_->step_id = step_id;
}

WorkerRendezvous::~WorkerRendezvous() {
  StartAbort(absl::CancelledError("step rendezvous destroyed"));
}

absl::Status WorkerRendezvous::Send(const ParsedKey& key, const Tensor& value, bool is_dead) {
  return local_.Send(key, value, is_dead);
}

bool WorkerRendezvous::IsLocal(const ParsedKey& key) const {
  // Keys carry canonical full device names ("<task>/device:CPU:0"): no parsing needed.
  return absl::StartsWith(key.src_device, task_) && key.src_device.size() > task_.size() &&
         key.src_device[task_.size()] == '/';
}

void WorkerRendezvous::RecvAsync(const ParsedKey& key, DoneCallback done) {
  if (IsLocal(key)) {
    local_.RecvAsync(key, std::move(done));
    return;
  }
  RecvRemote(key, TaskNameOf(key.src), std::move(done), /*may_hold=*/true);
}

// One remote receive: a single RecvTensor call, or, for a chunked tensor, a first call
// that says what the tensor is and then calls for the other chunks, several at once.
struct WorkerRendezvous::RemoteRecv {
  WorkerInterface* worker = nullptr;
  std::string src_task;
  std::string edge;
  std::string key;
  DoneCallback done;
  // Chunked: set by the first chunk, before any other call is issued.
  Tensor value;
  uint64_t chunk = 0;
  absl::Mutex mu;
  uint64_t next_offset ABSL_GUARDED_BY(mu) = 0;  // Of the next chunk to ask for.
  uint64_t received ABSL_GUARDED_BY(mu) = 0;
  bool finished ABSL_GUARDED_BY(mu) = false;  // `done` has been called.
  bool is_dead = false;

  // Calls `done` unless it was already called.
  void Finish(const absl::Status& s) {
    {
      absl::MutexLock lock(&mu);
      if (finished) return;
      finished = true;
    }
    if (s.ok()) {
      done(s, value, is_dead);
    } else {
      done(s, Tensor(), false);
    }
  }
};

namespace {

// One RecvTensor call, shared with its callback.
struct RecvCall {
  std::shared_ptr<CallOptions> options = std::make_shared<CallOptions>();
  WireMessage<proto::RecvTensorRequest> request;
  WireMessage<proto::RecvTensorResponse> response;
};

}  // namespace

struct WorkerRendezvous::PendingBurst {
  const WorkerRendezvous* owner = nullptr;
  std::vector<std::shared_ptr<RemoteRecv>> recvs;
};

std::vector<WorkerRendezvous::PendingBurst>& WorkerRendezvous::Bursts() {
  static thread_local std::vector<PendingBurst> bursts;
  return bursts;
}

absl::Status WorkerRendezvous::Calls::Begin(const std::shared_ptr<CallOptions>& call) {
  absl::MutexLock lock(&mu);
  if (aborted.ok()) inflight.insert(call);
  return aborted;
}

absl::Status WorkerRendezvous::Calls::End(const std::shared_ptr<CallOptions>& call) {
  absl::MutexLock lock(&mu);
  inflight.erase(call);
  return aborted;
}

void WorkerRendezvous::BeginRecvBatch() { Bursts().push_back(PendingBurst{this, {}}); }

void WorkerRendezvous::EndRecvBatch() {
  std::vector<PendingBurst>& bursts = Bursts();
  if (bursts.empty() || bursts.back().owner != this) return;  // Unpaired: nothing held.
  std::vector<std::shared_ptr<RemoteRecv>> held = std::move(bursts.back().recvs);
  bursts.pop_back();
  // By source task, in the order they were started.
  std::vector<std::vector<std::shared_ptr<RemoteRecv>>> by_task;
  for (auto& recv : held) {
    auto it = std::find_if(by_task.begin(), by_task.end(),
                           [&](const auto& group) { return group[0]->src_task == recv->src_task; });
    if (it == by_task.end()) {
      by_task.push_back({std::move(recv)});
    } else {
      it->push_back(std::move(recv));
    }
  }
  for (auto& group : by_task) IssueRecvCalls(calls_, std::move(group));
}

void WorkerRendezvous::RecvRemote(const ParsedKey& key, const std::string& src_task,
                                  DoneCallback done, bool may_hold) {
  absl::StatusOr<WorkerInterface*> worker = cache_->GetWorker(src_task);
  if (!worker.ok()) {
    done(worker.status(), Tensor(), false);
    return;
  }
  auto recv = std::make_shared<RemoteRecv>();
  recv->worker = *worker;
  recv->src_task = src_task;
  recv->edge = key.edge_name;
  recv->key = key.full_key;
  recv->done = std::move(done);
  std::vector<PendingBurst>& bursts = Bursts();
  if (may_hold && !bursts.empty() && bursts.back().owner == this) {
    bursts.back().recvs.push_back(std::move(recv));
    return;
  }
  IssueRecvCall(calls_, std::move(recv), 0);
}

void WorkerRendezvous::IssueRecvCall(std::shared_ptr<Calls> calls, std::shared_ptr<RemoteRecv> recv,
                                     uint64_t offset) {
  auto call = std::make_shared<RecvCall>();
  call->request.proto.set_step_id(calls->step_id);
  call->request.proto.set_rendezvous_key(recv->key);
  call->request.proto.set_offset(offset);
  const absl::Status aborted = calls->Begin(call->options);
  if (!aborted.ok()) {
    recv->Finish(aborted);
    return;
  }
  WorkerInterface* worker = recv->worker;
  worker->RecvTensorAsync(
      call->options.get(), &call->request, &call->response,
      [calls, call, recv, offset](const absl::Status& s) {
        absl::Status result = calls->End(call->options);  // An abort wins.
        if (result.ok() && !s.ok()) {
          result = absl::Status(s.code(), absl::StrCat("receiving tensor '", recv->edge, "' from ",
                                                       recv->src_task, ": ", s.message()));
        }
        if (result.ok() && call->response.tensors.size() != 1) {
          result =
              absl::InternalError(absl::StrCat("RecvTensor from ", recv->src_task, " returned ",
                                               call->response.tensors.size(), " tensors"));
        }
        if (!result.ok()) {
          recv->Finish(result);
          return;
        }
        OnRecvReply(calls, recv, offset, call->response.proto, call->response.tensors[0]);
      });
}

void WorkerRendezvous::OnRecvReply(const std::shared_ptr<Calls>& calls,
                                   const std::shared_ptr<RemoteRecv>& recv, uint64_t offset,
                                   const proto::RecvTensorResponse& r, const Tensor& bytes) {
  if (!r.chunked() && offset == 0) {
    recv->value = bytes;
    recv->is_dead = r.is_dead();
    recv->Finish(absl::OkStatus());
    return;
  }
  absl::Status result = AddChunk(recv.get(), offset, r, bytes);
  if (!result.ok()) {
    recv->Finish(result);
    return;
  }
  // Ask for more chunks: after the first, up to kChunksInFlight at a time.
  std::vector<uint64_t> next;
  bool complete;
  {
    absl::MutexLock lock(&recv->mu);
    if (recv->finished) return;  // Another chunk failed: ask for no more.
    const uint64_t total = recv->value.TotalBytes();
    complete = recv->received == total;
    const int want = offset == 0 ? kChunksInFlight : 1;
    while (static_cast<int>(next.size()) < want && recv->next_offset < total) {
      next.push_back(recv->next_offset);
      recv->next_offset += recv->chunk;
    }
  }
  if (complete) {
    recv->Finish(absl::OkStatus());
    return;
  }
  for (uint64_t o : next) IssueRecvCall(calls, recv, o);
}

void WorkerRendezvous::IssueRecvCalls(std::shared_ptr<Calls> calls,
                                      std::vector<std::shared_ptr<RemoteRecv>> recvs) {
  if (recvs.size() == 1) {
    IssueRecvCall(std::move(calls), std::move(recvs[0]), 0);
  } else if (!recvs.empty()) {
    IssueBatchCall(std::move(calls), std::move(recvs));
  }
}

void WorkerRendezvous::IssueBatchCall(std::shared_ptr<Calls> calls,
                                      std::vector<std::shared_ptr<RemoteRecv>> recvs) {
  auto call = std::make_shared<RecvCall>();
  call->request.proto.set_step_id(calls->step_id);
  call->request.proto.set_rendezvous_key(recvs[0]->key);
  for (size_t i = 1; i < recvs.size(); ++i) call->request.proto.add_more_keys(recvs[i]->key);
  const absl::Status aborted = calls->Begin(call->options);
  if (!aborted.ok()) {
    for (const auto& recv : recvs) recv->Finish(aborted);
    return;
  }
  WorkerInterface* worker = recvs[0]->worker;
  worker->RecvTensorAsync(
      call->options.get(), &call->request, &call->response,
      [calls, call, recvs = std::move(recvs)](const absl::Status& s) mutable {
        absl::Status result = calls->End(call->options);  // An abort wins.
        const std::string& src = recvs[0]->src_task;
        if (result.ok() && !s.ok()) {
          result = absl::Status(
              s.code(), absl::StrCat("receiving ", recvs.size(), " tensors ('", recvs[0]->edge,
                                     "', ...) from ", src, ": ", s.message()));
        }
        const proto::RecvTensorResponse& r = call->response.proto;
        const std::vector<Tensor>& tensors = call->response.tensors;
        std::vector<bool> answered(recvs.size(), false);
        if (result.ok()) {
          if (r.ready_size() == 0 || static_cast<size_t>(r.ready_size()) != tensors.size()) {
            result = absl::InternalError(
                absl::StrCat("RecvTensor of ", recvs.size(), " keys from ", src, " answered ",
                             r.ready_size(), " of them with ", tensors.size(), " tensors"));
          }
          for (int i = 0; result.ok() && i < r.ready_size(); ++i) {
            const int k = r.ready(i).key_index();
            if (k < 0 || static_cast<size_t>(k) >= recvs.size() || answered[k]) {
              result = absl::InternalError(absl::StrCat("RecvTensor of ", recvs.size(),
                                                        " keys from ", src, " answered key ", k));
            } else {
              answered[k] = true;
            }
          }
        }
        if (!result.ok()) {
          for (const auto& recv : recvs) recv->Finish(result);
          return;
        }
        for (int i = 0; i < r.ready_size(); ++i) {
          OnRecvReply(calls, recvs[r.ready(i).key_index()], 0, r.ready(i), tensors[i]);
        }
        std::vector<std::shared_ptr<RemoteRecv>> rest;
        for (size_t k = 0; k < recvs.size(); ++k) {
          if (!answered[k]) rest.push_back(std::move(recvs[k]));
        }
        IssueRecvCalls(calls, std::move(rest));
      });
}

absl::Status WorkerRendezvous::AddChunk(RemoteRecv* recv, uint64_t offset,
                                        const proto::RecvTensorResponse& r, const Tensor& bytes) {
  auto bad = [&](absl::string_view what) {
    return absl::InternalError(
        absl::StrCat("chunked RecvTensor of '", recv->edge, "' from ", recv->src_task, ": ", what));
  };
  if (!r.chunked()) return bad("a later chunk came back unchunked");
  if (bytes.dtype() != DType::kUInt8 || bytes.TotalBytes() == 0 || r.offset() != offset) {
    return bad(absl::StrCat("asked for offset ", offset, ", got ", bytes.TotalBytes(),
                            " bytes at offset ", r.offset()));
  }
  if (offset == 0) {  // The first chunk says what the tensor is and the chunk size.
    if (!IsValidDType(r.dtype()) || !HasWireBytes(static_cast<DType>(r.dtype()))) {
      return bad("bad dtype");
    }
    auto shape = TensorShape::Create(absl::MakeConstSpan(r.dim().data(), r.dim_size()));
    if (!shape.ok()) return bad(shape.status().message());
    DType dtype = static_cast<DType>(r.dtype());
    if (static_cast<uint64_t>(shape->num_elements()) * DTypeSize(dtype) != r.total_bytes()) {
      return bad("total_bytes does not match dtype and shape");
    }
    if (bytes.TotalBytes() >= r.total_bytes()) return bad("a chunked tensor in one chunk");
    recv->value = Tensor(dtype, *shape);
    recv->chunk = bytes.TotalBytes();
    recv->is_dead = r.is_dead();
    absl::MutexLock lock(&recv->mu);
    recv->next_offset = recv->chunk;
  } else {
    // Every chunk but the last is as long as the first.
    const uint64_t total = recv->value.TotalBytes();
    if (offset % recv->chunk != 0 || bytes.TotalBytes() != std::min(recv->chunk, total - offset)) {
      return bad(absl::StrCat("chunk of ", bytes.TotalBytes(), " bytes at offset ", offset,
                              " does not fit chunks of ", recv->chunk, " in ", total, " bytes"));
    }
  }
  // Chunks land in disjoint ranges of the value, so copies need no lock.
  std::memcpy(recv->value.raw_data() + offset, bytes.raw_data(), bytes.TotalBytes());
  absl::MutexLock lock(&recv->mu);
  recv->received += bytes.TotalBytes();
  return absl::OkStatus();
}

// Every key has a waiter in the local table until it is answered or withdrawn.
// `outstanding` counts those waiters plus one token for the withdrawal round, which
// runs once, after registration and once some key is answered: the reply goes out
// when nothing is outstanding.
struct WorkerRendezvous::AnyRecv {
  std::vector<ParsedKey> keys;
  AnyCallback done;
  absl::Mutex mu;
  std::vector<uint64_t> ids ABSL_GUARDED_BY(mu);  // Waiter ids; 0: called inline.
  std::vector<bool> resolved ABSL_GUARDED_BY(mu);
  int outstanding ABSL_GUARDED_BY(mu) = 0;
  bool registered ABSL_GUARDED_BY(mu) = false;
  bool answered ABSL_GUARDED_BY(mu) = false;
  absl::Status status ABSL_GUARDED_BY(mu);
  std::vector<Ready> ready ABSL_GUARDED_BY(mu);

  // Drops one outstanding count; the last one replies. `held` locks `mu`; this
  // unlocks it.
  void Release(absl::ReleasableMutexLock& held) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (--outstanding > 0) return;
    absl::Status s = status;
    std::vector<Ready> values = std::move(ready);
    held.Release();
    done(s, std::move(values));
  }
};

void WorkerRendezvous::RecvLocalAnyAsync(std::vector<ParsedKey> keys, AnyCallback done) {
  auto any = std::make_shared<AnyRecv>();
  const size_t n = keys.size();
  any->keys = std::move(keys);
  any->done = std::move(done);
  {
    absl::MutexLock lock(&any->mu);
    any->ids.assign(n, 0);
    any->resolved.assign(n, false);
    any->outstanding = static_cast<int>(n) + 1;
  }
  // Withdraws every waiter not yet answered; runs once.
  auto withdraw_rest = [this, any] {
    for (size_t i = 0; i < any->keys.size(); ++i) {
      uint64_t id;
      {
        absl::MutexLock lock(&any->mu);
        if (any->resolved[i]) continue;
        id = any->ids[i];
      }
      if (id != 0 && local_.Withdraw(any->keys[i].full_key, id)) {
        absl::MutexLock lock(&any->mu);
        any->resolved[i] = true;
        --any->outstanding;  // Never the last: the round holds its token.
      }
    }
    absl::ReleasableMutexLock lock(&any->mu);
    any->Release(lock);
  };
  for (size_t i = 0; i < n; ++i) {
    uint64_t id = local_.Enqueue(
        any->keys[i], [any, i, withdraw_rest](const absl::Status& s, const Tensor& v, bool dead) {
          bool first = false;
          {
            absl::ReleasableMutexLock lock(&any->mu);
            any->resolved[i] = true;
            if (!s.ok()) {
              if (any->status.ok()) any->status = s;
            } else {
              any->ready.push_back(Ready{static_cast<int>(i), v, dead});
            }
            if (!any->answered) {
              any->answered = true;
              first = any->registered;
            }
            any->Release(lock);
          }
          if (first) withdraw_rest();
        });
    absl::MutexLock lock(&any->mu);
    if (!any->resolved[i]) any->ids[i] = id;
  }
  bool answered;
  {
    absl::MutexLock lock(&any->mu);
    any->registered = true;
    answered = any->answered;
  }
  if (answered) withdraw_rest();
}

void WorkerRendezvous::Stash(const std::string& key, const Tensor& value, int64_t chunks) {
  absl::MutexLock lock(&mu_);
  stash_[key] = {value, chunks};
}

absl::StatusOr<Tensor> WorkerRendezvous::TakeChunk(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = stash_.find(key);
  if (it == stash_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("RecvTensor: no chunked transfer of '", key, "' is in progress"));
  }
  Tensor t = it->second.value;
  if (--it->second.chunks_left <= 0) stash_.erase(it);
  return t;
}

absl::Status WorkerRendezvous::Recv(const ParsedKey& key, const RecvOptions& options, Tensor* value,
                                    bool* is_dead) {
  if (IsLocal(key)) return local_.Recv(key, options, value, is_dead);
  absl::Notification n;
  absl::Status result;
  RecvRemote(
      key, TaskNameOf(key.src),
      [&](const absl::Status& s, const Tensor& v, bool dead) {
        result = s;
        *value = v;
        *is_dead = dead;
        n.Notify();
      },
      /*may_hold=*/false);
  n.WaitForNotification();
  return result;
}

void WorkerRendezvous::StartAbort(const absl::Status& status) {
  local_.StartAbort(status);
  std::vector<std::shared_ptr<CallOptions>> calls;
  {
    absl::MutexLock lock(&calls_->mu);
    if (calls_->aborted.ok()) calls_->aborted = status;
    calls.assign(calls_->inflight.begin(), calls_->inflight.end());
  }
  // Outside the lock: an in-process worker may call back inline when cancelled.
  for (const auto& c : calls) c->StartCancel();
}

}  // namespace tandem

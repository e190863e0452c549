#include "framework/distributed/worker_rendezvous.h"

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
  RecvRemote(key, TaskNameOf(key.src), std::move(done));
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

void WorkerRendezvous::RecvRemote(const ParsedKey& key, const std::string& src_task,
                                  DoneCallback done) {
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
  IssueRecvCall(calls_, std::move(recv), 0);
}

void WorkerRendezvous::IssueRecvCall(std::shared_ptr<Calls> calls, std::shared_ptr<RemoteRecv> recv,
                                     uint64_t offset) {
  struct Call {
    std::shared_ptr<CallOptions> options = std::make_shared<CallOptions>();
    WireMessage<proto::RecvTensorRequest> request;
    WireMessage<proto::RecvTensorResponse> response;
  };
  auto call = std::make_shared<Call>();
  call->request.proto.set_step_id(calls->step_id);
  call->request.proto.set_rendezvous_key(recv->key);
  call->request.proto.set_offset(offset);
  absl::Status aborted;
  {
    absl::MutexLock lock(&calls->mu);
    aborted = calls->aborted;
    if (aborted.ok()) calls->inflight.insert(call->options);
  }
  if (!aborted.ok()) {
    recv->Finish(aborted);
    return;
  }
  WorkerInterface* worker = recv->worker;
  worker->RecvTensorAsync(
      call->options.get(), &call->request, &call->response,
      [calls, call, recv, offset](const absl::Status& s) {
        absl::Status result;  // An abort wins over what the call says.
        {
          absl::MutexLock lock(&calls->mu);
          calls->inflight.erase(call->options);
          result = calls->aborted;
        }
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
        const proto::RecvTensorResponse& r = call->response.proto;
        if (!r.chunked() && offset == 0) {
          recv->value = call->response.tensors[0];
          recv->is_dead = r.is_dead();
          recv->Finish(absl::OkStatus());
          return;
        }
        result = AddChunk(recv.get(), offset, r, call->response.tensors[0]);
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
  RecvAsync(key, [&](const absl::Status& s, const Tensor& v, bool dead) {
    result = s;
    *value = v;
    *is_dead = dead;
    n.Notify();
  });
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

#include "framework/distributed/worker_rendezvous.h"

#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"

namespace tandem {

std::string TaskNameOf(const DeviceSpec& device) {
  DeviceSpec task = device;
  task.type.reset();
  task.id.reset();
  if (!task.replica) task.replica = 0;
  return task.ToString();
}

WorkerRendezvous::WorkerRendezvous(std::string task, int64_t step_id, WorkerCacheInterface* cache)
    : task_(std::move(task)), step_id_(step_id), cache_(cache) {}

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

// One remote receive: a single RecvTensor call, or several for a chunked tensor.
struct WorkerRendezvous::RemoteRecv {
  WorkerInterface* worker = nullptr;
  std::string src_task;
  std::string edge;
  std::string key;
  DoneCallback done;
  Tensor value;  // Chunked: the tensor being filled.
  uint64_t received = 0;
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
  IssueRecvCall(std::move(recv));
}

void WorkerRendezvous::IssueRecvCall(std::shared_ptr<RemoteRecv> recv) {
  struct Call {
    std::shared_ptr<CallOptions> options = std::make_shared<CallOptions>();
    WireMessage<proto::RecvTensorRequest> request;
    WireMessage<proto::RecvTensorResponse> response;
  };
  auto call = std::make_shared<Call>();
  call->request.proto.set_step_id(step_id_);
  call->request.proto.set_rendezvous_key(recv->key);
  call->request.proto.set_offset(recv->received);
  {
    absl::MutexLock lock(&mu_);
    absl::Status aborted = local_.status();
    if (!aborted.ok()) {
      recv->done(aborted, Tensor(), false);
      return;
    }
    inflight_.insert(call->options);
  }
  WorkerInterface* worker = recv->worker;
  worker->RecvTensorAsync(
      call->options.get(), &call->request, &call->response,
      [this, call, recv](const absl::Status& s) {
        {
          absl::MutexLock lock(&mu_);
          inflight_.erase(call->options);
        }
        absl::Status result = local_.status();  // An abort wins over what the call says.
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
          recv->done(result, Tensor(), false);
          return;
        }
        const proto::RecvTensorResponse& r = call->response.proto;
        if (!r.chunked()) {
          recv->done(absl::OkStatus(), call->response.tensors[0], r.is_dead());
          return;
        }
        result = AddChunk(recv.get(), r, call->response.tensors[0]);
        if (!result.ok()) {
          recv->done(result, Tensor(), false);
        } else if (recv->received == recv->value.TotalBytes()) {
          recv->done(absl::OkStatus(), recv->value, r.is_dead());
        } else {
          IssueRecvCall(recv);
        }
      });
}

absl::Status WorkerRendezvous::AddChunk(RemoteRecv* recv, const proto::RecvTensorResponse& r,
                                        const Tensor& bytes) {
  auto bad = [&](absl::string_view what) {
    return absl::InternalError(
        absl::StrCat("chunked RecvTensor of '", recv->edge, "' from ", recv->src_task, ": ", what));
  };
  if (recv->received == 0) {  // The first chunk says what the tensor is.
    if (!IsValidDType(r.dtype()) || r.dtype() == proto::DT_RESOURCE) return bad("bad dtype");
    auto shape = TensorShape::Create(absl::MakeConstSpan(r.dim().data(), r.dim_size()));
    if (!shape.ok()) return bad(shape.status().message());
    DType dtype = static_cast<DType>(r.dtype());
    if (static_cast<uint64_t>(shape->num_elements()) * DTypeSize(dtype) != r.total_bytes()) {
      return bad("total_bytes does not match dtype and shape");
    }
    recv->value = Tensor(dtype, *shape);
  }
  if (bytes.dtype() != DType::kUInt8 || r.offset() != recv->received ||
      r.offset() + bytes.TotalBytes() > recv->value.TotalBytes() || bytes.TotalBytes() == 0) {
    return bad(absl::StrCat("chunk of ", bytes.TotalBytes(), " bytes at offset ", r.offset(),
                            " does not continue the ", recv->received, " bytes received"));
  }
  std::memcpy(recv->value.raw_data() + recv->received, bytes.raw_data(), bytes.TotalBytes());
  recv->received += bytes.TotalBytes();
  return absl::OkStatus();
}

void WorkerRendezvous::Stash(const std::string& key, const Tensor& value) {
  absl::MutexLock lock(&mu_);
  stash_[key] = value;
}

absl::StatusOr<Tensor> WorkerRendezvous::Stashed(const std::string& key, bool drop) {
  absl::MutexLock lock(&mu_);
  auto it = stash_.find(key);
  if (it == stash_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("RecvTensor: no chunked transfer of '", key, "' is in progress"));
  }
  Tensor t = it->second;
  if (drop) stash_.erase(it);
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
    absl::MutexLock lock(&mu_);
    calls.assign(inflight_.begin(), inflight_.end());
  }
  // Outside the lock: an in-process worker may call back inline when cancelled.
  for (const auto& c : calls) c->StartCancel();
}

}  // namespace tandem

#include "framework/distributed/worker_rendezvous.h"

#include <utility>
#include <vector>

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

void WorkerRendezvous::RecvAsync(const ParsedKey& key, DoneCallback done) {
  std::string src_task = TaskNameOf(key.src);
  if (src_task == task_) {
    local_.RecvAsync(key, std::move(done));
    return;
  }
  RecvRemote(key, src_task, std::move(done));
}

void WorkerRendezvous::RecvRemote(const ParsedKey& key, const std::string& src_task,
                                  DoneCallback done) {
  absl::StatusOr<WorkerInterface*> worker = cache_->GetWorker(src_task);
  if (!worker.ok()) {
    done(worker.status(), Tensor(), false);
    return;
  }
  struct Call {
    std::shared_ptr<CallOptions> options = std::make_shared<CallOptions>();
    WireMessage<proto::RecvTensorRequest> request;
    WireMessage<proto::RecvTensorResponse> response;
  };
  auto call = std::make_shared<Call>();
  call->request.proto.set_step_id(step_id_);
  call->request.proto.set_rendezvous_key(key.full_key);
  {
    absl::MutexLock lock(&mu_);
    absl::Status aborted = local_.status();
    if (!aborted.ok()) {
      done(aborted, Tensor(), false);
      return;
    }
    inflight_.insert(call->options);
  }
  std::string edge = key.edge_name;
  (*worker)->RecvTensorAsync(
      call->options.get(), &call->request, &call->response,
      [this, call, src_task, edge, done = std::move(done)](const absl::Status& s) {
        {
          absl::MutexLock lock(&mu_);
          inflight_.erase(call->options);
        }
        absl::Status aborted = local_.status();
        if (!aborted.ok()) {
          done(aborted, Tensor(), false);
        } else if (!s.ok()) {
          done(absl::Status(s.code(), absl::StrCat("receiving tensor '", edge, "' from ", src_task,
                                                   ": ", s.message())),
               Tensor(), false);
        } else if (call->response.tensors.size() != 1) {
          done(absl::InternalError(absl::StrCat("RecvTensor from ", src_task, " returned ",
                                                call->response.tensors.size(), " tensors")),
               Tensor(), false);
        } else {
          done(absl::OkStatus(), call->response.tensors[0], call->response.proto.is_dead());
        }
      });
}

absl::Status WorkerRendezvous::Recv(const ParsedKey& key, const RecvOptions& options, Tensor* value,
                                    bool* is_dead) {
  if (TaskNameOf(key.src) == task_) return local_.Recv(key, options, value, is_dead);
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

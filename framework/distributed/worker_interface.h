// framework/distributed/worker_interface.h
//
// WorkerInterface: the worker service of one task, free of any transport. The Worker
// (worker.h) implements it in process; rpc/grpc_worker_client.h implements it over
// gRPC, and rpc/grpc_service.h serves a WorkerInterface to remote callers, so a test
// can run a whole cluster in one process or across processes with the same code.
//
// Every method is asynchronous: `done` is called exactly once, possibly on another
// thread, possibly before the method returns; `request` and `response` must stay
// alive until then. `options` may be null. Errors use canonical codes; ABORTED means
// the worker does not know the session or graph (it may have restarted) and the
// caller should re-create its session.
//
// WorkerCacheInterface maps a task name ("/job:ps/replica:0/task:0") to the
// WorkerInterface that reaches it.
//
// Thread safety: implementations are thread-safe.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_WORKER_INTERFACE_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_WORKER_INTERFACE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "framework/distributed/call_options.h"
#include "framework/distributed/tensor_wire.h"
#include "framework/protos/worker.pb.h"

namespace tandem {

using StatusCallback = std::function<void(const absl::Status&)>;

// Declares `virtual void NameAsync(CallOptions*, const WireMessage<proto::NameRequest>*,
// WireMessage<proto::NameResponse>*, StatusCallback)`; every RPC has this shape.
#define TANDEM_RPC_METHOD(Name)                                                                    \
  virtual void Name##Async(CallOptions* options, const WireMessage<proto::Name##Request>* request, \
                           WireMessage<proto::Name##Response>* response, StatusCallback done) = 0

// The override of TANDEM_RPC_METHOD(Name) in an implementation.
#define TANDEM_RPC_OVERRIDE(Name)                                                          \
  void Name##Async(CallOptions* options, const WireMessage<proto::Name##Request>* request, \
                   WireMessage<proto::Name##Response>* response, StatusCallback done) override

// The worker service's methods, listed once: X(Name) for each. Interface, server,
// in-process worker and gRPC client all expand this list.
//   GetStatus            this task's devices and their incarnations
//   RegisterGraph        builds the executor of one partition (one device of this task)
//   RunGraph             runs a registered partition for one step
//   RecvTensor           the value a _Send of this task made (or will make) under a key
//   CollectiveData       one piece of a collective, pushed to the member that needs it
//   CollectiveJoin       asks the group's leader (rank 0) to form the collective group
// clang-format off
#define TANDEM_WORKER_RPCS(X) \
  X(GetStatus)            \
  X(CreateWorkerSession)  \
  X(DeleteWorkerSession)  \
  X(RegisterGraph)        \
  X(DeregisterGraph)      \
  X(RunGraph)             \
  X(RecvTensor)           \
  X(CleanupGraph)         \
  X(CleanupAll)           \
  X(Shutdown)             \
  X(CollectiveData)       \
  X(CollectiveJoin)
// clang-format on

// Statement forms for expanding the lists inside a class.
#define TANDEM_DECLARE_RPC(Name) TANDEM_RPC_METHOD(Name);
#define TANDEM_OVERRIDE_RPC(Name) TANDEM_RPC_OVERRIDE(Name);

class WorkerInterface {
 public:
  virtual ~WorkerInterface() = default;
  TANDEM_WORKER_RPCS(TANDEM_DECLARE_RPC)
};

class WorkerCacheInterface {
 public:
  virtual ~WorkerCacheInterface() = default;
  // The worker of `task` (not owned; valid as long as the cache). NOT_FOUND when the
  // cluster has no such task.
  virtual absl::StatusOr<WorkerInterface*> GetWorker(const std::string& task) = 0;
  // Every task of the cluster, e.g. "/job:ps/replica:0/task:0", sorted.
  virtual std::vector<std::string> ListTasks() const = 0;
};

// Calls an asynchronous method and waits for it.
template <typename Service, typename Req, typename Resp>
absl::Status CallAndWait(Service* service,
                         void (Service::*method)(CallOptions*, const Req*, Resp*, StatusCallback),
                         const Req& request, Resp* response, CallOptions* options = nullptr) {
  absl::Notification done;
  absl::Status result;
  (service->*method)(options, &request, response, [&](const absl::Status& s) {
    result = s;
    done.Notify();
  });
  done.WaitForNotification();
  return result;
}

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_WORKER_INTERFACE_H_

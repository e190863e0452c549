// framework/distributed/worker_interface.h
//
// WorkerInterface: the worker service of one task, free of any transport. The Worker
// (worker.h) implements it in process; rpc/grpc_clients.h implements it over
// gRPC, and rpc/grpc_service.h serves a WorkerInterface to remote callers, so a test
// can run a whole cluster in one process or across processes with the same code.
//
// Every method is asynchronous: `done` is called exactly once, possibly on another
// thread, possibly before the method returns; `request` and `response` must stay
// alive until then. `options` may be null; a caller that gives up calls its
// StartCancel (the gRPC service does so for a remote caller that cancels, passes its
// deadline or drops its connection), and a method that waits (RunGraph, RecvTensor)
// then stops waiting and ends its step. Errors use canonical codes; ABORTED means
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

// The override of the interface method NameAsync in an implementation.
#define TANDEM_RPC_OVERRIDE(Name)                                                          \
  void Name##Async(CallOptions* options, const WireMessage<proto::Name##Request>* request, \
                   WireMessage<proto::Name##Response>* response, StatusCallback done) override

// The worker service's methods, listed once more: X(Name) for each, for the code that
// must handle every one alike (the gRPC service's handler table, the gRPC client's
// forwarding methods, overrides in implementations). WorkerInterface below declares
// and documents each; a method missing from either fails to compile.
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

// Statement form for expanding the lists inside a class.
#define TANDEM_OVERRIDE_RPC(Name) TANDEM_RPC_OVERRIDE(Name);

class WorkerInterface {
 public:
  virtual ~WorkerInterface() = default;

  // This task's devices, with their incarnations (a restarted task has new ones);
  // also the health probe of collectives and of the chief's liveness checks.
  virtual void GetStatusAsync(CallOptions* options,
                              const WireMessage<proto::GetStatusRequest>* request,
                              WireMessage<proto::GetStatusResponse>* response,
                              StatusCallback done) = 0;

  // Creates the worker session `session_handle` (a master session's partitions
  // and stateful kernels live in it).
  virtual void CreateWorkerSessionAsync(
      CallOptions* options, const WireMessage<proto::CreateWorkerSessionRequest>* request,
      WireMessage<proto::CreateWorkerSessionResponse>* response, StatusCallback done) = 0;

  // Drops a worker session and every partition registered in it.
  virtual void DeleteWorkerSessionAsync(
      CallOptions* options, const WireMessage<proto::DeleteWorkerSessionRequest>* request,
      WireMessage<proto::DeleteWorkerSessionResponse>* response, StatusCallback done) = 0;

  // Builds the executor of one partition (every node on one device of this task)
  // in a worker session; returns its graph handle.
  virtual void RegisterGraphAsync(CallOptions* options,
                                  const WireMessage<proto::RegisterGraphRequest>* request,
                                  WireMessage<proto::RegisterGraphResponse>* response,
                                  StatusCallback done) = 0;

  // Drops a registered partition.
  virtual void DeregisterGraphAsync(CallOptions* options,
                                    const WireMessage<proto::DeregisterGraphRequest>* request,
                                    WireMessage<proto::DeregisterGraphResponse>* response,
                                    StatusCallback done) = 0;

  // Runs a registered partition for one step: the request's tensors feed its _Arg
  // nodes, the response carries its _Retval values. ABORTED for an unknown session
  // or graph handle (this task restarted).
  virtual void RunGraphAsync(CallOptions* options,
                             const WireMessage<proto::RunGraphRequest>* request,
                             WireMessage<proto::RunGraphResponse>* response,
                             StatusCallback done) = 0;

  // The value a _Send of this task made (or will make) for `rendezvous_key` in a
  // step; large values come in chunks. With `more_keys`, the values of every key that
  // is sent by the time any one is (RecvTensorResponse::ready).
  virtual void RecvTensorAsync(CallOptions* options,
                               const WireMessage<proto::RecvTensorRequest>* request,
                               WireMessage<proto::RecvTensorResponse>* response,
                               StatusCallback done) = 0;

  // Ends a step on this task (drops its rendezvous), aborting it first when
  // `abort_code` is set.
  virtual void CleanupGraphAsync(CallOptions* options,
                                 const WireMessage<proto::CleanupGraphRequest>* request,
                                 WireMessage<proto::CleanupGraphResponse>* response,
                                 StatusCallback done) = 0;

  // Drops the resources (variables) of the named containers, or of every one.
  virtual void CleanupAllAsync(CallOptions* options,
                               const WireMessage<proto::CleanupAllRequest>* request,
                               WireMessage<proto::CleanupAllResponse>* response,
                               StatusCallback done) = 0;

  // Asks the server to stop serving (`trainer serve` then exits 0).
  virtual void ShutdownAsync(CallOptions* options,
                             const WireMessage<proto::ShutdownRequest>* request,
                             WireMessage<proto::ShutdownResponse>* response,
                             StatusCallback done) = 0;

  // One piece of a collective, pushed by the member that has it to the member
  // that needs it (collective/collective_executor.h), or a member's abort.
  virtual void CollectiveDataAsync(CallOptions* options,
                                   const WireMessage<proto::CollectiveDataRequest>* request,
                                   WireMessage<proto::CollectiveDataResponse>* response,
                                   StatusCallback done) = 0;

  // Asks this task, the collective group's leader (rank 0), to form the group;
  // answered once every member has asked.
  virtual void CollectiveJoinAsync(CallOptions* options,
                                   const WireMessage<proto::CollectiveJoinRequest>* request,
                                   WireMessage<proto::CollectiveJoinResponse>* response,
                                   StatusCallback done) = 0;
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

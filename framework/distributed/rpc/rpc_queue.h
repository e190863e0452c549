// framework/distributed/rpc/rpc_queue.h
//
// RpcQueue: one gRPC completion queue and the one thread that polls it, running each
// event's handler (RpcEvent::OnEvent) on that thread. tandem's servers (server_call.h)
// and clients (GrpcCall in grpc_util.h) use gRPC's asynchronous API through it rather
// than the callback API: gRPC 1.51 runs the callback API on two or more threads per
// process that hand the poller's role to each other at every event, a context switch
// each, while one thread that polls and runs the handlers switches only when it waits.
//
// ClientQueue() is the queue a process's client calls go through: the queue of a task
// server (RpcServer) still running in the process, so that a task polls with one
// thread, or, in a process without one, a queue of its own (ended once a task server
// starts and the calls on it are done).
//
// Thread safety: thread-safe. Handlers run on the queue's thread, one at a time, and
// must not block.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_RPC_RPC_QUEUE_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_RPC_RPC_QUEUE_H_

#include <memory>
#include <thread>

#include "grpcpp/completion_queue.h"

namespace tandem {

// What a tag on an RpcQueue points to.
class RpcEvent {
 public:
  // `ok` as gRPC reports the operation (false: it failed, or the queue is draining).
  virtual void OnEvent(bool ok) = 0;

 protected:
  ~RpcEvent() = default;
};

class RpcQueue {
 public:
  // Takes `cq` and starts the thread polling it. Every tag put on `cq` must be an
  // RpcEvent*.
  explicit RpcQueue(std::unique_ptr<grpc::CompletionQueue> cq);
  // Shuts the queue down: the thread delivers what is left (with ok = false for what
  // gRPC cancels) and ends. Waits for it unless called on it. A server using the queue
  // must have shut down first.
  ~RpcQueue();
  RpcQueue(const RpcQueue&) = delete;
  RpcQueue& operator=(const RpcQueue&) = delete;

  grpc::CompletionQueue* cq() const { return cq_; }

 private:
  grpc::CompletionQueue* const cq_;  // Deleted by the thread once drained.
  std::thread thread_;
};

// The queue for this process's client calls; hold it until the call's event has run.
std::shared_ptr<RpcQueue> ClientQueue();
// Offers a task server's queue for client calls while it lives (of those offered, the
// first still alive is used).
void OfferClientQueue(const std::shared_ptr<RpcQueue>& queue);

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_RPC_RPC_QUEUE_H_

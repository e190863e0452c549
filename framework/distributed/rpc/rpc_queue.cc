// framework/distributed/rpc/rpc_queue.cc: RpcQueue (rpc_queue.h).
#include "framework/distributed/rpc/rpc_queue.h"

#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"

namespace tandem {

RpcQueue::RpcQueue(std::unique_ptr<grpc::CompletionQueue> cq) : cq_(cq.release()) {
  CHECK(cq_ != nullptr);
  thread_ = std::thread([cq = cq_] {
    void* tag = nullptr;
    bool ok = false;
    while (cq->Next(&tag, &ok)) static_cast<RpcEvent*>(tag)->OnEvent(ok);
    delete cq;
  });
}

RpcQueue::~RpcQueue() {
  cq_->Shutdown();
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // The last call that held the queue ended on it.
  } else {
    thread_.join();
  }
}

namespace {

struct Queues {
  absl::Mutex mu;
  // Task servers' queues in the order offered; the first still alive is used.
  std::vector<std::weak_ptr<RpcQueue>> offered ABSL_GUARDED_BY(mu);
  // For a process without a task server. Dropped when one offers its queue: an idle
  // polling thread would still take the poller's role in turn.
  std::shared_ptr<RpcQueue> own ABSL_GUARDED_BY(mu);
};
Queues& ProcessQueues() {
  static Queues* queues = new Queues;  // Never destroyed.
  return *queues;
}

}  // namespace

std::shared_ptr<RpcQueue> ClientQueue() {
  Queues& q = ProcessQueues();
  absl::MutexLock lock(&q.mu);
  while (!q.offered.empty()) {
    if (std::shared_ptr<RpcQueue> offered = q.offered.front().lock()) return offered;
    q.offered.erase(q.offered.begin());
  }
  if (q.own == nullptr)
    q.own = std::make_shared<RpcQueue>(std::make_unique<grpc::CompletionQueue>());
  return q.own;
}

void OfferClientQueue(const std::shared_ptr<RpcQueue>& queue) {
  Queues& q = ProcessQueues();
  absl::MutexLock lock(&q.mu);
  q.offered.push_back(queue);
  q.own.reset();  // It ends once the calls on it have.
}

}  // namespace tandem

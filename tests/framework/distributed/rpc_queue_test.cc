// The process's client queue (rpc/rpc_queue.h): a task server's queue while one runs,
// so that a task's client calls and its served calls share one polling thread, a queue
// of the process's own without one; calls keep working across every change.
#include "framework/distributed/rpc/rpc_queue.h"

#include <chrono>
#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "framework/distributed/rpc/grpc_clients.h"
#include "framework/distributed/server.h"
#include "grpcpp/alarm.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

// The thread that runs events on `queue`.
std::thread::id QueueThread(const std::shared_ptr<RpcQueue>& queue) {
  struct Probe final : RpcEvent {
    void OnEvent(bool) override {
      thread = std::this_thread::get_id();
      ran.Notify();
    }
    std::thread::id thread;
    absl::Notification ran;
  } probe;
  grpc::Alarm alarm;
  alarm.Set(queue->cq(), std::chrono::system_clock::now(), &probe);
  EXPECT_TRUE(probe.ran.WaitForNotificationWithTimeout(absl::Seconds(10)));
  return probe.thread;
}

// GetStatus of the task at `address`; `done_on` gets the thread its reply ran on.
absl::Status GetStatus(const std::string& address, std::thread::id* done_on) {
  auto client = NewGrpcWorkerClient(address, {}, 1);
  if (!client.ok()) return client.status();
  WireMessage<proto::GetStatusRequest> req;
  WireMessage<proto::GetStatusResponse> resp;
  absl::Notification done;
  absl::Status result;
  (*client)->GetStatusAsync(nullptr, &req, &resp, [&](const absl::Status& s) {
    result = s;
    *done_on = std::this_thread::get_id();
    done.Notify();
  });
  if (!done.WaitForNotificationWithTimeout(absl::Seconds(30))) {
    return absl::DeadlineExceededError("no reply in 30 s");
  }
  return result;
}

TEST(RpcQueueTest, ClientCallsShareTheTaskServersThreadWhileOneRuns) {
  std::shared_ptr<RpcQueue> own = ClientQueue();  // No task server yet.
  const std::thread::id own_thread = QueueThread(own);
  EXPECT_NE(own_thread, std::this_thread::get_id());

  auto a = Server::CreateLocal();
  ASSERT_TRUE(a.ok()) << a.status();
  std::shared_ptr<RpcQueue> a_queue = ClientQueue();
  EXPECT_NE(a_queue.get(), own.get()) << "the task server's queue is not the one used";
  const std::thread::id a_thread = QueueThread(a_queue);
  EXPECT_NE(a_thread, own_thread);
  std::thread::id done_on;
  ASSERT_TRUE(GetStatus((*a)->address(), &done_on).ok());
  EXPECT_EQ(done_on, a_thread) << "the reply ran on another thread than the server's";
  own.reset();  // The process's own queue ends; nothing uses it.

  auto b = Server::CreateLocal();  // A second task server: the first is kept.
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(ClientQueue().get(), a_queue.get());
  ASSERT_TRUE(GetStatus((*b)->address(), &done_on).ok());
  EXPECT_EQ(done_on, a_thread);

  a_queue.reset();
  (*a)->Stop("test");
  a->reset();  // The first server ends: the second's queue takes over.
  std::shared_ptr<RpcQueue> b_queue = ClientQueue();
  const std::thread::id b_thread = QueueThread(b_queue);
  EXPECT_NE(b_thread, a_thread);
  ASSERT_TRUE(GetStatus((*b)->address(), &done_on).ok());
  EXPECT_EQ(done_on, b_thread);
  b_queue.reset();

  std::string b_address = (*b)->address();
  (*b)->Stop("test");
  b->reset();  // No task server left: a queue of the process's own again.
  std::shared_ptr<RpcQueue> again = ClientQueue();
  EXPECT_NE(QueueThread(again), std::this_thread::get_id());
  absl::Status gone = GetStatus(b_address, &done_on);
  EXPECT_FALSE(gone.ok()) << "a stopped server answered";
}

}  // namespace
}  // namespace tandem

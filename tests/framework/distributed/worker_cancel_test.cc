// A worker's steps end when their callers give up or their steps are cleaned up:
//   - a RunGraph whose caller cancels it, in process or over gRPC, or whose gRPC
//     deadline passes, stops its partition (here blocked in a _Recv that nothing
//     sends) and drops the step's rendezvous;
//   - a waiting RecvTensor whose gRPC caller cancels it ends its step;
//   - a RecvTensor or RunGraph of a step that was already cleaned up (by CleanupGraph
//     or a later RunGraph's cleanup_step_ids) is ABORTED at once and leaves no
//     rendezvous behind; a RecvTensor still waiting when its step is cleaned up is
//     answered.
// Every wait is bounded; the servers bind 127.0.0.1 on ephemeral ports.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "framework/distributed/rpc/grpc_clients.h"
#include "framework/distributed/server.h"
#include "framework/graph/scope.h"
#include "framework/ops/array_ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/def_of.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kPatience = absl::Seconds(30);

// One call in flight. Shared with its callback, so a callback that comes late (a
// failing test's teardown aborts every step) finds it alive.
template <typename Req, typename Resp>
struct Pending {
  WireMessage<Req> request;
  WireMessage<Resp> response;
  CallOptions options;
  absl::Notification done;
  absl::Status status;

  StatusCallback Callback(const std::shared_ptr<Pending>& self) {
    return [self](const absl::Status& s) {
      self->status = s;
      self->done.Notify();
    };
  }
  bool Wait() { return done.WaitForNotificationWithTimeout(kPatience); }
};
using PendingRun = Pending<proto::RunGraphRequest, proto::RunGraphResponse>;
using PendingRecv = Pending<proto::RecvTensorRequest, proto::RecvTensorResponse>;

// Polls `condition` until it holds or kPatience passes; returns whether it held.
template <typename F>
bool Eventually(F condition) {
  const absl::Time give_up = absl::Now() + kPatience;
  while (!condition()) {
    if (absl::Now() > give_up) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

class WorkerCancelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = Server::CreateLocal();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    worker_ = server_->worker();
    cpu_ = server_->devices()->devices()[0].get();
    auto client = NewGrpcWorkerClient(server_->address(), {}, 1);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);

    WireMessage<proto::CreateWorkerSessionRequest> create;
    WireMessage<proto::CreateWorkerSessionResponse> created;
    create.proto.set_session_handle("session");
    ASSERT_TRUE(
        CallAndWait(Local(), &WorkerInterface::CreateWorkerSessionAsync, create, &created).ok());
    // A partition blocked in a _Recv of a value that no partition ever sends.
    Scope root = Scope::NewRootScope();
    root.WithDevice(cpu_->name())
        .AddNode("_Recv", "recv", {},
                 {{"tensor_type", DType::kFloat},
                  {"tensor_name", std::string("never_sent")},
                  {"send_device", cpu_->name()},
                  {"send_device_incarnation", static_cast<int64_t>(cpu_->incarnation())},
                  {"recv_device", cpu_->name()}});
    blocked_graph_ = Register(root);
    Scope quick = Scope::NewRootScope();
    ops::Const(quick.WithDevice(cpu_->name()), 1.0f);
    quick_graph_ = Register(quick);
  }

  WorkerInterface* Local() { return worker_; }
  WorkerInterface* Remote() { return client_.get(); }

  std::string Register(const Scope& root) {
    WireMessage<proto::RegisterGraphRequest> req;
    WireMessage<proto::RegisterGraphResponse> resp;
    req.proto.set_session_handle("session");
    *req.proto.mutable_graph() = testing::DefOf(root);
    absl::Status s = CallAndWait(Local(), &WorkerInterface::RegisterGraphAsync, req, &resp);
    EXPECT_TRUE(s.ok()) << s;
    return resp.proto.graph_handle();
  }

  // Starts a RunGraph of `graph` for `step` on `via`.
  std::shared_ptr<PendingRun> StartRun(WorkerInterface* via, const std::string& graph, int64_t step,
                                       int64_t call_timeout_ms = 0) {
    auto run = std::make_shared<PendingRun>();
    run->request.proto.set_session_handle("session");
    run->request.proto.set_graph_handle(graph);
    run->request.proto.set_step_id(step);
    run->options.set_timeout_ms(call_timeout_ms);
    via->RunGraphAsync(&run->options, &run->request, &run->response, run->Callback(run));
    return run;
  }

  // Starts a RecvTensor of this task's value `name` in `step` on `via`.
  std::shared_ptr<PendingRecv> StartRecv(WorkerInterface* via, int64_t step,
                                         const std::string& name = "never_sent") {
    auto recv = std::make_shared<PendingRecv>();
    recv->request.proto.set_step_id(step);
    recv->request.proto.set_rendezvous_key(
        CreateRendezvousKey(cpu_->name(), cpu_->incarnation(), cpu_->name(), name));
    via->RecvTensorAsync(&recv->options, &recv->request, &recv->response, recv->Callback(recv));
    return recv;
  }

  absl::Status Cleanup(int64_t step) {
    WireMessage<proto::CleanupGraphRequest> req;
    WireMessage<proto::CleanupGraphResponse> resp;
    req.proto.set_step_id(step);
    return CallAndWait(Local(), &WorkerInterface::CleanupGraphAsync, req, &resp);
  }

  bool Idle() { return worker_->NumRunningGraphs() == 0 && worker_->NumLiveSteps() == 0; }

  std::unique_ptr<Server> server_;
  Worker* worker_ = nullptr;
  Device* cpu_ = nullptr;
  std::unique_ptr<GrpcWorkerClient> client_;
  std::string blocked_graph_;
  std::string quick_graph_;
};

TEST_F(WorkerCancelTest, RunGraphCancelledInProcessStopsItsStep) {
  auto run = StartRun(Local(), blocked_graph_, 11);
  EXPECT_EQ(worker_->NumRunningGraphs(), 1);
  EXPECT_EQ(worker_->NumLiveSteps(), 1);
  EXPECT_FALSE(run->done.HasBeenNotified()) << run->status;

  run->options.StartCancel();
  ASSERT_TRUE(run->Wait()) << "the cancelled RunGraph never ended";
  // The step ended: its _Recv failed with ABORTED, the status every waiter on an ended
  // step sees (other tasks' partitions treat it as recoverable).
  EXPECT_EQ(run->status.code(), absl::StatusCode::kAborted) << run->status;
  EXPECT_THAT(run->status.message(), HasSubstr("step 11"));
  EXPECT_EQ(worker_->NumRunningGraphs(), 0);
  EXPECT_EQ(worker_->NumLiveSteps(), 0);
}

TEST_F(WorkerCancelTest, RunGraphAlreadyCancelledFailsAtOnce) {
  auto run = std::make_shared<PendingRun>();
  run->options.StartCancel();
  run->request.proto.set_session_handle("session");
  run->request.proto.set_graph_handle(quick_graph_);
  run->request.proto.set_step_id(12);
  worker_->RunGraphAsync(&run->options, &run->request, &run->response, run->Callback(run));
  ASSERT_TRUE(run->Wait());
  EXPECT_EQ(run->status.code(), absl::StatusCode::kCancelled) << run->status;
  EXPECT_TRUE(Idle());
}

// Over gRPC the worker sees what the client does: a cancellation, or a deadline that
// passes while the partition waits.
TEST_F(WorkerCancelTest, RunGraphOverGrpcEndsWhenItsClientGivesUp) {
  for (bool deadline : {false, true}) {
    SCOPED_TRACE(deadline ? "deadline" : "cancel");
    const int64_t step = deadline ? 14 : 13;
    auto run = StartRun(Remote(), blocked_graph_, step, deadline ? 300 : 0);
    ASSERT_TRUE(Eventually([&] { return worker_->NumRunningGraphs() == 1; }));
    if (!deadline) run->options.StartCancel();
    ASSERT_TRUE(run->Wait());
    EXPECT_EQ(run->status.code(),
              deadline ? absl::StatusCode::kDeadlineExceeded : absl::StatusCode::kCancelled)
        << run->status;
    // The server's side: the partition stopped and the step's rendezvous is gone.
    EXPECT_TRUE(Eventually([&] { return Idle(); }))
        << worker_->NumRunningGraphs() << " partitions still run, " << worker_->NumLiveSteps()
        << " steps live";
  }
}

TEST_F(WorkerCancelTest, RecvTensorOverGrpcCancelledByItsClientEndsItsStep) {
  auto recv = StartRecv(Remote(), 21);
  ASSERT_TRUE(Eventually([&] { return worker_->NumLiveSteps() == 1; }));
  recv->options.StartCancel();
  ASSERT_TRUE(recv->Wait());
  EXPECT_EQ(recv->status.code(), absl::StatusCode::kCancelled) << recv->status;
  EXPECT_TRUE(Eventually([&] { return worker_->NumLiveSteps() == 0; }));
  // The step has ended here: a later call of it is refused at once.
  auto late = StartRecv(Remote(), 21);
  ASSERT_TRUE(late->Wait());
  EXPECT_EQ(late->status.code(), absl::StatusCode::kAborted) << late->status;
  EXPECT_EQ(worker_->NumLiveSteps(), 0);
}

TEST_F(WorkerCancelTest, RecvTensorAfterCleanupGraphIsAbortedAtOnce) {
  ASSERT_TRUE(Cleanup(31).ok());
  for (WorkerInterface* via : {Local(), Remote()}) {
    auto recv = StartRecv(via, 31);
    ASSERT_TRUE(recv->Wait()) << "a RecvTensor of a cleaned-up step waits";
    EXPECT_EQ(recv->status.code(), absl::StatusCode::kAborted) << recv->status;
    EXPECT_THAT(recv->status.message(), HasSubstr("step 31 has already ended"));
    EXPECT_THAT(recv->status.message(), HasSubstr("never_sent"));
    EXPECT_EQ(worker_->NumLiveSteps(), 0);
  }
  // A RunGraph that arrives after its step's cleanup does not run it.
  auto run = StartRun(Local(), blocked_graph_, 31);
  ASSERT_TRUE(run->Wait());
  EXPECT_EQ(run->status.code(), absl::StatusCode::kAborted) << run->status;
  EXPECT_TRUE(Idle());
}

TEST_F(WorkerCancelTest, CleanupStepIdsOfALaterRunGraphEndStepsToo) {
  auto run = std::make_shared<PendingRun>();
  run->request.proto.set_session_handle("session");
  run->request.proto.set_graph_handle(quick_graph_);
  run->request.proto.set_step_id(42);
  run->request.proto.add_cleanup_step_ids(41);
  worker_->RunGraphAsync(&run->options, &run->request, &run->response, run->Callback(run));
  ASSERT_TRUE(run->Wait());
  ASSERT_TRUE(run->status.ok()) << run->status;
  auto recv = StartRecv(Local(), 41);
  ASSERT_TRUE(recv->Wait());
  EXPECT_EQ(recv->status.code(), absl::StatusCode::kAborted) << recv->status;
  EXPECT_EQ(worker_->NumLiveSteps(), 1);  // Step 42 until a cleanup names it.
  ASSERT_TRUE(Cleanup(42).ok());
  EXPECT_TRUE(Idle());
}

// A RecvTensor still waiting when its step is cleaned up is answered, not left to
// wait until the server stops.
TEST_F(WorkerCancelTest, CleanupGraphAnswersAWaitingRecvTensor) {
  auto recv = StartRecv(Remote(), 51);
  ASSERT_TRUE(Eventually([&] { return worker_->NumLiveSteps() == 1; }));
  ASSERT_TRUE(Cleanup(51).ok());
  ASSERT_TRUE(recv->Wait()) << "the RecvTensor of a cleaned-up step still waits";
  EXPECT_EQ(recv->status.code(), absl::StatusCode::kAborted) << recv->status;
  EXPECT_THAT(recv->status.message(), HasSubstr("step 51 has ended"));
  EXPECT_EQ(worker_->NumLiveSteps(), 0);
}

}  // namespace
}  // namespace tandem

// Rendezvous keys and LocalRendezvous: either order of Send and Recv, aborts that
// release waiting receivers, timeouts that withdraw a receiver, malformed keys, and
// the _Send/_Recv kernels run by two executors sharing one rendezvous.
#include "framework/runtime/rendezvous.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/math_ops.h"
#include "framework/runtime/executor.h"
#include "framework/runtime/runtime_kernels.h"
#include "framework/runtime/subgraph.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

constexpr char kPs[] = "/job:ps/replica:0/task:0/device:CPU:0";
constexpr char kWorker[] = "/job:worker/replica:0/task:1/device:CPU:0";

std::vector<float> Values(const Tensor& t) {
  auto f = t.flat<float>();
  return {f.begin(), f.end()};
}

ParsedKey Key(absl::string_view name) {
  auto k = ParseRendezvousKey(CreateRendezvousKey(kPs, 0x75bcd15, kWorker, name));
  EXPECT_TRUE(k.ok()) << k.status();
  return *k;
}

TEST(RendezvousKeyTest, RoundTripsInTensorFlowsFormat) {
  std::string key = CreateRendezvousKey(kPs, 0x75bcd15, kWorker, "edge_3_w", 0, 2);
  EXPECT_EQ(key, absl::StrCat(kPs, ";00000000075bcd15;", kWorker, ";edge_3_w;0:2"));
  auto parsed = ParseRendezvousKey(key);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->src_device, kPs);
  EXPECT_EQ(parsed->src_incarnation, 0x75bcd15u);
  EXPECT_EQ(parsed->dst_device, kWorker);
  EXPECT_EQ(parsed->edge_name, "edge_3_w");
  EXPECT_EQ(parsed->frame_id, 0);
  EXPECT_EQ(parsed->iter_id, 2);
  EXPECT_EQ(*parsed->dst.task, 1);
}

TEST(RendezvousKeyTest, MalformedKeysAreRejectedWithTheReason) {
  const std::string ps = kPs, w = kWorker;
  struct Case {
    std::string key;
    std::string why;
  } cases[] = {
      {"", "parts, not 5"},
      {ps + ";01;" + w + ";t", "parts, not 5"},
      {ps + ";01;" + w + ";t;0:0;extra", "parts, not 5"},
      {"/job:ps/task:0;01;" + w + ";t;0:0", "not a full device name"},
      {"cpu0;01;" + w + ";t;0:0", "source device"},
      {ps + ";xyz;" + w + ";t;0:0", "incarnation 'xyz'"},
      {ps + ";;" + w + ";t;0:0", "incarnation"},
      {ps + ";00000000000000001;" + w + ";t;0:0", "1-16 hex digits"},
      {ps + ";01;/job:worker;t;0:0", "destination device"},
      {ps + ";01;" + w + ";;0:0", "empty tensor name"},
      {ps + ";01;" + w + ";t;0", "frame and iteration"},
      {ps + ";01;" + w + ";t;a:0", "frame and iteration"},
      {ps + ";01;" + w + ";t;0:-1", "frame and iteration"},
  };
  for (const Case& c : cases) {
    auto parsed = ParseRendezvousKey(c.key);
    ASSERT_FALSE(parsed.ok()) << c.key;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << c.key;
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.why)) << c.key;
    EXPECT_THAT(parsed.status().message(), HasSubstr("malformed rendezvous key")) << c.key;
  }
}

TEST(LocalRendezvousTest, SendBeforeRecv) {
  LocalRendezvous r;
  ASSERT_TRUE(r.Send(Key("a"), Tensor::Scalar<float>(3.0f), false).ok());
  Tensor v;
  bool dead = true;
  ASSERT_TRUE(r.Recv(Key("a"), {}, &v, &dead).ok());
  EXPECT_EQ(v.scalar<float>(), 3.0f);
  EXPECT_FALSE(dead);
}

TEST(LocalRendezvousTest, RecvBeforeSendWaits) {
  LocalRendezvous r;
  absl::Notification got;
  float value = 0;
  r.RecvAsync(Key("a"), [&](const absl::Status& s, const Tensor& t, bool) {
    EXPECT_TRUE(s.ok()) << s;
    value = t.scalar<float>();
    got.Notify();
  });
  EXPECT_FALSE(got.HasBeenNotified());
  std::thread sender(
      [&] { ASSERT_TRUE(r.Send(Key("a"), Tensor::Scalar<float>(5.0f), false).ok()); });
  got.WaitForNotification();
  sender.join();
  EXPECT_EQ(value, 5.0f);
}

TEST(LocalRendezvousTest, BlockingRecvGetsALaterSend) {
  LocalRendezvous r;
  std::thread sender([&] {
    absl::SleepFor(absl::Milliseconds(20));
    ASSERT_TRUE(r.Send(Key("b"), Tensor::Scalar<int32_t>(7), false).ok());
  });
  Tensor v;
  ASSERT_TRUE(r.Recv(Key("b"), {.timeout_micros = 10'000'000}, &v, nullptr).ok());
  sender.join();
  EXPECT_EQ(v.scalar<int32_t>(), 7);
}

TEST(LocalRendezvousTest, KeysAreIndependent) {
  LocalRendezvous r;
  ASSERT_TRUE(r.Send(Key("x"), Tensor::Scalar<float>(1.0f), false).ok());
  ASSERT_TRUE(r.Send(Key("y"), Tensor::Scalar<float>(2.0f), false).ok());
  Tensor x, y;
  ASSERT_TRUE(r.Recv(Key("y"), {}, &y, nullptr).ok());
  ASSERT_TRUE(r.Recv(Key("x"), {}, &x, nullptr).ok());
  EXPECT_EQ(x.scalar<float>(), 1.0f);
  EXPECT_EQ(y.scalar<float>(), 2.0f);
}

TEST(LocalRendezvousTest, DoubleSendIsAnError) {
  LocalRendezvous r;
  ASSERT_TRUE(r.Send(Key("a"), Tensor::Scalar<float>(1.0f), false).ok());
  absl::Status s = r.Send(Key("a"), Tensor::Scalar<float>(2.0f), false);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("sent twice"));
  EXPECT_THAT(s.message(), HasSubstr("edge"));
  // Still an error after the first value was received.
  Tensor v;
  ASSERT_TRUE(r.Recv(Key("a"), {}, &v, nullptr).ok());
  EXPECT_FALSE(r.Send(Key("a"), Tensor::Scalar<float>(2.0f), false).ok());
}

TEST(LocalRendezvousTest, AbortFailsWaitingAndLaterCallsWithItsStatus) {
  LocalRendezvous r;
  std::atomic<int> failed{0};
  for (const char* name : {"a", "b"}) {
    r.RecvAsync(Key(name), [&](const absl::Status& s, const Tensor&, bool) {
      EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
      EXPECT_THAT(s.message(), HasSubstr("ps task 0 died"));
      ++failed;
    });
  }
  Tensor v;
  absl::Status blocked;
  std::thread receiver([&] { blocked = r.Recv(Key("c"), {}, &v, nullptr); });
  absl::SleepFor(absl::Milliseconds(10));
  r.StartAbort(absl::UnavailableError("ps task 0 died"));
  receiver.join();
  EXPECT_EQ(failed.load(), 2);
  EXPECT_EQ(blocked.code(), absl::StatusCode::kUnavailable);
  // Later calls fail the same way; a second abort does not replace the first status.
  r.StartAbort(absl::CancelledError("second"));
  EXPECT_EQ(r.Send(Key("d"), Tensor::Scalar<float>(1.0f), false).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(r.Recv(Key("d"), {}, &v, nullptr).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
}

TEST(LocalRendezvousTest, RecvTimesOutAndIsWithdrawn) {
  LocalRendezvous r;
  Tensor v;
  absl::Status s = r.Recv(Key("late"), {.timeout_micros = 20'000}, &v, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("late"));
  EXPECT_THAT(s.message(), HasSubstr(kPs));
  // The timed-out receiver did not swallow the value: a new Recv gets it.
  ASSERT_TRUE(r.Send(Key("late"), Tensor::Scalar<float>(4.0f), false).ok());
  ASSERT_TRUE(r.Recv(Key("late"), {.timeout_micros = 1'000'000}, &v, nullptr).ok());
  EXPECT_EQ(v.scalar<float>(), 4.0f);
}

TEST(LocalRendezvousTest, DestroyingCancelsPendingReceivers) {
  absl::Status seen;
  {
    LocalRendezvous r;
    r.RecvAsync(Key("a"), [&](const absl::Status& s, const Tensor&, bool) { seen = s; });
  }
  EXPECT_EQ(seen.code(), absl::StatusCode::kCancelled);
}

TEST(LocalRendezvousTest, ManyConcurrentPairs) {
  LocalRendezvous r;
  constexpr int kN = 200;
  std::vector<std::thread> threads;
  std::atomic<int> sum{0};
  for (int i = 0; i < kN; ++i) {
    threads.emplace_back([&, i] {
      Tensor v;
      ASSERT_TRUE(
          r.Recv(Key(absl::StrCat("t", i)), {.timeout_micros = 10'000'000}, &v, nullptr).ok());
      sum += v.scalar<int32_t>();
    });
    threads.emplace_back([&, i] {
      ASSERT_TRUE(r.Send(Key(absl::StrCat("t", i)), Tensor::Scalar<int32_t>(i), false).ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(sum.load(), kN * (kN - 1) / 2);
}

// _Send and _Recv kernels: a producer graph and a consumer graph, run by two
// executors concurrently on one rendezvous.
std::unique_ptr<Executor> MakeExecutor(const Scope& root, Device* device,
                                       std::vector<std::string> fetches) {
  EXPECT_TRUE(root.ok()) << root.status();
  std::vector<std::string> targets;
  for (const auto& n : root.graph()->nodes()) targets.push_back(n->name());
  auto sub = BuildExecutableGraph(*root.graph(), {}, fetches, targets);
  EXPECT_TRUE(sub.ok()) << sub.status();
  auto exec = Executor::Create(std::move(*sub), device, KernelRegistry::Global());
  EXPECT_TRUE(exec.ok()) << exec.status();
  return std::move(*exec);
}

AttrMap EdgeAttrs(const Device& src, const Device& dst, const std::string& name) {
  return {{"tensor_name", name},
          {"send_device", src.name()},
          {"send_device_incarnation", static_cast<int64_t>(src.incarnation())},
          {"recv_device", dst.name()}};
}

TEST(SendRecvKernelsTest, TwoExecutorsExchangeTensorsThroughOneRendezvous) {
  EnsureKernels();
  Device ps(kPs, kDeviceCpu), worker(kWorker, kDeviceCpu);
  Scope a = Scope::NewRootScope();
  Output c = ops::Const(a, Tensor::FromVector<float>({1, 2, 3}, TensorShape({3})));
  AttrMap send_attrs = EdgeAttrs(ps, worker, "edge_c");
  send_attrs["T"] = DType::kFloat;
  a.AddNode("_Send", "send", {c}, send_attrs);
  Scope b = Scope::NewRootScope();
  AttrMap recv_attrs = EdgeAttrs(ps, worker, "edge_c");
  recv_attrs["tensor_type"] = DType::kFloat;
  Node* recv = b.AddNode("_Recv", "recv", {}, recv_attrs);
  ASSERT_NE(recv, nullptr) << b.status();
  Output doubled = ops::Add(b, Output(recv, 0), Output(recv, 0));

  auto producer = MakeExecutor(a, &ps, {});
  auto consumer = MakeExecutor(b, &worker, {doubled.name()});
  for (int step = 0; step < 3; ++step) {
    LocalRendezvous r;
    std::vector<Tensor> rets;
    ExecutorArgs ca;
    ca.rendezvous = &r;
    ca.retvals = &rets;
    absl::Status consumer_status;
    // The consumer starts first and waits without holding a thread.
    std::thread t([&] { consumer_status = consumer->Run(ca); });
    ExecutorArgs pa;
    pa.rendezvous = &r;
    ASSERT_TRUE(producer->Run(pa).ok());
    t.join();
    ASSERT_TRUE(consumer_status.ok()) << consumer_status;
    ASSERT_EQ(rets.size(), 1u);
    EXPECT_EQ(Values(rets[0]), (std::vector<float>{2, 4, 6}));
  }

  // Without a rendezvous both fail cleanly; an aborted rendezvous fails the Recv.
  ExecutorArgs none;
  absl::Status s = producer->Run(none);
  EXPECT_THAT(s.message(), HasSubstr("no rendezvous"));
  std::vector<Tensor> rets;
  none.retvals = &rets;
  EXPECT_THAT(consumer->Run(none).message(), HasSubstr("no rendezvous"));
  LocalRendezvous aborted;
  aborted.StartAbort(absl::AbortedError("peer failed"));
  ExecutorArgs ab;
  ab.rendezvous = &aborted;
  ab.retvals = &rets;
  EXPECT_EQ(consumer->Run(ab).code(), absl::StatusCode::kAborted);
}

TEST(SendRecvKernelsTest, BadEdgeAttrsFailAtSetup) {
  EnsureKernels();
  Device worker(kWorker, kDeviceCpu);
  Scope b = Scope::NewRootScope();
  b.AddNode("_Recv", "recv", {},
            {{"tensor_type", DType::kFloat},
             {"tensor_name", std::string("t")},
             {"send_device", std::string("/job:ps")},
             {"recv_device", std::string(kWorker)}});
  ASSERT_TRUE(b.ok()) << b.status();
  auto sub = BuildExecutableGraph(*b.graph(), {}, {}, {"recv"});
  ASSERT_TRUE(sub.ok()) << sub.status();
  auto exec = Executor::Create(std::move(*sub), &worker, KernelRegistry::Global());
  ASSERT_FALSE(exec.ok());
  EXPECT_THAT(exec.status().message(), HasSubstr("recv"));
  EXPECT_THAT(exec.status().message(), HasSubstr("not a full device name"));
}

}  // namespace
}  // namespace tandem

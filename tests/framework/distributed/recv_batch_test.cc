// Receives of one step from one task that start in one burst (RecvBatching) travel in
// one RecvTensor call that names every key. The producer answers once any of them is
// sent, with all that are sent by then, and keeps the others for the next call:
//   - over gRPC against a real server, the values (one of them chunked) arrive, and
//     the calls are one for the burst plus one for what it did not answer;
//   - the server side (WorkerRendezvous::RecvLocalAnyAsync) delivers every value
//     exactly once while sends race with the calls, and fails a call on abort;
//   - a call naming one key twice, or too many keys, is refused.
// The server binds 127.0.0.1 on a free port; every wait is bounded.
#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "framework/distributed/rpc/grpc_clients.h"
#include "framework/distributed/worker_rendezvous.h"
#include "framework/graph/scope.h"
#include "framework/ops/array_ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/distributed/start_cluster.h"
#include "tests/util/def_of.h"
#include "tests/util/one_worker_cache.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kClientTask[] = "/job:worker/replica:0/task:0";
constexpr char kClientDevice[] = "/job:worker/replica:0/task:0/device:CPU:0";
constexpr absl::Duration kPatience = absl::Seconds(30);

// Forwards to `inner` and records how many keys each RecvTensor call named.
class CountingWorker : public WorkerInterface {
 public:
  explicit CountingWorker(WorkerInterface* inner) : inner_(inner) {}

  void RecvTensorAsync(CallOptions* options, const WireMessage<proto::RecvTensorRequest>* request,
                       WireMessage<proto::RecvTensorResponse>* response,
                       StatusCallback done) override {
    {
      absl::MutexLock lock(&mu_);
      if (request->proto.offset() == 0)
        keys_per_call_.push_back(1 + request->proto.more_keys_size());
    }
    inner_->RecvTensorAsync(options, request, response, std::move(done));
  }
#define TANDEM_FORWARD(Name) \
  TANDEM_RPC_OVERRIDE(Name) { inner_->Name##Async(options, request, response, std::move(done)); }
  TANDEM_FORWARD(GetStatus)
  TANDEM_FORWARD(CreateWorkerSession)
  TANDEM_FORWARD(DeleteWorkerSession)
  TANDEM_FORWARD(RegisterGraph)
  TANDEM_FORWARD(DeregisterGraph)
  TANDEM_FORWARD(RunGraph)
  TANDEM_FORWARD(CleanupGraph)
  TANDEM_FORWARD(CleanupAll)
  TANDEM_FORWARD(Shutdown)
  TANDEM_FORWARD(CollectiveData)
  TANDEM_FORWARD(CollectiveJoin)
#undef TANDEM_FORWARD

  // Keys named by each first call for a tensor (chunk calls after it not counted).
  std::vector<int> keys_per_call() {
    absl::MutexLock lock(&mu_);
    return keys_per_call_;
  }

 private:
  WorkerInterface* const inner_;
  absl::Mutex mu_;
  std::vector<int> keys_per_call_ ABSL_GUARDED_BY(mu_);
};

struct Received {
  absl::Notification done;
  absl::Status status;
  Tensor value;
  std::atomic<int> calls{0};
};

Rendezvous::DoneCallback Into(const std::shared_ptr<Received>& r) {
  return [r](const absl::Status& s, const Tensor& v, bool) {
    if (r->calls.fetch_add(1) > 0) return;
    r->status = s;
    r->value = v;
    r->done.Notify();
  };
}

std::vector<float> Floats(const Tensor& t) {
  auto f = t.flat<float>();
  return {f.begin(), f.end()};
}

class RecvBatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Chunks of 64 bytes: the 100-float "big" goes in 7 calls.
    servers_ = testing::StartCluster({{"ps", 1}}, /*recv_chunk_bytes=*/64);
    ps_ = servers_[0].get();
    cpu_ = ps_->devices()->devices()[0].get();
    auto client = NewGrpcWorkerClient(ps_->address(), {}, 1);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
    counting_ = std::make_unique<CountingWorker>(client_.get());
    WireMessage<proto::CreateWorkerSessionRequest> create;
    WireMessage<proto::CreateWorkerSessionResponse> created;
    create.proto.set_session_handle("session");
    ASSERT_TRUE(
        CallAndWait(Remote(), &WorkerInterface::CreateWorkerSessionAsync, create, &created).ok());
  }

  // Registers a partition on the ps that sends each of `values` to the client as its
  // name.
  std::string RegisterSends(const std::vector<std::pair<std::string, Tensor>>& values) {
    Scope root = Scope::NewRootScope().WithDevice(cpu_->name());
    for (const auto& [name, value] : values) {
      Output v = ops::Const(root, value);
      root.AddNode("_Send", "send_" + name, {v},
                   {{"T", value.dtype()},
                    {"tensor_name", name},
                    {"send_device", cpu_->name()},
                    {"send_device_incarnation", static_cast<int64_t>(cpu_->incarnation())},
                    {"recv_device", std::string(kClientDevice)}});
    }
    WireMessage<proto::RegisterGraphRequest> req;
    WireMessage<proto::RegisterGraphResponse> resp;
    req.proto.set_session_handle("session");
    *req.proto.mutable_graph() = testing::DefOf(root);
    absl::Status s = CallAndWait(Remote(), &WorkerInterface::RegisterGraphAsync, req, &resp);
    EXPECT_TRUE(s.ok()) << s;
    return resp.proto.graph_handle();
  }

  absl::Status Run(const std::string& graph, int64_t step) {
    WireMessage<proto::RunGraphRequest> req;
    WireMessage<proto::RunGraphResponse> resp;
    req.proto.set_session_handle("session");
    req.proto.set_graph_handle(graph);
    req.proto.set_step_id(step);
    return CallAndWait(Remote(), &WorkerInterface::RunGraphAsync, req, &resp);
  }

  WorkerInterface* Remote() { return client_.get(); }

  ParsedKey Key(const std::string& name) {
    auto key = ParseRendezvousKey(
        CreateRendezvousKey(cpu_->name(), cpu_->incarnation(), kClientDevice, name));
    EXPECT_TRUE(key.ok()) << key.status();
    return *key;
  }

  std::vector<std::unique_ptr<Server>> servers_;
  Server* ps_ = nullptr;
  Device* cpu_ = nullptr;
  std::unique_ptr<GrpcWorkerClient> client_;
  std::unique_ptr<CountingWorker> counting_;
};

TEST_F(RecvBatchTest, ABurstIsOneCallAndWhatItMissedIsAskedForAgain) {
  std::vector<float> big(100);
  for (int i = 0; i < 100; ++i) big[i] = 0.5f * i;
  const std::string first =
      RegisterSends({{"a", Tensor::Scalar<float>(1.0f)},
                     {"big", Tensor::FromVector<float>(big, TensorShape({100}))}});
  const std::string later = RegisterSends({{"c", Tensor::Scalar<float>(3.0f)}});
  const int64_t step = 7;
  ASSERT_TRUE(Run(first, step).ok());  // "a" and "big" wait in the ps's step.

  testing::OneWorkerCache cache(counting_.get());
  WorkerRendezvous client(kClientTask, step, &cache);
  auto a = std::make_shared<Received>(), b = std::make_shared<Received>(),
       c = std::make_shared<Received>();
  client.BeginRecvBatch();
  client.RecvAsync(Key("a"), Into(a));
  client.RecvAsync(Key("big"), Into(b));
  client.RecvAsync(Key("c"), Into(c));
  EXPECT_TRUE(counting_->keys_per_call().empty());  // Held until the burst ends.
  client.EndRecvBatch();

  ASSERT_TRUE(a->done.WaitForNotificationWithTimeout(kPatience));
  ASSERT_TRUE(b->done.WaitForNotificationWithTimeout(kPatience));
  ASSERT_TRUE(a->status.ok()) << a->status;
  ASSERT_TRUE(b->status.ok()) << b->status;
  EXPECT_EQ(a->value.scalar<float>(), 1.0f);
  EXPECT_EQ(Floats(b->value), big);  // Its first chunk came in the batch, the rest alone.
  EXPECT_FALSE(c->done.HasBeenNotified());

  ASSERT_TRUE(Run(later, step).ok());
  ASSERT_TRUE(c->done.WaitForNotificationWithTimeout(kPatience));
  ASSERT_TRUE(c->status.ok()) << c->status;
  EXPECT_EQ(c->value.scalar<float>(), 3.0f);
  // One call for the burst (answered with "a" and "big"), one for "c" alone.
  EXPECT_THAT(counting_->keys_per_call(), ElementsAre(3, 1));
  EXPECT_EQ(a->calls + b->calls + c->calls, 3);
}

TEST_F(RecvBatchTest, ReceivesOutsideABurstGoOneByOne) {
  const std::string sends =
      RegisterSends({{"a", Tensor::Scalar<float>(1.0f)}, {"b", Tensor::Scalar<float>(2.0f)}});
  ASSERT_TRUE(Run(sends, 3).ok());
  testing::OneWorkerCache cache(counting_.get());
  WorkerRendezvous client(kClientTask, 3, &cache);
  auto a = std::make_shared<Received>(), b = std::make_shared<Received>();
  client.RecvAsync(Key("a"), Into(a));
  client.RecvAsync(Key("b"), Into(b));
  ASSERT_TRUE(a->done.WaitForNotificationWithTimeout(kPatience));
  ASSERT_TRUE(b->done.WaitForNotificationWithTimeout(kPatience));
  EXPECT_EQ(b->value.scalar<float>(), 2.0f);
  EXPECT_THAT(counting_->keys_per_call(), ElementsAre(1, 1));
}

TEST_F(RecvBatchTest, ACallNamingAKeyTwiceOrTooManyKeysIsRefused) {
  WireMessage<proto::RecvTensorRequest> req;
  WireMessage<proto::RecvTensorResponse> resp;
  req.proto.set_step_id(1);
  req.proto.set_rendezvous_key(Key("a").full_key);
  req.proto.add_more_keys(Key("b").full_key);
  req.proto.add_more_keys(Key("a").full_key);
  absl::Status twice = CallAndWait(Remote(), &WorkerInterface::RecvTensorAsync, req, &resp);
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument) << twice;
  EXPECT_THAT(twice.message(), HasSubstr("twice for 'a'"));
  req.proto.clear_more_keys();
  for (int i = 0; i < 5000; ++i) req.proto.add_more_keys(Key(absl::StrCat("k", i)).full_key);
  absl::Status many = CallAndWait(Remote(), &WorkerInterface::RecvTensorAsync, req, &resp);
  EXPECT_EQ(many.code(), absl::StatusCode::kInvalidArgument) << many;
  EXPECT_THAT(many.message(), HasSubstr("at most 4096 keys"));
}

// The producer's side: sends race with repeated calls for whatever is still missing;
// every value comes out exactly once, and each call has at least one.
TEST(RecvLocalAnyTest, EveryValueComesOutOnceWhileSendsRace) {
  testing::OneWorkerCache cache(nullptr);
  for (int round = 0; round < 20; ++round) {
    WorkerRendezvous ps("/job:ps/replica:0/task:0", 1, &cache);
    const int n = 16;
    std::vector<ParsedKey> keys;
    for (int i = 0; i < n; ++i) {
      auto key = ParseRendezvousKey(CreateRendezvousKey("/job:ps/replica:0/task:0/device:CPU:0", 1,
                                                        kClientDevice, absl::StrCat("t", i)));
      ASSERT_TRUE(key.ok());
      keys.push_back(*key);
    }
    std::thread sender([&] {
      std::mt19937 rng(round);
      std::vector<int> order(n);
      for (int i = 0; i < n; ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), rng);
      for (int i : order) {
        if (rng() % 2) std::this_thread::yield();
        ASSERT_TRUE(ps.Send(keys[i], Tensor::Scalar<float>(static_cast<float>(i)), false).ok());
      }
    });
    std::vector<int> got(n, 0);
    std::vector<int> missing(n);
    for (int i = 0; i < n; ++i) missing[i] = i;
    int calls = 0;
    while (!missing.empty() && calls < 10 * n) {
      ++calls;
      std::vector<ParsedKey> ask;
      for (int i : missing) ask.push_back(keys[i]);
      absl::Notification answered;
      absl::Status status;
      std::vector<WorkerRendezvous::Ready> ready;
      ps.RecvLocalAnyAsync(ask, [&](const absl::Status& s, std::vector<WorkerRendezvous::Ready> r) {
        status = s;
        ready = std::move(r);
        answered.Notify();
      });
      ASSERT_TRUE(answered.WaitForNotificationWithTimeout(kPatience));
      ASSERT_TRUE(status.ok()) << status;
      ASSERT_FALSE(ready.empty());
      std::vector<int> still;
      std::vector<bool> answered_now(ask.size(), false);
      for (const auto& r : ready) {
        const int k = missing[r.index];
        EXPECT_EQ(r.value.scalar<float>(), static_cast<float>(k));
        ++got[k];
        answered_now[r.index] = true;
      }
      for (size_t j = 0; j < ask.size(); ++j) {
        if (!answered_now[j]) still.push_back(missing[j]);
      }
      missing = std::move(still);
    }
    sender.join();
    EXPECT_TRUE(missing.empty());
    for (int i = 0; i < n; ++i) EXPECT_EQ(got[i], 1) << "value " << i << " round " << round;
  }
}

TEST(RecvLocalAnyTest, AnAbortFailsTheCallOnce) {
  testing::OneWorkerCache cache(nullptr);
  WorkerRendezvous ps("/job:ps/replica:0/task:0", 1, &cache);
  std::vector<ParsedKey> keys;
  for (const char* name : {"x", "y"}) {
    auto key = ParseRendezvousKey(
        CreateRendezvousKey("/job:ps/replica:0/task:0/device:CPU:0", 1, kClientDevice, name));
    ASSERT_TRUE(key.ok());
    keys.push_back(*key);
  }
  std::atomic<int> calls{0};
  absl::Status status;
  ps.RecvLocalAnyAsync(keys, [&](const absl::Status& s, std::vector<WorkerRendezvous::Ready> r) {
    if (calls.fetch_add(1) == 0) status = s;
    EXPECT_TRUE(r.empty());
  });
  EXPECT_EQ(calls, 0);
  ps.StartAbort(absl::AbortedError("step over"));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace tandem

// tests/framework/distributed/collective_executor_test.cc
//
// CollectiveExecutor over real servers on 127.0.0.1: all-reduce (recursive doubling and
// ring, group sizes 2-5, sizes that do not divide), broadcast from the newest replica,
// all-gather, the kernels through in-process sessions, and failures: a stopped peer and
// a silent one fail the others' collectives in bounded time, naming the peer, and the
// group forms again afterwards; a peer that leaves after its last collective fails
// none of the others' (the race at the end of a job).
#include "framework/distributed/collective/collective_executor.h"

#include <atomic>
#include <cstring>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "framework/core/env.h"
#include "framework/distributed/server.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/collective_ops.h"
#include "framework/runtime/session.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/distributed/collective_group.h"
#include "tests/util/log_lines.h"

namespace tandem {
namespace {

using testing::Group;
using testing::JoinAll;
using testing::StartGroup;

using ::testing::HasSubstr;

absl::Status Wait(const std::function<void(CollectiveExecutor::Done)>& start) {
  absl::Notification n;
  absl::Status result;
  start([&](const absl::Status& s) {
    result = s;
    n.Notify();
  });
  n.WaitForNotification();
  return result;
}

// Member r's data: element i is r * 1000 + i % 977 (small integers: sums are exact).
Tensor MemberData(int r, int64_t count) {
  Tensor t(DType::kFloat, TensorShape({count}));
  for (int64_t i = 0; i < count; ++i) t.data<float>()[i] = static_cast<float>(r * 1000 + i % 977);
  return t;
}

// Two bytes `v`: what the broadcast and all-gather tests move.
Tensor TwoBytes(uint8_t v) { return Tensor::FromVector<uint8_t>({v, v}, TensorShape({2})); }

// Runs AllReduceSum of MemberData on every member at once; checks the sums (times
// `scale`) and that every member holds the same bits.
void ExpectAllReduce(Group& g, int64_t instance, int64_t count, float scale = 1.0f) {
  const int n = static_cast<int>(g.ex.size());
  std::vector<Tensor> data;
  for (int r = 0; r < n; ++r) data.push_back(MemberData(r, count));
  std::vector<absl::Status> status(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      status[r] = Wait([&](CollectiveExecutor::Done d) {
        g.ex[r]->AllReduceSum(instance, data[r], std::move(d), scale);
      });
    });
  }
  for (auto& t : threads) t.join();
  // Every rank's status, so that a failure shows which member stopped first.
  for (int r = 0; r < n; ++r) EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
  if (::testing::Test::HasFailure()) return;
  for (int64_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r = 0; r < n; ++r) want += static_cast<float>(r * 1000 + i % 977);
    ASSERT_EQ(data[0].data<float>()[i], want * scale) << "element " << i << " of " << count;
  }
  for (int r = 1; r < n; ++r) {
    EXPECT_EQ(std::memcmp(data[r].raw_data(), data[0].raw_data(), data[0].TotalBytes()), 0)
        << "rank " << r;
  }
}

TEST(CollectiveExecutorTest, AllReduceSumsOnEveryGroupSizeAndBufferSize) {
  CollectiveOptions options;
  options.piece_bytes = 64 << 10;  // Several ring lanes for the large buffers.
  options.small_bytes = 4 << 10;
  for (int n : {2, 3, 5}) {
    SCOPED_TRACE(absl::StrCat(n, " members"));
    Group g = StartGroup(n, options);
    auto formed = JoinAll(g, std::vector<int64_t>(n, 0));
    for (auto& f : formed) ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(formed[0]->generation, formed[n - 1]->generation);
    // Recursive doubling (with folded ranks for 3 and 5), fewer elements than members,
    // ring with one lane, ring with several uneven lanes; each instance twice.
    int64_t instance = 1;
    for (int64_t count : {int64_t{1}, int64_t{2}, int64_t{257}, int64_t{5000}, int64_t{100003}}) {
      SCOPED_TRACE(absl::StrCat(count, " floats"));
      ExpectAllReduce(g, instance, count);
      // The same instance again (the next sequence), as a mean.
      ExpectAllReduce(g, instance, count, 1.0f / static_cast<float>(n));
      ++instance;
    }
  }
}

TEST(CollectiveExecutorTest, BroadcastTakesTheNewestReplicasValues) {
  Group g = StartGroup(3);
  auto formed = JoinAll(g, {5, 9, 9});
  for (auto& f : formed) ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(formed[0]->source, 1);  // The lowest rank with the highest step.
  EXPECT_EQ(g.ex[2]->source(), 1);
  std::vector<Tensor> data;
  for (int r = 0; r < 3; ++r) data.push_back(MemberData(r, 300000));  // Several pieces.
  std::vector<std::thread> threads;
  std::vector<absl::Status> status(3);
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      Tensor bytes = data[r].ByteRange(0, data[r].TotalBytes());
      status[r] = Wait([&](CollectiveExecutor::Done d) { g.ex[r]->Broadcast(7, bytes, d); });
    });
  }
  for (auto& t : threads) t.join();
  Tensor want = MemberData(1, 300000);
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(status[r].ok()) << status[r];
    EXPECT_EQ(std::memcmp(data[r].raw_data(), want.raw_data(), want.TotalBytes()), 0) << r;
  }
}

TEST(CollectiveExecutorTest, MembersThatBuiltOtherOpsCannotForm) {
  Group g = StartGroup(2);
  auto formed = JoinAll(g, {0, 0}, {"2 collective ops, crc32c 1", "3 collective ops, crc32c 2"});
  for (auto& f : formed) {
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(f.status().message(), HasSubstr("every replica must run the same model"));
  }
}

TEST(CollectiveExecutorTest, AStoppedPeerFailsTheOthersAtOnceNamingIt) {
  CollectiveOptions options;
  options.timeout_ms = 20000;
  options.probe_after_ms = 300;
  Group g = StartGroup(3, options);
  for (auto& f : JoinAll(g, {0, 0, 0})) ASSERT_TRUE(f.ok()) << f.status();
  ExpectAllReduce(g, 1, 1000);
  // worker:2 goes away; the others' next all-reduce must fail well before the timeout.
  g.servers[2].reset();
  const int64_t start = env::NowMicros();
  std::vector<absl::Status> status(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      Tensor data = MemberData(r, 1000);
      status[r] = Wait([&](CollectiveExecutor::Done d) { g.ex[r]->AllReduceSum(1, data, d); });
    });
  }
  for (auto& t : threads) t.join();
  const double secs = (env::NowMicros() - start) / 1e6;
  EXPECT_LT(secs, 15) << "the health check should have named the peer";
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(status[r].code(), absl::StatusCode::kUnavailable) << status[r];
    EXPECT_THAT(status[r].message(), HasSubstr("worker:"));
  }
  // Both name worker:2 one way or the other (the failed send, or its neighbour's abort
  // relayed by a failed send to the aborted member).
  EXPECT_TRUE(absl::StrContains(status[0].message(), "worker:2") ||
              absl::StrContains(status[1].message(), "worker:2"))
      << status[0] << " / " << status[1];
}

// A peer's abort reaches a member between steps, with none of its collectives waiting:
// when the peer failed, that member's next step fails, so it logs the failure as a
// warning naming the cause; when the peer left on purpose (it finished), as routine.
TEST(CollectiveExecutorTest, APeersFailureIsLoggedAsOneEvenBetweenStepsAndALeaveIsNot) {
  for (const bool leave : {false, true}) {
    SCOPED_TRACE(leave ? "leave" : "failure");
    testing::LogLines log;
    Group g = StartGroup(2);
    for (auto& f : JoinAll(g, {0, 0})) ASSERT_TRUE(f.ok()) << f.status();
    ExpectAllReduce(g, 1, 100);
    const std::string cause =
        leave ? "worker:0 finished training" : "collective: sending to worker:7 failed";
    if (leave) {
      g.ex[0]->Leave(cause);
    } else {
      g.ex[0]->Abort(absl::UnavailableError(cause));
    }
    // Member 0 logs its own abort; wait for member 1's line (the relay is asynchronous).
    const std::string relayed = "worker:0 ended its collectives: " + cause;
    testing::Within(10, [&] { return log.Count(relayed) > 0; });
    EXPECT_EQ(log.Count("Collective group aborted: UNAVAILABLE: collective: " + relayed,
                        google::GLOG_WARNING),
              leave ? 0 : 1);
    EXPECT_EQ(
        log.Count("Collective group: worker:0 left: collective: " + relayed, google::GLOG_INFO),
        leave ? 1 : 0);
    // Either way member 1's next collective fails with the cause.
    Tensor data = MemberData(1, 100);
    const absl::Status s =
        Wait([&](CollectiveExecutor::Done d) { g.ex[1]->AllReduceSum(1, data, d); });
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_THAT(s.message(), HasSubstr(cause));
  }
}

// The last step of a job: worker:2 completed its collectives (every piece it pushed
// was taken) and left while worker:1 had not started its part yet. worker:1 still
// completes from the data already there, and only its next collective, which would
// need worker:2, fails: at once, naming it.
TEST(CollectiveExecutorTest, AMemberBehindCompletesWhatALeavingPeerCompleted) {
  testing::LogLines log;
  CollectiveOptions options;
  options.timeout_ms = 20000;
  Group g = StartGroup(3, options);
  for (auto& f : JoinAll(g, {5, 0, 0})) ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(g.ex[1]->source(), 0);
  std::vector<Tensor> data = {TwoBytes(7), TwoBytes(0), TwoBytes(0)};
  std::vector<std::thread> ahead;
  std::vector<absl::Status> status(3);
  for (int r : {0, 2}) {
    ahead.emplace_back([&, r] {
      status[r] = Wait([&](CollectiveExecutor::Done d) { g.ex[r]->Broadcast(4, data[r], d); });
    });
  }
  for (auto& t : ahead) t.join();
  ASSERT_TRUE(status[0].ok()) << status[0];
  ASSERT_TRUE(status[2].ok()) << status[2];
  g.ex[2]->Leave("worker:2 finished training");
  ASSERT_TRUE(testing::Within(10, [&] { return log.Count("worker:2 left") == 2; }));
  status[1] = Wait([&](CollectiveExecutor::Done d) { g.ex[1]->Broadcast(4, data[1], d); });
  ASSERT_TRUE(status[1].ok()) << status[1];
  EXPECT_EQ(data[1].data<uint8_t>()[1], 7);
  EXPECT_EQ(log.Count("Collective group aborted"), 0) << "a leave after finishing is routine";
  const int64_t start = env::NowMicros();
  absl::Notification gathered;
  absl::Status s;
  g.ex[1]->AllGather(5, TwoBytes(1), [&](absl::StatusOr<std::vector<Tensor>> all) {
    s = all.status();
    gathered.Notify();
  });
  gathered.WaitForNotification();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("worker:2 finished training"));
  EXPECT_LT((env::NowMicros() - start) / 1e6, 5) << "not the 20 s timeout";
}

// The race behind the case above, made deterministic: with 3 members, recursive
// doubling folds rank 0 into rank 1, so rank 2 can complete and leave while rank 0
// still waits for rank 1's result. Here rank 2's leave reaches rank 1 (delivered by
// hand) while rank 1 waits for rank 0's broadcast: it goes on. A wait for the leaver's
// own data fails at once.
TEST(CollectiveExecutorTest, APeersLeaveFailsOnlyTheWaitsForThatPeer) {
  testing::LogLines log;
  CollectiveOptions options;
  options.timeout_ms = 20000;
  Group g = StartGroup(3, options);
  auto leave_note = [&](uint64_t generation) {
    WireMessage<proto::CollectiveDataRequest> note;
    note.proto.set_generation(generation);
    note.proto.set_src_rank(2);
    note.proto.set_abort_message("worker:2 finished training");
    note.proto.set_peer_leaving(true);
    g.ex[1]->HandleData(note, [](const absl::Status&) {});
  };
  auto formed = JoinAll(g, {5, 0, 0});  // Rank 0 is the broadcast's source.
  for (auto& f : formed) ASSERT_TRUE(f.ok()) << f.status();
  Tensor waiting = TwoBytes(0);
  absl::Notification done;
  absl::Status status;
  g.ex[1]->Broadcast(4, waiting, [&](const absl::Status& s) {
    status = s;
    done.Notify();
  });
  leave_note(formed[1]->generation);
  EXPECT_EQ(log.Count("Collective group: worker:2 left: collective: worker:2 ended its "
                      "collectives: worker:2 finished training",
                      google::GLOG_INFO),
            1);
  EXPECT_FALSE(done.HasBeenNotified()) << status;
  std::vector<std::thread> others;
  for (int r : {0, 2}) {
    others.emplace_back([&, r] {
      Tensor mine = TwoBytes(r == 0 ? 7 : 0);
      EXPECT_TRUE(Wait([&](CollectiveExecutor::Done d) { g.ex[r]->Broadcast(4, mine, d); }).ok());
    });
  }
  for (auto& t : others) t.join();
  done.WaitForNotification();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(waiting.data<uint8_t>()[0], 7);
  EXPECT_EQ(log.Count("Collective group aborted"), 0);

  // Rank 2 is the source now: rank 1's wait is for the leaver, and fails at once.
  formed = JoinAll(g, {0, 0, 5});
  for (auto& f : formed) ASSERT_TRUE(f.ok()) << f.status();
  const int64_t start = env::NowMicros();
  Tensor orphan = TwoBytes(0);
  absl::Notification failed;
  g.ex[1]->Broadcast(4, orphan, [&](const absl::Status& s) {
    status = s;
    failed.Notify();
  });
  leave_note(formed[1]->generation);
  failed.WaitForNotification();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(), HasSubstr("worker:2 finished training"));
  EXPECT_LT((env::NowMicros() - start) / 1e6, 5) << "not the 20 s timeout";
  EXPECT_EQ(log.Count("Collective group aborted: UNAVAILABLE: collective: worker:2 ended",
                      google::GLOG_WARNING),
            1);
}

TEST(CollectiveExecutorTest, ASilentPeerFailsTheOthersAfterTheTimeoutThenTheGroupReforms) {
  // The timeout also bounds the all-reduce after the re-formation: 3 s leaves room for
  // a machine loaded by the other tests (with 1.5 s, one run on 2 busy cores failed).
  CollectiveOptions options;
  options.timeout_ms = 3000;
  options.probe_after_ms = 500;  // The silent peer answers its health check.
  Group g = StartGroup(2, options);
  for (auto& f : JoinAll(g, {0, 0})) ASSERT_TRUE(f.ok()) << f.status();
  Tensor data = MemberData(0, 64);
  const int64_t start = env::NowMicros();
  absl::Status s = Wait([&](CollectiveExecutor::Done d) { g.ex[0]->AllReduceSum(1, data, d); });
  const double secs = (env::NowMicros() - start) / 1e6;
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("worker:1 has not answered for 3 s"));
  EXPECT_GE(secs, 2.9);
  EXPECT_LT(secs, 8);
  // Aborted until the next formation; then it works again from sequence 0 everywhere.
  s = Wait([&](CollectiveExecutor::Done d) { g.ex[0]->AllReduceSum(1, data, d); });
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  for (auto& f : JoinAll(g, {3, 3})) ASSERT_TRUE(f.ok()) << f.status();
  ExpectAllReduce(g, 1, 64);
}

TEST(CollectiveExecutorTest, AllGatherReturnsEveryMembersBytesInRankOrder) {
  Group g = StartGroup(3);
  for (auto& f : JoinAll(g, {0, 0, 0})) ASSERT_TRUE(f.ok()) << f.status();
  std::vector<absl::StatusOr<std::vector<Tensor>>> got(3, absl::UnknownError("unset"));
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      Tensor mine = Tensor::FromVector<uint8_t>({static_cast<uint8_t>(10 + r)}, TensorShape({1}));
      absl::Notification n;
      g.ex[r]->AllGather(9, mine, [&](absl::StatusOr<std::vector<Tensor>> all) {
        got[r] = std::move(all);
        n.Notify();
      });
      n.WaitForNotification();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(got[r].ok()) << got[r].status();
    ASSERT_EQ(got[r]->size(), 3u);
    for (int k = 0; k < 3; ++k) EXPECT_EQ((*got[r])[k].data<uint8_t>()[0], 10 + k);
  }
}

TEST(CollectiveExecutorTest, StopRequestReachesEveryMemberThroughAnAllReduce) {
  Group g = StartGroup(3);
  for (auto& f : JoinAll(g, {0, 0, 0})) ASSERT_TRUE(f.ok()) << f.status();
  ExpectAllReduce(g, 1, 10);
  for (auto* ex : g.ex) EXPECT_FALSE(ex->StopAgreed());
  g.ex[2]->RequestStop();
  ExpectAllReduce(g, 1, 100003);  // The ring: the mark travels around it.
  for (auto* ex : g.ex) EXPECT_TRUE(ex->StopAgreed());
}

// The ops through in-process sessions, one per replica.
TEST(CollectiveExecutorTest, KernelsAverageAndBroadcastInSessions) {
  Group g = StartGroup(2);
  for (auto& f : JoinAll(g, {0, 4})) ASSERT_TRUE(f.ok()) << f.status();
  std::vector<absl::StatusOr<std::vector<Tensor>>> out(2, absl::UnknownError("unset"));
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      Scope root = Scope::NewRootScope();
      Output a =
          ops::Const(root.WithOpName("a"),
                     Tensor::FromVector<float>({1.f + r, 2.f + r, 3.f + r}, TensorShape({3})));
      Output b = ops::Const(root.WithOpName("b"),
                            Tensor::FromVector<float>({10.f * (r + 1)}, TensorShape({1, 1})));
      std::vector<Output> avg = ops::CollectiveAllReduce(root.WithOpName("ar"), {a, b}, 1, true);
      Output c =
          ops::Const(root.WithOpName("c"), Tensor::FromVector<int64_t>({100 + r}, TensorShape({})));
      Node* bcast = root.AddNode("CollectiveBroadcast", "bc", {c}, {{"instance_key", int64_t{2}}});
      CHECK(root.status().ok()) << root.status();
      proto::GraphDef def;
      root.graph()->ToGraphDef(&def);
      SessionOptions so;
      so.collective = g.ex[r];
      auto session = NewDirectSession(def, so);
      CHECK(session.ok()) << session.status();
      out[r] = (*session)->Run({}, {avg[0].name(), avg[1].name(), bcast->name() + ":0"});
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(out[r].ok()) << out[r].status();
    const auto& v = *out[r];
    EXPECT_EQ(v[0].data<float>()[0], 1.5f);
    EXPECT_EQ(v[0].data<float>()[2], 3.5f);
    EXPECT_EQ(v[1].shape(), TensorShape({1, 1}));
    EXPECT_EQ(v[1].data<float>()[0], 15.f);
    EXPECT_EQ(v[2].scalar<int64_t>(), 101);  // Rank 1 had the newer global step.
  }
}

TEST(CollectiveExecutorTest, CollectiveOpsWithoutAGroupFailClearly) {
  auto server = Server::CreateLocal();  // Registers the collective kernels.
  ASSERT_TRUE(server.ok()) << server.status();
  Scope root = Scope::NewRootScope();
  Output a = ops::Const(root.WithOpName("a"), Tensor::FromVector<float>({1.f}, TensorShape({1})));
  std::vector<Output> y = ops::CollectiveAllReduce(root.WithOpName("ar"), {a}, 1, true);
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  auto session = NewDirectSession(def, {});
  ASSERT_TRUE(session.ok()) << session.status();
  auto r = (*session)->Run({}, {y[0].name()});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("strategy = \"collective\""));
}

}  // namespace
}  // namespace tandem

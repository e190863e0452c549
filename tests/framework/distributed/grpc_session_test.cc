// GrpcSession against real Servers in this process, over gRPC on 127.0.0.1: the
// seeds' programs (a local server running a constant, a two-task local job, the
// ps/worker placement example), feeds and fetches across tasks, training that matches
// a DirectSession step for step, and the errors a bad graph or feed must give.
#include "framework/distributed/grpc_session.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "framework/distributed/master_session.h"
#include "framework/distributed/new_session.h"
#include "framework/distributed/process_setup.h"
#include "framework/distributed/rpc/grpc_clients.h"
#include "framework/distributed/rpc/grpc_util.h"
#include "framework/distributed/server.h"
#include "framework/distributed/worker.h"
#include "framework/distributed/worker_rendezvous.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/layers.h"
#include "framework/ops/losses.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/nn_ops.h"
#include "framework/ops/optimizers.h"
#include "framework/ops/state_ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/distributed/start_cluster.h"
#include "tests/util/def_of.h"
#include "tests/util/free_port.h"
#include "tests/util/ramp.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::StartCluster;

proto::GraphDef ToDef(const Scope& root) { return testing::DefOf(root); }

std::unique_ptr<Session> Connect(const std::string& target, const Scope& root,
                                 std::vector<std::string> filters = {}) {
  SessionOptions opts;
  opts.target = target;
  opts.device_filters = std::move(filters);
  opts.wait_for_workers_ms = 10000;
  auto s = NewSession(ToDef(root), opts);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

// GRPC_EXPERIMENTS as this process was started with (/proc/self/environ keeps the
// environment given to exec, whatever setenv did since); nullopt when it was unset.
std::optional<std::string> StartupGrpcExperiments() {
  std::ifstream in("/proc/self/environ", std::ios::binary);
  std::string entry;
  while (std::getline(in, entry, '\0')) {
    if (absl::StartsWith(entry, "GRPC_EXPERIMENTS=")) return entry.substr(17);
  }
  return std::nullopt;
}

// A server leaves the process's environment alone; InitProcess (what a binary's main
// calls) turns the experiments on unless the environment chose.
TEST(GrpcUtilTest, InitProcessTurnsOnTheTransportExperimentsUnlessTheEnvironmentChose) {
  std::optional<std::string> chosen = StartupGrpcExperiments();
  auto server = Server::CreateLocal();
  ASSERT_TRUE(server.ok()) << server.status();
  const char* now = std::getenv("GRPC_EXPERIMENTS");
  EXPECT_EQ(now == nullptr ? std::nullopt : std::optional<std::string>(now), chosen);
  InitProcess();
  now = std::getenv("GRPC_EXPERIMENTS");
  ASSERT_NE(now, nullptr);
  EXPECT_EQ(std::string(now), chosen.value_or(kGrpcTransportExperiments));
}

// A client's RecvTensor calls take its least busy channel: one at a time they all use
// channel 0; while one waits, the next goes to channel 1. Each channel here reaches a
// different server, whose error names it. A server stops even while a RecvTensor
// waits for a step that never runs.
TEST(GrpcClientTest, RecvTensorTakesTheLeastBusyChannel) {
  auto servers = StartCluster({{"a", 1}, {"b", 1}});
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (const auto& server : servers) {
    auto channel = NewGrpcChannel(server->address(), {});
    ASSERT_TRUE(channel.ok()) << channel.status();
    channels.push_back(*channel);
  }
  GrpcWorkerClient client(channels, "");
  // A key naming a device no server has: refused at once, naming the serving task.
  WireMessage<proto::RecvTensorRequest> bogus;
  bogus.proto.set_step_id(1);
  bogus.proto.set_rendezvous_key(CreateRendezvousKey(
      "/job:c/replica:0/task:0/device:CPU:0", 1, "/job:a/replica:0/task:0/device:CPU:0", "x:0"));
  auto served_by = [&](const WireMessage<proto::RecvTensorRequest>& req) {
    WireMessage<proto::RecvTensorResponse> resp;
    absl::Status s = CallAndWait(static_cast<WorkerInterface*>(&client),
                                 &WorkerInterface::RecvTensorAsync, req, &resp);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    return std::string(s.message());
  };
  for (int i = 0; i < 3; ++i) EXPECT_THAT(served_by(bogus), HasSubstr("(/job:a/"));

  // A valid key of a step that never runs: the call waits on channel 0 until cancelled.
  Device* a_cpu = servers[0]->devices()->devices()[0].get();
  WireMessage<proto::RecvTensorRequest> waiting;
  waiting.proto.set_step_id(7);
  waiting.proto.set_rendezvous_key(CreateRendezvousKey(
      a_cpu->name(), a_cpu->incarnation(), "/job:b/replica:0/task:0/device:CPU:0", "y:0"));
  WireMessage<proto::RecvTensorResponse> waiting_resp;
  CallOptions cancel;
  absl::Notification waited;
  absl::Status waited_status;
  client.RecvTensorAsync(&cancel, &waiting, &waiting_resp, [&](const absl::Status& s) {
    waited_status = s;
    waited.Notify();
  });
  EXPECT_THAT(served_by(bogus), HasSubstr("(/job:b/"));
  cancel.StartCancel();
  ASSERT_TRUE(waited.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_FALSE(waited_status.ok());
  EXPECT_THAT(served_by(bogus), HasSubstr("(/job:a/"));  // Channel 0 is free again.

  // The cancelled call's handler ended step 7 on server a (worker_cancel_test checks
  // that); stopping the server still returns promptly.
  absl::Notification stopped;
  std::thread stopper([&] {
    servers[0]->Stop();
    stopped.Notify();
  });
  EXPECT_TRUE(stopped.WaitForNotificationWithTimeout(absl::Seconds(20)));
  stopper.join();
}

TEST(GrpcSessionTest, LocalServerRunsAConstant) {
  auto server = Server::CreateLocal();
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT((*server)->target(), HasSubstr("grpc://127.0.0.1:"));
  Scope root = Scope::NewRootScope();
  // The seeds' "Hello, distributed", as its bytes (a number tensor crosses the cluster).
  std::string hello = "Hello, distributed";
  std::vector<int32_t> codes(hello.begin(), hello.end());
  Output c = ops::Const(
      root, Tensor::FromVector<int32_t>(codes, TensorShape({static_cast<int64_t>(codes.size())})));
  auto session = Connect((*server)->target(), root);
  ASSERT_NE(session, nullptr);
  auto out = session->Run({}, {c.name()});
  ASSERT_TRUE(out.ok()) << out.status();
  auto flat = (*out)[0].flat<int32_t>();
  EXPECT_EQ(std::string(flat.begin(), flat.end()), hello);
}

// A cluster spec whose ps:0 address is served by some other task (here a lone
// worker:0, as a stale process of another job would be): the session refuses to place
// on it, naming both.
TEST(GrpcSessionTest, AnAddressAnsweredByAnotherTaskIsRefused) {
  auto stranger = StartCluster({{"worker", 1}});
  ClusterSpec cluster;
  ASSERT_TRUE(cluster.AddJob("chief", {absl::StrCat("127.0.0.1:", testing::PickFreePort())}).ok());
  ASSERT_TRUE(cluster.AddJob("ps", {stranger[0]->address()}).ok());
  auto chief = Server::Create(ServerOptions{.cluster = cluster, .task = {"chief", 0}});
  ASSERT_TRUE(chief.ok()) << chief.status();
  Scope root = Scope::NewRootScope();
  ops::Const(root.WithDevice("/job:ps/task:0"), 1.0f);
  SessionOptions opts;
  opts.target = (*chief)->target();
  opts.wait_for_workers_ms = 10000;
  auto session = NewSession(ToDef(root), opts);
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), absl::StatusCode::kFailedPrecondition) << session.status();
  EXPECT_THAT(session.status().message(),
              HasSubstr("the address of /job:ps/replica:0/task:0 is answered by "
                        "/job:worker/replica:0/task:0"));
}

TEST(GrpcSessionTest, TwoTaskLocalJobRunsPinnedOps) {
  auto servers = StartCluster({{"local", 2}});
  Scope root = Scope::NewRootScope();
  Output x = ops::Const(root.WithDevice("/job:local/task:0"), {1.0f, 2.0f}, TensorShape({2}));
  Output y = ops::Mul(root.WithDevice("/job:local/task:1"), x, ops::Const(root, 3.0f));
  Output z = ops::Add(root.WithDevice("/job:local/task:0"), y, x);
  auto session = Connect(servers[0]->target(), root);
  ASSERT_NE(session, nullptr);
  RunOptions ro;
  ro.trace = true;
  RunMetadata md;
  auto out = session->Run({}, {y.name(), z.name()}, {}, ro, &md);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].flat<float>(), ElementsAre(3, 6));
  EXPECT_THAT((*out)[1].flat<float>(), ElementsAre(4, 8));
  bool mul_on_task1 = false;
  for (const auto& n : md.step_stats.nodes) {
    if (n.node_name == y.node->name()) {
      mul_on_task1 = n.device == "/job:local/replica:0/task:1/device:CPU:0";
    }
  }
  EXPECT_TRUE(mul_on_task1);
}

// The seeds' placement example: w and b on the ps; w+b, w*b, w/b on three workers.
TEST(GrpcSessionTest, VariablesOnPsComputedOnWorkers) {
  auto servers = StartCluster({{"ps", 1}, {"worker", 3}});
  Server* ps = servers[0].get();
  Scope root = Scope::NewRootScope();
  Scope on_ps = root.WithDevice("/job:ps/task:0");
  ops::Variable w(on_ps, "w", ops::Const(on_ps, {2.0f, 4.0f}, TensorShape({2})));
  ops::Variable b(on_ps, "b", ops::Const(on_ps, {1.0f, 8.0f}, TensorShape({2})));
  Output sum = ops::Add(root.WithDevice("/job:worker/task:0"), w.value(), b.value());
  Output prod = ops::Mul(root.WithDevice("/job:worker/task:1"), w.value(), b.value());
  Output quot = ops::Div(root.WithDevice("/job:worker/task:2"), w.value(), b.value());
  Node* init = ops::GlobalVariablesInitializer(root);
  auto session = Connect(servers[1]->target(), root);
  ASSERT_NE(session, nullptr);
  ASSERT_TRUE(session->Run({}, {}, {init->name()}).ok());
  auto out = session->Run({}, {sum.name(), prod.name(), quot.name()});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].flat<float>(), ElementsAre(3, 12));
  EXPECT_THAT((*out)[1].flat<float>(), ElementsAre(2, 32));
  EXPECT_THAT((*out)[2].flat<float>(), ElementsAre(2, 0.5));
  // The variables live in the ps task's resource manager, and nowhere else.
  auto listed = ps->devices()->default_device()->resource_manager()->List();
  EXPECT_EQ(listed.size(), 2u);
  for (size_t i = 1; i < servers.size(); ++i) {
    EXPECT_TRUE(servers[i]->devices()->default_device()->resource_manager()->List().empty());
  }
}

// A second client (its own graph and master) sees the variables the first created.
// Two plans send one ps value to different tasks: their ps partitions give the edge's
// _Send the same node name with different rendezvous keys. Each plan must use its own
// (a kernel shared by name sent the second plan's value under the first plan's key, and
// the step never ended).
TEST(GrpcSessionTest, PlansSendingOneValueToDifferentTasksEachUseTheirOwnKey) {
  auto servers = StartCluster({{"ps", 1}, {"worker", 2}});
  Scope root = Scope::NewRootScope();
  Scope on_ps = root.WithDevice("/job:ps/task:0");
  ops::Variable w(on_ps, "w", ops::Const(on_ps, {2.0f, 4.0f}, TensorShape({2})));
  Output on_0 = ops::Neg(root.WithDevice("/job:worker/task:0"), w.value());
  Output on_1 = ops::Square(root.WithDevice("/job:worker/task:1"), w.value());
  Node* init = ops::GlobalVariablesInitializer(root);
  auto session = Connect(servers[1]->target(), root);
  ASSERT_NE(session, nullptr);
  ASSERT_TRUE(session->Run({}, {}, {init->name()}).ok());
  RunOptions bounded;
  bounded.timeout_ms = 10000;
  for (int round = 0; round < 2; ++round) {
    auto a = session->Run({}, {on_0.name()}, {}, bounded, nullptr);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_THAT((*a)[0].flat<float>(), ElementsAre(-2, -4));
    auto b = session->Run({}, {on_1.name()}, {}, bounded, nullptr);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_THAT((*b)[0].flat<float>(), ElementsAre(4, 16));
  }
}

TEST(GrpcSessionTest, PsVariablesOutliveAndAreSharedAcrossClients) {
  auto servers = StartCluster({{"ps", 1}, {"worker", 2}});
  auto build = [](Scope& root, Output* value, Node** init, Output* inc) {
    Scope on_ps = root.WithDevice("/job:ps/task:0");
    ops::Variable v(on_ps, "shared", ops::Const(on_ps, 0.0f));
    *value = v.value();
    *init = v.initializer();
    *inc = ops::AssignAdd(on_ps, v, ops::Const(on_ps, 1.0f));
  };
  Scope r1 = Scope::NewRootScope(), r2 = Scope::NewRootScope();
  Output v1, v2, inc1, inc2;
  Node *init1, *init2;
  build(r1, &v1, &init1, &inc1);
  build(r2, &v2, &init2, &inc2);
  auto s1 = Connect(servers[1]->target(), r1, {"/job:ps", "/job:worker/task:0"});
  auto s2 = Connect(servers[2]->target(), r2, {"/job:ps", "/job:worker/task:1"});
  ASSERT_TRUE(s1 && s2);
  ASSERT_TRUE(s1->Run({}, {}, {init1->name()}).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s1->Run({}, {inc1.name()}).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(s2->Run({}, {inc2.name()}).ok());
  ASSERT_TRUE(s1->Close().ok());
  auto out = s2->Run({}, {v2.name()});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 5.0f);
}

// The seeds' linear regression, with its variables on a ps and the step on a worker,
// gives exactly the losses of a DirectSession.
TEST(GrpcSessionTest, TrainingMatchesDirectSession) {
  auto servers = StartCluster({{"ps", 1}, {"worker", 1}});
  auto build = [](bool distributed, Output* loss, Node** train, Node** init) {
    Scope root = Scope::NewRootScope();
    root.graph()->set_seed(7);
    Scope vars = distributed ? root.WithDevice("/job:ps/task:0") : root;
    Output x = ops::Const(root, {1.f, 1.5f, 2.f, 2.5f, 3.f, 3.5f}, TensorShape({3, 2}));
    Output y = ops::Const(root, {0.3f, 0.5f, 0.7f}, TensorShape({3, 1}));
    ops::Variable w(vars, "w", ops::Const(vars, {0.1f, -0.2f}, TensorShape({2, 1})));
    ops::Variable b(vars, "b", ops::Const(vars, {0.0f}, TensorShape({1})));
    Output pred = ops::Add(root, ops::MatMul(root, x, w.value()), b.value());
    *loss = ops::MeanSquaredError(root, y, pred);
    ops::AdagradOptimizer opt(0.05f);
    *train = *opt.Minimize(root, *loss);
    *init = ops::GlobalVariablesInitializer(root);
    return root;
  };
  Output l1, l2;
  Node *t1, *t2, *i1, *i2;
  Scope local = build(false, &l1, &t1, &i1);
  Scope dist = build(true, &l2, &t2, &i2);
  auto direct = NewDirectSession(ToDef(local));
  ASSERT_TRUE(direct.ok());
  auto remote = Connect(servers[1]->target(), dist);
  ASSERT_NE(remote, nullptr);
  ASSERT_TRUE((*direct)->Run({}, {}, {i1->name()}).ok());
  ASSERT_TRUE(remote->Run({}, {}, {i2->name()}).ok());
  float first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    auto a = (*direct)->Run({}, {l1.name()}, {t1->name()});
    auto b = remote->Run({}, {l2.name()}, {t2->name()});
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
    EXPECT_FLOAT_EQ((*a)[0].scalar<float>(), (*b)[0].scalar<float>()) << "step " << step;
    if (step == 0) first = (*b)[0].scalar<float>();
    last = (*b)[0].scalar<float>();
  }
  EXPECT_LT(last, first);
  // Each step's rendezvous is dropped on both tasks by the next step's RunGraph, so
  // only the last one is left; closing the session drops it (asynchronously, so wait).
  EXPECT_LE(servers[0]->worker()->NumLiveSteps(), 1);
  EXPECT_LE(servers[1]->worker()->NumLiveSteps(), 1);
  ASSERT_TRUE(remote->Close().ok());
  for (int i = 0; i < 500; ++i) {
    if (servers[0]->worker()->NumLiveSteps() == 0 && servers[1]->worker()->NumLiveSteps() == 0) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(servers[0]->worker()->NumLiveSteps(), 0);
  EXPECT_EQ(servers[1]->worker()->NumLiveSteps(), 0);
}

TEST(GrpcSessionTest, KernelsOnAnotherTaskFlushDenormals) {
  // The ps runs its part of the step on an RPC thread: a denormal operand reads as
  // zero (DAZ), a denormal product is written as zero (FTZ), as on the caller.
  auto servers = StartCluster({{"worker", 1}, {"ps", 1}});
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DType::kFloat, PartialShape({-1}));
  Scope ps = root.WithDevice("/job:ps/task:0");
  Output daz = ops::Mul(ps, x, ops::Const(ps, 1.0f));
  Output ftz = ops::Mul(ps, ops::Const(ps, 1e-21f), ops::Const(ps, 1e-21f));
  auto session = Connect(servers[0]->target(), root);
  ASSERT_NE(session, nullptr);
  auto out = session->Run({{"x", Tensor::FromVector<float>({1e-40f, 2.0f}, TensorShape({2}))}},
                          {daz.name(), ftz.name()});
  ASSERT_TRUE(out.ok()) << out.status();
#if defined(__x86_64__) || defined(__aarch64__)
  EXPECT_THAT((*out)[0].flat<float>(), ElementsAre(0.0f, 2.0f));
  EXPECT_EQ((*out)[1].scalar<float>(), 0.0f);
#endif
}

TEST(GrpcSessionTest, FeedsAndFetchesCrossTasks) {
  auto servers = StartCluster({{"worker", 2}});
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x").WithDevice("/job:worker/task:1"), DType::kFloat,
                              PartialShape({-1}));
  Output y = ops::Square(root.WithDevice("/job:worker/task:1"), x);
  auto session = Connect(servers[0]->target(), root);
  ASSERT_NE(session, nullptr);
  Tensor in = Tensor::FromVector<float>({1, 2, 3}, TensorShape({3}));
  auto out = session->Run({{"x", in}}, {y.name(), "x"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].flat<float>(), ElementsAre(1, 4, 9));
  EXPECT_THAT((*out)[1].flat<float>(), ElementsAre(1, 2, 3));
  auto bad = session->Run({{"x", Tensor::FromVector<int32_t>({1}, TensorShape({1}))}}, {y.name()});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("int32"));
}

// bfloat16 tensors cross task boundaries both ways (a worker partition's _Recv and
// _Send, the RunGraph response of a fetched value) and reach the client bit for bit.
TEST(GrpcSessionTest, Bfloat16CrossesTasks) {
  auto servers = StartCluster({{"worker", 2}});
  const std::vector<float> xs = {1.0f / 3, -2.7f, 1000.1f, 0.15f};
  Scope root = Scope::NewRootScope();
  Scope w0 = root.WithDevice("/job:worker/task:0");
  Output x = ops::Const(w0, Tensor::FromVector<float>(xs, TensorShape({4})));
  Output xb = ops::Cast(w0.WithOpName("xb"), x, DType::kBFloat16);
  Output r = ops::Relu(root.WithOpName("r").WithDevice("/job:worker/task:1"), xb);
  Output back = ops::Cast(w0.WithOpName("back"), r, DType::kFloat);
  auto session = Connect(servers[0]->target(), root);
  ASSERT_NE(session, nullptr);
  auto out = session->Run({}, {xb.name(), r.name(), back.name()});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].dtype(), DType::kBFloat16);
  ASSERT_EQ((*out)[1].dtype(), DType::kBFloat16);
  ASSERT_EQ((*out)[2].dtype(), DType::kFloat);
  for (size_t i = 0; i < xs.size(); ++i) {
    const bfloat16 rounded(xs[i]);
    const float relu = std::max(0.0f, static_cast<float>(rounded));
    EXPECT_EQ((*out)[0].flat<bfloat16>()[i].bits, rounded.bits) << "element " << i;
    EXPECT_EQ((*out)[1].flat<bfloat16>()[i].bits, bfloat16(relu).bits) << "element " << i;
    EXPECT_EQ((*out)[2].flat<float>()[i], relu) << "element " << i;
  }
}

TEST(GrpcSessionTest, ExtendAddsNodes) {
  auto server = Server::CreateLocal();
  ASSERT_TRUE(server.ok());
  Scope root = Scope::NewRootScope();
  Output a = ops::Const(root, 2.0f);
  auto session = Connect((*server)->target(), root);
  ASSERT_NE(session, nullptr);
  Output b = ops::Mul(root, a, a);
  ASSERT_TRUE(session->Extend(ToDef(root)).ok());
  auto out = session->Run({}, {b.name()});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 4.0f);
}

TEST(GrpcSessionTest, ExtendRewritesAndFusesNewNodesAsCreateDoes) {
  // A MatMul -> BiasAdd -> Relu chain added by Extend under mixed_bfloat16 reaches the
  // master rewritten and fused: the same bits and ops as a local session given it whole.
  auto server = Server::CreateLocal();
  ASSERT_TRUE(server.ok());
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DType::kFloat, PartialShape({3, 5}));
  Output w = ops::Const(root.WithOpName("w"), testing::Ramp(TensorShape({5, 4}), 0.41f, 0.1f));
  Output b = ops::Const(root.WithOpName("b"), testing::Ramp(TensorShape({4}), 1.7f, 0.0f));
  SessionOptions opts;
  opts.target = (*server)->target();
  opts.precision = Precision::kMixedBfloat16;
  auto remote = NewSession(ToDef(root), opts);
  ASSERT_TRUE(remote.ok()) << remote.status();
  Output out = ops::Identity(root.WithOpName("out"),
                             ops::Relu(root, ops::BiasAdd(root, ops::MatMul(root, x, w), b)));
  ASSERT_TRUE((*remote)->Extend(ToDef(root)).ok());
  opts.target = "";
  auto local = NewSession(ToDef(root), opts);
  ASSERT_TRUE(local.ok()) << local.status();
  const FeedMap feed = {{"x:0", testing::Ramp(TensorShape({3, 5}), 0.29f, -0.3f)}};
  RunOptions trace;
  trace.trace = true;
  RunMetadata remote_meta, local_meta;
  auto a = (*remote)->Run(feed, {out.name()}, {}, trace, &remote_meta);
  auto c = (*local)->Run(feed, {out.name()}, {}, trace, &local_meta);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ((*a)[0].TotalBytes(), (*c)[0].TotalBytes());
  EXPECT_EQ(std::memcmp((*a)[0].raw_data(), (*c)[0].raw_data(), (*c)[0].TotalBytes()), 0);
  auto ops_of = [](const RunMetadata& m) {
    std::multiset<std::string> ops;
    for (const auto& n : m.step_stats.nodes) {
      if (n.op != "_Send" && n.op != "_Recv") ops.insert(n.op);
    }
    return ops;
  };
  EXPECT_EQ(ops_of(remote_meta), ops_of(local_meta));
  EXPECT_EQ(ops_of(remote_meta).count("_FusedMatMul"), 1u);
}

TEST(GrpcSessionTest, ErrorsNameTheProblemAndTheServerKeepsServing) {
  auto server = Server::CreateLocal();
  ASSERT_TRUE(server.ok());
  // An op no registry knows.
  proto::GraphDef bad;
  proto::NodeDef* n = bad.add_node();
  n->set_name("mystery");
  n->set_op("NoSuchOp");
  SessionOptions opts;
  opts.target = (*server)->target();
  auto s = NewSession(bad, opts);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("NoSuchOp"));
  // A device no task has.
  Scope root = Scope::NewRootScope();
  ops::Const(root.WithDevice("/job:ps/task:3"), 1.0f);
  opts.allow_soft_placement = false;
  auto s2 = NewSession(ToDef(root), opts);
  ASSERT_FALSE(s2.ok());
  EXPECT_EQ(s2.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s2.status().message(), HasSubstr("/job:ps/task:3"));
  // Fetching a variable that was never initialised.
  Scope r3 = Scope::NewRootScope();
  ops::Variable v(r3, "v", ops::Const(r3, 1.0f));
  auto s3 = Connect((*server)->target(), r3);
  ASSERT_NE(s3, nullptr);
  auto uninit = s3->Run({}, {v.value().name()});
  ASSERT_FALSE(uninit.ok());
  EXPECT_THAT(uninit.status().message(), HasSubstr("v"));
  // Still serving.
  Scope r4 = Scope::NewRootScope();
  Output c = ops::Const(r4, 5.0f);
  auto s4 = Connect((*server)->target(), r4);
  ASSERT_NE(s4, nullptr);
  EXPECT_TRUE(s4->Run({}, {c.name()}).ok());
}

TEST(GrpcSessionTest, TokenIsRequired) {
  TransportSecurity sec;
  sec.token = "s3cret";
  auto server = Server::CreateLocal(sec);
  ASSERT_TRUE(server.ok());
  Scope root = Scope::NewRootScope();
  Output c = ops::Const(root, 5.0f);
  SessionOptions opts;
  opts.target = (*server)->target();
  auto without = NewSession(ToDef(root), opts);
  ASSERT_FALSE(without.ok());
  EXPECT_EQ(without.status().code(), absl::StatusCode::kUnauthenticated);
  TransportSecurity wrong;
  wrong.token = "s3creT";
  EXPECT_EQ(NewSession(ToDef(root), opts, wrong).status().code(),
            absl::StatusCode::kUnauthenticated);
  auto with = NewSession(ToDef(root), opts, sec);
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_TRUE((*with)->Run({}, {c.name()}).ok());
}

// In-graph replication: one client, a tower on each of two worker tasks computing the
// gradients of half the batch, the averaged gradients applied on the ps. The result
// equals a single-process step on the whole batch within float tolerance.
TEST(GrpcSessionTest, InGraphReplicationMatchesSingleProcess) {
  auto servers = StartCluster({{"ps", 1}, {"worker", 2}});
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> xs(8 * 4), ys(8);
  for (float& v : xs) v = u(rng);
  for (float& v : ys) v = u(rng);
  Tensor x = Tensor::FromVector<float>(xs, TensorShape({8, 4}));
  Tensor y = Tensor::FromVector<float>(ys, TensorShape({8, 1}));
  auto model = [](const Scope& s, const ops::Variable& w, const ops::Variable& b, Output xx,
                  Output yy) {
    Output pred = ops::Add(s, ops::MatMul(s, ops::Tanh(s, xx), w.value()), b.value());
    return ops::MeanSquaredError(s, yy, pred);
  };
  auto init_w = [](const Scope& s) {
    return ops::Const(s, {0.5f, -0.25f, 0.125f, 1.0f}, TensorShape({4, 1}));
  };
  // Single process: the whole batch.
  Scope r1 = Scope::NewRootScope();
  ops::Variable w1(r1, "w", init_w(r1));
  ops::Variable b1(r1, "b", ops::Const(r1, {0.1f}, TensorShape({1})));
  Output loss1 = model(r1, w1, b1, ops::Const(r1, x), ops::Const(r1, y));
  ops::GradientDescentOptimizer sgd1(0.1f);
  Node* train1 = *sgd1.Minimize(r1, loss1);
  Node* i1 = ops::GlobalVariablesInitializer(r1);
  // Two towers, variables on the ps.
  Scope r2 = Scope::NewRootScope();
  Scope ps = r2.WithDevice("/job:ps/task:0");
  ops::Variable w2(ps, "w", init_w(ps));
  ops::Variable b2(ps, "b", ops::Const(ps, {0.1f}, TensorShape({1})));
  ops::GradientDescentOptimizer sgd2(0.1f);
  std::vector<std::vector<ops::GradAndVar>> tower_grads;
  for (int t = 0; t < 2; ++t) {
    Scope tower = r2.WithDevice(absl::StrCat("/job:worker/task:", t));
    Output xt = ops::Const(tower, x.Slice(4 * t, 4 * t + 4));
    Output yt = ops::Const(tower, y.Slice(4 * t, 4 * t + 4));
    auto g = sgd2.ComputeGradients(tower, model(tower, w2, b2, xt, yt));
    ASSERT_TRUE(g.ok()) << g.status();
    tower_grads.push_back(*g);
  }
  std::vector<ops::GradAndVar> averaged;
  for (size_t k = 0; k < tower_grads[0].size(); ++k) {
    Output sum = ops::Add(ps, tower_grads[0][k].grad, tower_grads[1][k].grad);
    averaged.push_back({ops::Mul(ps, sum, ops::Const(ps, 0.5f)), tower_grads[0][k].var});
  }
  auto train2 = sgd2.ApplyGradients(ps, averaged);
  ASSERT_TRUE(train2.ok()) << train2.status();
  Node* i2 = ops::GlobalVariablesInitializer(r2);

  auto local = NewDirectSession(ToDef(r1));
  ASSERT_TRUE(local.ok());
  auto remote = Connect(servers[1]->target(), r2);
  ASSERT_NE(remote, nullptr);
  ASSERT_TRUE((*local)->Run({}, {}, {i1->name()}).ok());
  ASSERT_TRUE(remote->Run({}, {}, {i2->name()}).ok());
  RunOptions ro;
  ro.trace = true;
  RunMetadata md;
  for (int step = 0; step < 5; ++step) {
    ASSERT_TRUE((*local)->Run({}, {}, {train1->name()}).ok());
    auto r = remote->Run({}, {}, {(*train2)->name()}, step == 0 ? ro : RunOptions(),
                         step == 0 ? &md : nullptr);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  auto a = (*local)->Run({}, {w1.value().name(), b1.value().name()});
  auto b = remote->Run({}, {w2.value().name(), b2.value().name()});
  ASSERT_TRUE(a.ok() && b.ok());
  for (int k = 0; k < 2; ++k) {
    auto fa = (*a)[k].flat<float>();
    auto fb = (*b)[k].flat<float>();
    ASSERT_EQ(fa.size(), fb.size());
    for (size_t i = 0; i < fa.size(); ++i) EXPECT_NEAR(fa[i], fb[i], 1e-5) << k << "," << i;
  }
  // Each tower's MatMul ran on its own worker task.
  std::set<std::string> matmul_devices;
  for (const auto& n : md.step_stats.nodes) {
    if (n.op == "MatMul") matmul_devices.insert(n.device);
  }
  EXPECT_TRUE(matmul_devices.count("/job:worker/replica:0/task:0/device:CPU:0"));
  EXPECT_TRUE(matmul_devices.count("/job:worker/replica:0/task:1/device:CPU:0"));
}

// A tensor larger than the worker's chunk size crosses in several RecvTensor calls
// and arrives intact (the same path carries tensors over gRPC's 2 GiB message limit).
TEST(GrpcSessionTest, LargeTensorsCrossInChunks) {
  auto servers = StartCluster({{"ps", 1}, {"worker", 1}}, /*recv_chunk_bytes=*/1 << 20);
  const int64_t n = (10 << 20) / 4 + 7;  // A little over 10 MiB of floats.
  std::vector<float> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = static_cast<float>(i % 100003) * 0.5f;
  Scope root = Scope::NewRootScope();
  Scope ps = root.WithDevice("/job:ps/task:0");
  ops::Variable big(ps, "big", ops::Const(ps, Tensor::FromVector<float>(values, TensorShape({n}))));
  Output copy = ops::Identity(root.WithDevice("/job:worker/task:0"), big.value());
  Node* init = ops::GlobalVariablesInitializer(root);
  auto session = Connect(servers[1]->target(), root);
  ASSERT_NE(session, nullptr);
  ASSERT_TRUE(session->Run({}, {}, {init->name()}).ok());
  auto out = session->Run({}, {copy.name()});
  ASSERT_TRUE(out.ok()) << out.status();
  auto got = (*out)[0].flat<float>();
  ASSERT_EQ(static_cast<int64_t>(got.size()), n);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), values.begin()));
  EXPECT_EQ(servers[0]->worker()->chunks_sent(), 11);  // 10 full chunks and a 28-byte one.
}

}  // namespace
}  // namespace tandem

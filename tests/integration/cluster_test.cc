// Clusters of real processes on 127.0.0.1 (ephemeral ports): `trainer serve` as the
// parameter servers, dist_mlp_worker as between-graph replicated workers, and this
// process as a client. Covers asynchronous training across 2 ps and 2 workers, a ps
// killed with SIGKILL (the step fails fast; the restarted ps is a new incarnation), a
// ps frozen with SIGSTOP (the step fails at the session's operation timeout and works
// again once the ps thaws),
// hostile bytes and missing tokens sent to a server that keeps serving, and serve's
// usage errors. Every process is killed by PID when a test ends.
//
// TANDEM_TRAINER, TANDEM_DIST_WORKER and TANDEM_SOURCE_DIR are set by CMake.
#include <signal.h>

#include <chrono>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "framework/core/env.h"
#include "framework/distributed/grpc_session.h"
#include "framework/distributed/new_session.h"
#include "framework/distributed/rpc/grpc_clients.h"
#include "framework/distributed/server.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/state_ops.h"
#include "framework/protos/wire.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/subprocess.h"
#include "tests/util/free_port.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;
using testing::PickFreePort;
using testing::Subprocess;

const std::string kTrainer = TANDEM_TRAINER;
const std::string kWorker = TANDEM_DIST_WORKER;
constexpr auto kTimeout = std::chrono::seconds(240);

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = env::MakeTempDir("cluster_test");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
  }
  void TearDown() override {
    procs_.clear();  // SIGKILLs whatever still runs.
    env::DeleteRecursively(dir_).IgnoreError();
  }

  std::string Addr(int port) { return absl::StrCat("127.0.0.1:", port); }

  // TF_CONFIG JSON for `jobs` (job -> addresses) and this task.
  static std::string TfConfig(const std::map<std::string, std::vector<std::string>>& jobs,
                              const std::string& type, int index) {
    std::string cluster;
    for (const auto& [job, addrs] : jobs) {
      if (!cluster.empty()) cluster += ", ";
      cluster += absl::StrCat("\"", job, "\": [");
      for (size_t i = 0; i < addrs.size(); ++i) {
        cluster += absl::StrCat(i ? ", " : "", "\"", addrs[i], "\"");
      }
      cluster += "]";
    }
    return absl::StrCat("{\"cluster\": {", cluster, "}, \"task\": {\"type\": \"", type,
                        "\", \"index\": ", index, "}}");
  }

  Subprocess* Start(std::vector<std::string> argv, const std::string& name,
                    const std::vector<std::string>& env = {}) {
    procs_.push_back(std::make_unique<Subprocess>(argv, dir_ + "/" + name, env));
    return procs_.back().get();
  }

  // `trainer serve` for one task; waits until it prints that it serves.
  Subprocess* Serve(const std::string& tf_config, const std::string& name,
                    std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {
        kTrainer, "serve", "--cluster", tf_config, "--inter_op_threads", "2", "--intra_op_threads",
        "1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    Subprocess* p = Start(argv, name);
    for (int i = 0; i < 500 && p->Stdout().find("serving") == std::string::npos; ++i) {
      if (!p->running() || p->Wait(std::chrono::milliseconds(0)) >= 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_THAT(p->Stdout(), HasSubstr("serving")) << p->Stderr();
    return p;
  }

  std::string dir_;
  std::vector<std::unique_ptr<Subprocess>> procs_;
};

std::map<std::string, std::string> KeyValues(const std::string& out,
                                             std::vector<std::string>* updates) {
  std::map<std::string, std::string> kv;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    std::pair<std::string, std::string> p = absl::StrSplit(line, absl::MaxSplits('=', 1));
    if (p.first == "update_device") {
      updates->push_back(p.second);
    } else if (!p.first.empty()) {
      kv[p.first] = p.second;
    }
  }
  return kv;
}

// Between-graph async training: 2 ps (trainer serve) and 2 worker processes, each
// with its own graph and client, variables on the ps (the first kernel split across
// both). Every worker step lands in global_step, and the model learns.
TEST_F(ClusterTest, BetweenGraphAsyncTrainingOnTwoPsAndTwoWorkers) {
  std::map<std::string, std::vector<std::string>> jobs = {
      {"ps", {Addr(PickFreePort()), Addr(PickFreePort())}},
      {"worker", {Addr(PickFreePort()), Addr(PickFreePort())}}};
  Subprocess* ps0 = Serve(TfConfig(jobs, "ps", 0), "ps0");
  Subprocess* ps1 = Serve(TfConfig(jobs, "ps", 1), "ps1");
  const int kSteps = 300;
  std::vector<std::string> common = {"--steps", std::to_string(kSteps), "--batch", "100"};
  std::vector<std::string> chief_args = {kWorker, "--shutdown_ps"};
  chief_args.insert(chief_args.end(), common.begin(), common.end());
  std::vector<std::string> other_args = {kWorker};
  other_args.insert(other_args.end(), common.begin(), common.end());
  Subprocess* w0 = Start(chief_args, "worker0", {"TF_CONFIG=" + TfConfig(jobs, "worker", 0)});
  Subprocess* w1 = Start(other_args, "worker1", {"TF_CONFIG=" + TfConfig(jobs, "worker", 1)});
  ASSERT_EQ(w1->Wait(kTimeout), 0) << w1->Stderr();
  ASSERT_EQ(w0->Wait(kTimeout), 0) << w0->Stderr();

  std::vector<std::string> updates0, updates1;
  auto out0 = KeyValues(w0->Stdout(), &updates0);
  auto out1 = KeyValues(w1->Stdout(), &updates1);
  EXPECT_EQ(out0["worker_steps"], std::to_string(kSteps));
  EXPECT_EQ(out1["worker_steps"], std::to_string(kSteps));
  EXPECT_EQ(out0["global_step"], std::to_string(2 * kSteps));  // Both workers' updates.
  double accuracy = std::stod(out0["accuracy"]);
  EXPECT_GE(accuracy, 0.80);
  std::printf("async 2 ps x 2 workers, %d steps each: accuracy %.4f\n", kSteps, accuracy);
  // Every optimizer update ran on a ps task, and both ps tasks hold variables.
  ASSERT_FALSE(updates0.empty());
  bool on_ps0 = false, on_ps1 = false;
  for (const std::string& u : updates0) {
    EXPECT_THAT(u, HasSubstr("/job:ps/replica:0/task:")) << u;
    on_ps0 |= u.find("/job:ps/replica:0/task:0/") != std::string::npos;
    on_ps1 |= u.find("/job:ps/replica:0/task:1/") != std::string::npos;
  }
  EXPECT_TRUE(on_ps0 && on_ps1);
  bool part0_on_ps0 = false, part1_on_ps1 = false;
  for (const std::string& u : updates1) {
    part0_on_ps0 |= u.find("layer1/kernel/part_0") != std::string::npos &&
                    u.find("/job:ps/replica:0/task:0/") != std::string::npos;
    part1_on_ps1 |= u.find("layer1/kernel/part_1") != std::string::npos &&
                    u.find("/job:ps/replica:0/task:1/") != std::string::npos;
  }
  EXPECT_TRUE(part0_on_ps0 && part1_on_ps1) << "the partitioned kernel is split across the ps";
  // The chief shut the ps tasks down cleanly.
  EXPECT_EQ(ps0->Wait(std::chrono::seconds(30)), 0);
  EXPECT_EQ(ps1->Wait(std::chrono::seconds(30)), 0);
  EXPECT_THAT(ps0->Stdout(), HasSubstr("stopped: training finished"));
}

// A ps killed with SIGKILL: the client's next step fails fast with UNAVAILABLE or
// ABORTED; the ps restarted on the same port is a new incarnation, stale sessions
// fail with ABORTED and a new session works.
TEST_F(ClusterTest, KilledPsFailsTheStepFastAndItsRestartIsRecognised) {
  std::map<std::string, std::vector<std::string>> jobs = {{"ps", {Addr(PickFreePort())}},
                                                          {"worker", {Addr(PickFreePort())}}};
  std::string ps_config = TfConfig(jobs, "ps", 0);
  Subprocess* ps = Serve(ps_config, "ps_a");
  ClusterSpec cluster;
  ASSERT_TRUE(cluster.AddJob("ps", jobs["ps"]).ok());
  ASSERT_TRUE(cluster.AddJob("worker", jobs["worker"]).ok());
  ServerOptions so;
  so.cluster = cluster;
  so.task = {"worker", 0};
  auto worker = Server::Create(so);
  ASSERT_TRUE(worker.ok()) << worker.status();

  Scope root = Scope::NewRootScope();
  Scope on_ps = root.WithDevice("/job:ps/task:0");
  ops::Variable v(on_ps, "v", ops::Const(on_ps, 1.0f));
  Output inc = ops::AssignAdd(on_ps, v, ops::Const(on_ps, 1.0f));
  Output twice = ops::Mul(root, v.value(), ops::Const(root, 2.0f));
  Node* init = ops::GlobalVariablesInitializer(root);
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  SessionOptions opts;
  opts.target = (*worker)->target();
  opts.wait_for_workers_ms = 10000;
  auto session = GrpcSession::Create(def, opts);
  ASSERT_TRUE(session.ok()) << session.status();
  auto devices_before = (*session)->ListDevices();
  ASSERT_TRUE(devices_before.ok());
  ASSERT_TRUE((*session)->Run({}, {}, {init->name()}).ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE((*session)->Run({}, {inc.name()}).ok());
  // The step that will fail is registered and has run: the failure is a step's, not a
  // registration's.
  ASSERT_TRUE((*session)->Run({}, {twice.name()}, {inc.node->name()}).ok());

  ps->Kill(SIGKILL);
  auto t0 = std::chrono::steady_clock::now();
  // A step that waited for the dead ps instead of failing would end DEADLINE_EXCEEDED.
  RunOptions bounded;
  bounded.timeout_ms = 60000;
  auto failed = (*session)->Run({}, {twice.name()}, {inc.node->name()}, bounded, nullptr);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(failed.status().code() == absl::StatusCode::kUnavailable ||
              failed.status().code() == absl::StatusCode::kAborted)
      << failed.status();
  EXPECT_THAT(failed.status().message(), HasSubstr("/job:ps/replica:0/task:0"));
  std::printf("step after SIGKILL of the ps failed in %.3f s: %s\n", seconds,
              std::string(failed.status().message()).c_str());

  Serve(ps_config, "ps_b");  // Same port, new process, new incarnation.
  absl::Status stale;
  for (int i = 0; i < 50; ++i) {  // The channel reconnects within its backoff.
    stale = (*session)->Run({}, {twice.name()}).status();
    if (stale.code() != absl::StatusCode::kUnavailable) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(stale.code(), absl::StatusCode::kAborted) << stale;
  auto fresh = GrpcSession::Create(def, opts);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  auto devices_after = (*fresh)->ListDevices();
  ASSERT_TRUE(devices_after.ok());
  uint64_t inc_before = 0, inc_after = 0;
  for (const auto& d : *devices_before) {
    if (d.name() == "/job:ps/replica:0/task:0/device:CPU:0") inc_before = d.incarnation();
  }
  for (const auto& d : *devices_after) {
    if (d.name() == "/job:ps/replica:0/task:0/device:CPU:0") inc_after = d.incarnation();
  }
  EXPECT_NE(inc_before, 0u);
  EXPECT_NE(inc_after, 0u);
  EXPECT_NE(inc_before, inc_after);
  ASSERT_TRUE((*fresh)->Run({}, {}, {init->name()}).ok());
  auto out = (*fresh)->Run({}, {twice.name()});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 2.0f);  // The restarted ps lost its variables.
}

// A ps frozen (SIGSTOP: its connections stay open, nothing answers) while it runs a
// step: the step fails DEADLINE_EXCEEDED at SessionOptions::operation_timeout_ms
// instead of waiting for ever (a step started while it is frozen fails UNAVAILABLE at
// once: no new connection completes); the same session runs steps again once the ps
// thaws.
TEST_F(ClusterTest, FrozenPsFailsTheStepAtTheOperationTimeoutAndThawedServesAgain) {
  std::map<std::string, std::vector<std::string>> jobs = {{"ps", {Addr(PickFreePort())}},
                                                          {"worker", {Addr(PickFreePort())}}};
  Subprocess* ps = Serve(TfConfig(jobs, "ps", 0), "ps");
  ClusterSpec cluster;
  ASSERT_TRUE(cluster.AddJob("ps", jobs["ps"]).ok());
  ASSERT_TRUE(cluster.AddJob("worker", jobs["worker"]).ok());
  auto worker = Server::Create({.cluster = cluster, .task = {"worker", 0}});
  ASSERT_TRUE(worker.ok()) << worker.status();
  Scope root = Scope::NewRootScope();
  Scope on_ps = root.WithDevice("/job:ps/task:0");
  // About a second of work on the ps (one thread): the freeze lands inside it.
  Output m = ops::Fill(on_ps, ops::ConstInt64(on_ps, {2500, 2500}), ops::Const(on_ps, 1e-3f));
  Output slow =
      ops::Sum(on_ps, ops::MatMul(on_ps, ops::MatMul(on_ps, m, m), m), std::vector<int32_t>{0, 1});
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  SessionOptions opts;
  opts.target = (*worker)->target();
  opts.wait_for_workers_ms = 10000;
  opts.operation_timeout_ms = 3000;
  auto session = GrpcSession::Create(def, opts);
  ASSERT_TRUE(session.ok()) << session.status();
  const auto t_ok = std::chrono::steady_clock::now();
  ASSERT_TRUE((*session)->Run({}, {slow.name()}).ok());
  std::printf("the step takes %.3f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t_ok).count());

  std::thread freezer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ps->Kill(SIGSTOP);
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto frozen = (*session)->Run({}, {slow.name()});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  freezer.join();
  ASSERT_FALSE(frozen.ok()) << "the step ended although the ps was frozen";
  EXPECT_EQ(frozen.status().code(), absl::StatusCode::kDeadlineExceeded) << frozen.status();
  // The deadline, plus the margins the master's and the client's calls add (1 s, 2 s).
  EXPECT_LT(seconds, 3.0 + 3.0 + 3.0) << "the step waited past its operation timeout";
  std::printf("step to a frozen ps failed after %.3f s: %s\n", seconds,
              std::string(frozen.status().message()).c_str());

  ps->Kill(SIGCONT);
  absl::StatusOr<std::vector<Tensor>> thawed;
  for (int i = 0; i < 50; ++i) {
    thawed = (*session)->Run({}, {slow.name()});
    if (thawed.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_TRUE(thawed.ok()) << thawed.status();
  std::printf(
      "thawed: a step ran again %.3f s after SIGCONT\n",
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - seconds);
  EXPECT_NEAR((*thawed)[0].scalar<float>(), 2500.0 * 2500 * 2500 * 2500 * 1e-9, 40.0);  // N^4 a^3
}

absl::Status RawCall(grpc::GenericStub* stub, const std::string& method,
                     const grpc::ByteBuffer& request, const std::string& token = "") {
  grpc::ClientContext ctx;
  if (!token.empty()) ctx.AddMetadata(kTokenMetadataKey, token);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::ByteBuffer response;
  absl::Notification done;
  grpc::Status result;
  stub->UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
    result = s;
    done.Notify();
  });
  done.WaitForNotification();
  return FromGrpcStatus(result);
}

grpc::ByteBuffer Bytes(const std::string& s) {
  grpc::Slice slice(s);
  return grpc::ByteBuffer(&slice, 1);
}

// Garbage, an oversize shape, an unknown op, a wrong dtype and a missing token: each
// a clear error, and the server goes on serving.
TEST_F(ClusterTest, HostileRequestsGetErrorsAndTheServerKeepsServing) {
  std::map<std::string, std::vector<std::string>> jobs = {{"ps", {Addr(PickFreePort())}}};
  Subprocess* ps = Serve(TfConfig(jobs, "ps", 0), "ps", {"--token", "sesame"});
  auto channel = NewGrpcChannel(jobs["ps"][0], {});
  ASSERT_TRUE(channel.ok());
  grpc::GenericStub stub(*channel);
  const std::string w = kWorkerServicePrefix;
  WireMessage<proto::GetStatusRequest> status_req;

  absl::Status no_token = RawCall(&stub, w + "GetStatus", Bytes(EncodeWireFlat(status_req)));
  EXPECT_EQ(no_token.code(), absl::StatusCode::kUnauthenticated) << no_token;
  EXPECT_EQ(RawCall(&stub, w + "GetStatus", Bytes(EncodeWireFlat(status_req)), "wrong").code(),
            absl::StatusCode::kUnauthenticated);

  absl::Status garbage = RawCall(&stub, w + "RunGraph", Bytes("\x17garbage\xff bytes"), "sesame");
  EXPECT_EQ(garbage.code(), absl::StatusCode::kInvalidArgument) << garbage;
  EXPECT_THAT(garbage.message(), HasSubstr("malformed RPC message"));

  // A tensor claiming 2^62 elements.
  proto::WireEnvelope env;
  proto::WireTensor* t = env.add_tensors();
  t->set_dtype(proto::DT_FLOAT);
  t->add_dim(int64_t{1} << 31);
  t->add_dim(int64_t{1} << 31);
  t->set_num_bytes(uint64_t{1} << 62);
  std::string e = env.SerializeAsString();
  uint32_t n = e.size();
  std::string huge(4, '\0');
  std::memcpy(huge.data(), &n, 4);
  absl::Status big = RawCall(&stub, w + "RunGraph", Bytes(huge + e), "sesame");
  EXPECT_EQ(big.code(), absl::StatusCode::kInvalidArgument) << big;

  EXPECT_EQ(RawCall(&stub, w + "NoSuchMethod", Bytes(""), "sesame").code(),
            absl::StatusCode::kUnimplemented);

  // An unknown op and a wrong dtype through the worker service.
  GrpcWorkerClient client(*channel, "sesame");
  WireMessage<proto::CreateWorkerSessionRequest> cs;
  WireMessage<proto::CreateWorkerSessionResponse> csr;
  cs.proto.set_session_handle("hostile");
  ASSERT_TRUE(
      CallAndWait<WorkerInterface>(&client, &WorkerInterface::CreateWorkerSessionAsync, cs, &csr)
          .ok());
  WireMessage<proto::RegisterGraphRequest> rg;
  WireMessage<proto::RegisterGraphResponse> rgr;
  rg.proto.set_session_handle("hostile");
  auto* node = rg.proto.mutable_graph()->add_node();
  node->set_name("evil");
  node->set_op("LaunchMissiles");
  node->set_device("/job:ps/replica:0/task:0/device:CPU:0");
  absl::Status unknown =
      CallAndWait<WorkerInterface>(&client, &WorkerInterface::RegisterGraphAsync, rg, &rgr);
  EXPECT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.message(), HasSubstr("LaunchMissiles"));
  node->set_op("_Arg");
  (*node->mutable_attr())["T"].set_type(proto::DT_FLOAT);
  (*node->mutable_attr())["index"].set_i(0);
  ASSERT_TRUE(
      CallAndWait<WorkerInterface>(&client, &WorkerInterface::RegisterGraphAsync, rg, &rgr).ok());
  WireMessage<proto::RunGraphRequest> run;
  WireMessage<proto::RunGraphResponse> runr;
  run.proto.set_session_handle("hostile");
  run.proto.set_graph_handle(rgr.proto.graph_handle());
  run.tensors.push_back(Tensor::Scalar<int32_t>(1));
  absl::Status dtype =
      CallAndWait<WorkerInterface>(&client, &WorkerInterface::RunGraphAsync, run, &runr);
  EXPECT_EQ(dtype.code(), absl::StatusCode::kInvalidArgument) << dtype;
  EXPECT_THAT(dtype.message(), HasSubstr("int32"));

  // Still serving, and the refusals were logged.
  WireMessage<proto::GetStatusResponse> st;
  absl::Status ok =
      CallAndWait<WorkerInterface>(&client, &WorkerInterface::GetStatusAsync, status_req, &st);
  EXPECT_TRUE(ok.ok()) << ok;
  EXPECT_EQ(st.proto.device_size(), 1);
  EXPECT_TRUE(ps->running());
  EXPECT_THAT(ps->Stderr(), HasSubstr("no cluster token"));
}

TEST_F(ClusterTest, ServeUsageErrors) {
  auto run = [&](std::vector<std::string> args, std::string* err) {
    args.insert(args.begin(), kTrainer);
    Subprocess* p = Start(args, absl::StrCat("usage", procs_.size()));
    int code = p->Wait(std::chrono::seconds(30));
    *err = p->Stderr();
    return code;
  };
  std::string err;
  EXPECT_EQ(run({"serve"}, &err), 2);
  EXPECT_THAT(err, HasSubstr("needs a cluster"));
  EXPECT_EQ(run({"serve", "--cluster", "{\"cluster\": {\"ps\": [\"127.0.0.1:1\"]}}"}, &err), 2);
  EXPECT_THAT(err, HasSubstr("--job and --task"));
  EXPECT_EQ(run({"serve", "--cluster", "{\"cluster\": {\"ps\": [\"127.0.0.1:1\"]}}", "--job", "ps",
                 "--task", "3"},
                &err),
            2);
  EXPECT_THAT(err, HasSubstr("not in the cluster"));
  EXPECT_EQ(run({"serve", "--cluster", "{\"cluster\": {\"ps\": [\"nonsense\"]}}"}, &err), 2);
  EXPECT_THAT(err, HasSubstr("nonsense"));
  const std::string toml = dir_ + "/bad_cluster.toml";
  ASSERT_TRUE(env::WriteFileAtomic(toml, "[cluster]\nps = [\"127.0.0.1:1\", 7]\n").ok());
  EXPECT_EQ(run({"serve", "--cluster", toml, "--job", "ps", "--task", "0"}, &err), 2);
  EXPECT_THAT(err, HasSubstr("bad_cluster.toml:2"));
  EXPECT_EQ(run({"serve", "--cluster", "{\"cluster\": {\"ps\": [\"127.0.0.1:1\"]}}", "--job", "ps",
                 "--task", "0", "--channels_per_task", "0"},
                &err),
            2);
  EXPECT_THAT(err, HasSubstr("--channels_per_task"));
}

// The seeds' programs against server processes: a two-task "local" job with ops
// pinned to task 1, and w, b on a ps with w+b, w*b, w/b on three workers, run by a
// client in this process through worker 0's master.
TEST_F(ClusterTest, SeedProgramsOnServerProcesses) {
  std::map<std::string, std::vector<std::string>> local = {
      {"local", {Addr(PickFreePort()), Addr(PickFreePort())}}};
  Serve(TfConfig(local, "local", 0), "local0");
  // Task 1 reads the cluster from a TOML file, as a job config's [cluster] table.
  const std::string toml = dir_ + "/cluster.toml";
  ASSERT_TRUE(env::WriteFileAtomic(toml, absl::StrCat("[cluster]\nlocal = [\"", local["local"][0],
                                                      "\", \"", local["local"][1], "\"]\n"))
                  .ok());
  Serve(toml, "local1", {"--job", "local", "--task", "1"});
  {
    Scope root = Scope::NewRootScope();
    Output x = ops::Const(root.WithDevice("/job:local/task:1"), {1.0f, 2.0f}, TensorShape({2}));
    Output y = ops::Square(root.WithDevice("/job:local/task:1"), x);
    proto::GraphDef def;
    root.graph()->ToGraphDef(&def);
    SessionOptions opts;
    opts.target = "grpc://" + local["local"][0];
    auto session = NewSession(def, opts);
    ASSERT_TRUE(session.ok()) << session.status();
    auto out = (*session)->Run({}, {y.name()});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_THAT((*out)[0].flat<float>(), ::testing::ElementsAre(1, 4));
  }
  std::map<std::string, std::vector<std::string>> jobs = {
      {"ps", {Addr(PickFreePort())}},
      {"worker", {Addr(PickFreePort()), Addr(PickFreePort()), Addr(PickFreePort())}}};
  Serve(TfConfig(jobs, "ps", 0), "ps");
  for (int i = 0; i < 3; ++i) Serve(TfConfig(jobs, "worker", i), absl::StrCat("worker", i));
  Scope root = Scope::NewRootScope();
  Scope ps = root.WithDevice("/job:ps/task:0");
  ops::Variable w(ps, "w", ops::Const(ps, {3.0f, 6.0f}, TensorShape({2})));
  ops::Variable b(ps, "b", ops::Const(ps, {1.0f, 2.0f}, TensorShape({2})));
  Output sum = ops::Add(root.WithDevice("/job:worker/task:0"), w.value(), b.value());
  Output prod = ops::Mul(root.WithDevice("/job:worker/task:1"), w.value(), b.value());
  Output quot = ops::Div(root.WithDevice("/job:worker/task:2"), w.value(), b.value());
  Node* init = ops::GlobalVariablesInitializer(root);
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  SessionOptions opts;
  opts.target = "grpc://" + jobs["worker"][0];
  auto session = NewSession(def, opts);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Run({}, {}, {init->name()}).ok());
  auto out = (*session)->Run({}, {sum.name(), prod.name(), quot.name()});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].flat<float>(), ::testing::ElementsAre(4, 8));
  EXPECT_THAT((*out)[1].flat<float>(), ::testing::ElementsAre(3, 12));
  EXPECT_THAT((*out)[2].flat<float>(), ::testing::ElementsAre(3, 3));
}

// Mutual TLS: a client with a certificate from the cluster's CA runs a step; a client
// without TLS, or with TLS but no certificate, is refused.
TEST_F(ClusterTest, MutualTlsServesOnlyCertifiedClients) {
  const std::string tls = std::string(TANDEM_SOURCE_DIR) + "/tests/data/tls/";
  std::map<std::string, std::vector<std::string>> jobs = {{"worker", {Addr(PickFreePort())}}};
  Serve(TfConfig(jobs, "worker", 0), "tls_worker",
        {"--tls_cert", tls + "server.pem", "--tls_key", tls + "server.key", "--tls_ca",
         tls + "ca.pem"});
  Scope root = Scope::NewRootScope();
  Output c = ops::Const(root, 42.0f);
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  SessionOptions opts;
  opts.target = "grpc://" + jobs["worker"][0];
  opts.wait_for_workers_ms = 1000;
  TransportSecurity client;
  client.ca_file = tls + "ca.pem";
  client.cert_file = tls + "client.pem";
  client.key_file = tls + "client.key";
  auto good = NewSession(def, opts, client);
  ASSERT_TRUE(good.ok()) << good.status();
  auto out = (*good)->Run({}, {c.name()});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 42.0f);

  EXPECT_FALSE(NewSession(def, opts).ok());  // Plaintext to a TLS port.
  TransportSecurity no_cert;
  no_cert.ca_file = tls + "ca.pem";
  EXPECT_FALSE(NewSession(def, opts, no_cert).ok());
  TransportSecurity missing;
  missing.ca_file = tls + "no_such_ca.pem";
  auto unreadable = NewSession(def, opts, missing);
  ASSERT_FALSE(unreadable.ok());
  EXPECT_THAT(unreadable.status().message(), HasSubstr("no_such_ca.pem"));
}

}  // namespace
}  // namespace tandem

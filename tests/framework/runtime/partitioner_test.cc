// The partitioner cuts a placed graph per device with _Send/_Recv on every cut edge.
// Each test then executes every partition concurrently in this process (one Executor
// per partition, one LocalRendezvous per step, as a distributed step would) and checks
// the fetched values against a DirectSession run of the unpartitioned graph.
#include "framework/runtime/partitioner.h"

#include <algorithm>
#include <thread>

#include "absl/synchronization/notification.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/nn_ops.h"
#include "framework/ops/state_ops.h"
#include "framework/runtime/direct_session.h"
#include "framework/runtime/executor.h"
#include "framework/runtime/placer.h"
#include "framework/runtime/rendezvous.h"
#include "framework/runtime/runtime_kernels.h"
#include "framework/runtime/subgraph.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

constexpr char kPs[] = "/job:ps/replica:0/task:0/device:CPU:0";
constexpr char kW0[] = "/job:worker/replica:0/task:0/device:CPU:0";
constexpr char kW1[] = "/job:worker/replica:0/task:1/device:CPU:0";
constexpr char kW2[] = "/job:worker/replica:0/task:2/device:CPU:0";

std::vector<float> Values(const Tensor& t) {
  auto f = t.flat<float>();
  return {f.begin(), f.end()};
}

int CountOps(const proto::GraphDef& def, absl::string_view op) {
  int n = 0;
  for (const auto& nd : def.node()) n += nd.op() == op;
  return n;
}

// A simulated cluster: one CPU device per task (their resources persist across steps),
// running a client graph the way a master and its workers would.
class InProcessCluster {
 public:
  InProcessCluster() {
    EnsureKernels();
    for (const char* name : {kPs, kW0, kW1, kW2}) {
      devices_.push_back(std::make_unique<Device>(name, kDeviceCpu));
      names_.push_back(name);
      incarnations_[name] = devices_.back()->incarnation();
    }
  }

  // Prunes `graph` to what `fetches` and `targets` need, places it (client on worker 0),
  // partitions it per device, and runs every partition at once on one rendezvous. The
  // first failing partition aborts the rendezvous; so does `timeout_ms`.
  absl::StatusOr<std::vector<Tensor>> Run(const Graph& graph, std::vector<std::string> fetches,
                                          std::vector<std::string> targets = {},
                                          int64_t timeout_ms = 20'000) {
    std::vector<std::string> needed = targets;
    for (const std::string& f : fetches) {
      TANDEM_ASSIGN_OR_RETURN(Output o, graph.FindOutput(f));
      needed.push_back(o.node->name());
    }
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Graph> pruned,
                            BuildExecutableGraph(graph, {}, {}, needed));
    PlacerOptions placer;
    placer.default_device = "/job:worker/replica:0/task:0";
    TANDEM_RETURN_IF_ERROR(PlaceGraph(pruned.get(), names_, placer));
    PartitionOptions popts;
    popts.incarnations = incarnations_;
    TANDEM_ASSIGN_OR_RETURN(partitions_, PartitionGraph(*pruned, popts));
    return RunPartitions(fetches, timeout_ms);
  }

  // Runs the given partitions once (e.g. a tampered copy of partitions()).
  absl::StatusOr<std::vector<Tensor>> RunOnly(std::map<std::string, proto::GraphDef> parts,
                                              const std::vector<std::string>& fetches,
                                              int64_t timeout_ms) {
    partitions_ = std::move(parts);
    return RunPartitions(fetches, timeout_ms);
  }

  // Runs `partitions_` (device name -> GraphDef) once.
  absl::StatusOr<std::vector<Tensor>> RunPartitions(const std::vector<std::string>& fetches,
                                                    int64_t timeout_ms) {
    struct Part {
      std::unique_ptr<Executor> exec;
      std::vector<int> fetch_index;  // Position in `fetches` of each local retval.
      std::vector<Tensor> rets;
      absl::Status status;
    };
    std::vector<Part> parts;
    for (const auto& [device_name, def] : partitions_) {
      TANDEM_ASSIGN_OR_RETURN(Device * device, Lookup(device_name));
      TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g,
                              Graph::FromGraphDef(def, OpRegistry::Global()));
      Part p;
      std::vector<std::string> local_fetches, all;
      for (size_t i = 0; i < fetches.size(); ++i) {
        std::string node;
        int index = 0;
        bool control = false;
        if (!ParseTensorName(fetches[i], &node, &index, &control)) {
          return absl::InvalidArgumentError(absl::StrCat("bad fetch '", fetches[i], "'"));
        }
        if (g->FindNode(node) != nullptr) {
          local_fetches.push_back(fetches[i]);
          p.fetch_index.push_back(static_cast<int>(i));
        }
      }
      for (const auto& n : g->nodes()) all.push_back(n->name());
      TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Graph> sub,
                              BuildExecutableGraph(*g, {}, local_fetches, all));
      TANDEM_ASSIGN_OR_RETURN(p.exec,
                              Executor::Create(std::move(sub), device, KernelRegistry::Global()));
      parts.push_back(std::move(p));
    }
    LocalRendezvous rendezvous;
    ThreadPool pool("partitions", 4);
    absl::Notification all_done;
    std::thread watchdog([&] {
      if (!all_done.WaitForNotificationWithTimeout(absl::Milliseconds(timeout_ms))) {
        rendezvous.StartAbort(absl::DeadlineExceededError(
            absl::StrCat("step did not finish within ", timeout_ms, " ms")));
      }
    });
    std::vector<std::thread> threads;
    absl::Mutex mu;
    absl::Status first;
    for (size_t i = 0; i < parts.size(); ++i) {
      threads.emplace_back([&, i] {
        Part& p = parts[i];
        ExecutorArgs args;
        args.rendezvous = &rendezvous;
        args.retvals = &p.rets;
        args.inter_op_pool = &pool;
        p.status = p.exec->Run(args);
        if (!p.status.ok()) {
          {
            absl::MutexLock lock(&mu);
            if (first.ok()) first = p.status;
          }
          rendezvous.StartAbort(p.status);
        }
      });
    }
    for (auto& t : threads) t.join();
    all_done.Notify();
    watchdog.join();
    statuses_.clear();
    for (const Part& p : parts) statuses_.push_back(p.status);
    if (!first.ok()) return first;
    std::vector<Tensor> out(fetches.size());
    for (Part& p : parts) {
      for (size_t j = 0; j < p.fetch_index.size(); ++j) out[p.fetch_index[j]] = p.rets[j];
    }
    return out;
  }

  const std::map<std::string, proto::GraphDef>& partitions() const { return partitions_; }
  const std::vector<absl::Status>& statuses() const { return statuses_; }
  Device* device(const std::string& name) { return *Lookup(name); }

 private:
  absl::StatusOr<Device*> Lookup(const std::string& name) {
    for (auto& d : devices_) {
      if (d->name() == name) return d.get();
    }
    return absl::NotFoundError(name);
  }
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<std::string> names_;
  absl::flat_hash_map<std::string, uint64_t> incarnations_;
  std::map<std::string, proto::GraphDef> partitions_;
  std::vector<absl::Status> statuses_;
};

// The unpartitioned reference: the same graph in a DirectSession (one device).
std::vector<Tensor> RunLocally(const Graph& graph, const std::vector<std::string>& fetches,
                               const std::vector<std::string>& init_targets = {}) {
  proto::GraphDef def;
  graph.ToGraphDef(&def);
  auto session = NewDirectSession(def);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!init_targets.empty()) {
    EXPECT_TRUE((*session)->Run({}, {}, init_targets).ok());
  }
  auto out = (*session)->Run({}, fetches, {});
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::vector<Tensor>();
}

void ExpectSameValues(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].shape(), want[i].shape()) << "fetch " << i;
    EXPECT_EQ(Values(got[i]), Values(want[i])) << "fetch " << i;
  }
}

// The placement example: w and b on the ps, w+b, w*b and w/b on three workers.
TEST(PartitionerTest, VariablesOnPsArithmeticOnWorkers) {
  Scope root = Scope::NewRootScope();
  Scope ps = root.WithDevice("/job:ps/task:0");
  ops::Variable w(ps, "w", ops::Const(ps, {1, 2, 3}, TensorShape({3})));
  ops::Variable b(ps, "b", ops::Const(ps, {4, 5, 6}, TensorShape({3})));
  Output sum =
      ops::Add(root.WithOpName("sum").WithDevice("/job:worker/task:0"), w.value(), b.value());
  Output prod =
      ops::Mul(root.WithOpName("prod").WithDevice("/job:worker/task:1"), w.value(), b.value());
  Output quot =
      ops::Div(root.WithOpName("quot").WithDevice("/job:worker/task:2"), w.value(), b.value());
  Node* init = ops::GlobalVariablesInitializer(root.WithDevice("/job:ps/task:0"));
  ASSERT_TRUE(root.ok()) << root.status();
  const std::vector<std::string> fetches = {sum.name(), prod.name(), quot.name()};

  InProcessCluster cluster;
  ASSERT_TRUE(cluster.Run(*root.graph(), {}, {init->name()}).ok());
  auto got = cluster.Run(*root.graph(), fetches);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameValues(*got, RunLocally(*root.graph(), fetches, {init->name()}));
  EXPECT_EQ(Values((*got)[0]), (std::vector<float>{5, 7, 9}));
  // The variables live in the ps device's resources.
  EXPECT_EQ(cluster.partitions().size(), 4u);
  for (const char* worker : {kW0, kW1, kW2}) {
    const proto::GraphDef& part = cluster.partitions().at(worker);
    EXPECT_EQ(CountOps(part, "_Recv"), 2) << worker;
    EXPECT_EQ(CountOps(part, "VarHandleOp"), 0) << worker;
  }
  EXPECT_EQ(CountOps(cluster.partitions().at(kPs), "_Send"), 6);
}

TEST(PartitionerTest, ATensorReadTwiceInAnotherPartitionCrossesOnce) {
  Scope root = Scope::NewRootScope();
  Scope ps = root.WithDevice("/job:ps/task:0");
  Output x = ops::Identity(ps.WithOpName("x"), ops::Const(ps, {1, 2}, TensorShape({2})));
  Scope w1 = root.WithDevice("/job:worker/task:1");
  Output a = ops::Mul(w1.WithOpName("a"), x, x);
  Output b = ops::Add(w1.WithOpName("b"), x, a);
  Output c = ops::Sub(root.WithOpName("c").WithDevice("/job:worker/task:2"), x, b);
  ASSERT_TRUE(root.ok()) << root.status();
  InProcessCluster cluster;
  auto got = cluster.Run(*root.graph(), {b.name(), c.name()});
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameValues(*got, RunLocally(*root.graph(), {b.name(), c.name()}));
  const auto& parts = cluster.partitions();
  // x goes once to worker 1 (read by a and b, three input slots) and once to worker 2;
  // b goes to worker 2.
  EXPECT_EQ(CountOps(parts.at(kPs), "_Send"), 2);
  EXPECT_EQ(CountOps(parts.at(kW1), "_Recv"), 1);
  EXPECT_EQ(CountOps(parts.at(kW1), "_Send"), 1);
  EXPECT_EQ(CountOps(parts.at(kW2), "_Recv"), 2);
  // Every key is distinct, and send/recv pairs agree on it.
  std::map<std::string, int> sends, recvs;
  for (const auto& [dev, def] : parts) {
    for (const auto& nd : def.node()) {
      if (nd.op() != "_Send" && nd.op() != "_Recv") continue;
      EXPECT_EQ(
          nd.attr().at("send_device_incarnation").i(),
          static_cast<int64_t>(cluster.device(nd.attr().at("send_device").s())->incarnation()));
      std::string key = nd.attr().at("tensor_name").s() + "|" + nd.attr().at("recv_device").s();
      ++(nd.op() == "_Send" ? sends : recvs)[key];
    }
  }
  EXPECT_EQ(sends, recvs);
  for (const auto& [key, n] : sends) EXPECT_EQ(n, 1) << key;
}

TEST(PartitionerTest, AChainCrossingDevicesSeveralTimes) {
  Scope root = Scope::NewRootScope();
  Scope w0 = root.WithDevice("/job:worker/task:0");
  Scope ps = root.WithDevice("/job:ps/task:0");
  Scope w1 = root.WithDevice("/job:worker/task:1");
  Output x = ops::Const(w0.WithOpName("x"), {1, -2, 3, 0.5}, TensorShape({2, 2}));
  Output y = ops::Mul(ps.WithOpName("y"), x, ops::Const(ps, 2.0f));
  Output z = ops::Add(w1.WithOpName("z"), y, ops::Const(w1, 1.0f));
  Output u = ops::Mul(w0.WithOpName("u"), z, x);
  Output v = ops::Sub(ps.WithOpName("v"), u, y);
  Output t = ops::Div(w1.WithOpName("t"), v, z);
  ASSERT_TRUE(root.ok()) << root.status();
  const std::vector<std::string> fetches = {t.name(), u.name()};
  InProcessCluster cluster;
  for (int step = 0; step < 3; ++step) {
    auto got = cluster.Run(*root.graph(), fetches);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectSameValues(*got, RunLocally(*root.graph(), fetches));
  }
}

// The bits of a bfloat16 tensor.
std::vector<uint16_t> Bf16Bits(const Tensor& t) {
  std::vector<uint16_t> bits;
  for (int64_t i = 0; i < t.NumElements(); ++i) bits.push_back(t.flat<bfloat16>()[i].bits);
  return bits;
}

// bfloat16 values cross a cut edge both ways: each _Send and _Recv on a bf16 edge
// carries bfloat16 (a _Recv of another dtype would make the step fail), and the values
// are the unpartitioned graph's, bit for bit.
TEST(PartitionerTest, Bfloat16EdgesGetSendAndRecvOfThatDType) {
  const std::vector<float> xs = {1.0f / 3, -2.7f, 1000.1f, 0.15f};
  Scope root = Scope::NewRootScope();
  Scope ps = root.WithDevice("/job:ps/task:0");
  Output x = ops::Const(ps.WithOpName("x"), Tensor::FromVector<float>(xs, TensorShape({4})));
  Output xb = ops::Cast(ps.WithOpName("xb"), x, DType::kBFloat16);
  Output r = ops::Relu(root.WithOpName("r").WithDevice("/job:worker/task:1"), xb);
  Output back = ops::Cast(ps.WithOpName("back"), r, DType::kFloat);
  ASSERT_TRUE(root.ok()) << root.status();
  const std::vector<std::string> fetches = {r.name(), back.name()};
  InProcessCluster cluster;
  auto got = cluster.Run(*root.graph(), fetches);
  ASSERT_TRUE(got.ok()) << got.status();
  std::vector<Tensor> want = RunLocally(*root.graph(), fetches);
  ASSERT_EQ(want.size(), 2u);
  ASSERT_EQ((*got)[0].dtype(), DType::kBFloat16);
  EXPECT_EQ(Bf16Bits((*got)[0]), Bf16Bits(want[0]));
  EXPECT_EQ(Values((*got)[1]), Values(want[1]));
  for (size_t i = 0; i < xs.size(); ++i) {  // Relu of the rounded value, widened back.
    EXPECT_EQ((*got)[1].flat<float>()[i], std::max(0.0f, static_cast<float>(bfloat16(xs[i]))))
        << "element " << i;
  }
  // One edge each way (xb to worker 1, r back to the ps, r's fetch stays on worker 1),
  // every one of them bfloat16.
  const auto& parts = cluster.partitions();
  int edges = 0;
  for (const auto& [dev, def] : parts) {
    for (const auto& nd : def.node()) {
      const char* attr = nd.op() == "_Send" ? "T" : nd.op() == "_Recv" ? "tensor_type" : nullptr;
      if (attr == nullptr) continue;
      ++edges;
      EXPECT_EQ(static_cast<int>(nd.attr().at(attr).type()), static_cast<int>(DType::kBFloat16))
          << nd.name() << " on " << dev;
    }
  }
  EXPECT_EQ(CountOps(parts.at(kPs), "_Send"), 1);
  EXPECT_EQ(CountOps(parts.at(kPs), "_Recv"), 1);
  EXPECT_EQ(edges, 4);
}

// A counter on the ps, a "bump" that adds one to it, and a scope on worker 1.
struct PsCounter {
  Scope root = Scope::NewRootScope();
  Scope ps = root.WithDevice("/job:ps/task:0");
  ops::Variable counter{ps, "counter", ops::Const(ps, 0.0f)};
  Output bump = ops::AssignAdd(ps.WithOpName("bump"), counter, ops::Const(ps, 1.0f));
  Scope w1 = root.WithDevice("/job:worker/task:1");
};

TEST(PartitionerTest, ControlEdgesCrossPartitions) {
  PsCounter g;
  // Fetching "after" needs "bump" only through a control edge from another task.
  Output after = ops::Identity(g.w1.WithOpName("after").WithControlDependencies({g.bump}),
                               ops::Const(g.w1, 7.0f));
  ASSERT_TRUE(g.root.ok()) << g.root.status();
  InProcessCluster cluster;
  ASSERT_TRUE(cluster.Run(*g.root.graph(), {}, {g.counter.initializer()->name()}).ok());
  for (int step = 0; step < 3; ++step) {
    auto got = cluster.Run(*g.root.graph(), {after.name()});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ((*got)[0].scalar<float>(), 7.0f);
  }
  const auto& parts = cluster.partitions();
  ASSERT_EQ(parts.size(), 2u);
  // A dummy Const on the ps side, control-dependent on g.bump, is sent over...
  const proto::NodeDef* dummy = nullptr;
  for (const auto& nd : parts.at(kPs).node()) {
    if (nd.op() == "Const" && nd.input_size() == 1 && nd.input(0) == "^bump") dummy = &nd;
  }
  ASSERT_NE(dummy, nullptr);
  EXPECT_EQ(CountOps(parts.at(kPs), "_Send"), 1);
  // ... and received as a control input of "after".
  for (const auto& nd : parts.at(kW1).node()) {
    if (nd.name() != "after") continue;
    ASSERT_EQ(nd.input_size(), 2);
    EXPECT_THAT(nd.input(1), HasSubstr("^_recv/"));
  }
  auto value = cluster.Run(*g.root.graph(), {g.counter.value().name()});
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ((*value)[0].scalar<float>(), 3.0f);
}

// A train op that is only a target (a NoOp nothing depends on) needs no transfer
// from the ps: the step ends only when the ps partition has run its updates. A NoOp
// that something else waits for keeps it.
TEST(PartitionerTest, ASinkNoOpWaitsForRemoteUpdatesWithoutATransfer) {
  PsCounter g;
  Node* train = ops::NoOp(g.w1.WithOpName("train").WithControlDependencies({g.bump}));
  Node* gate = ops::NoOp(g.w1.WithOpName("gate").WithControlDependencies({g.bump}));
  Output after =
      ops::Identity(g.w1.WithOpName("after").WithControlDependencies(std::vector<Node*>{gate}),
                    ops::Const(g.w1, 7.0f));
  ASSERT_TRUE(g.root.ok()) << g.root.status();
  InProcessCluster cluster;
  ASSERT_TRUE(cluster.Run(*g.root.graph(), {}, {g.counter.initializer()->name()}).ok());
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(cluster.Run(*g.root.graph(), {}, {train->name()}).ok());
  }
  EXPECT_EQ(CountOps(cluster.partitions().at(kPs), "_Send"), 0);
  EXPECT_EQ(CountOps(cluster.partitions().at(kW1), "_Recv"), 0);
  auto value = cluster.Run(*g.root.graph(), {g.counter.value().name()});
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ((*value)[0].scalar<float>(), 3.0f);  // Every step ran its update.
  // "gate" is waited for by "after": its remote control input still crosses.
  auto got = cluster.Run(*g.root.graph(), {after.name()});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(CountOps(cluster.partitions().at(kPs), "_Send"), 1);
  EXPECT_EQ(CountOps(cluster.partitions().at(kW1), "_Recv"), 1);
}

// A small Const read in another partition is copied there instead of crossing every
// step, with its control inputs when they are in that partition; a large one, or one
// that waits for a third partition, crosses.
TEST(PartitionerTest, SmallConstsAreCopiedWhereTheyAreRead) {
  PsCounter g;
  Scope w2 = g.root.WithDevice("/job:worker/task:2");
  Output lr = ops::Const(g.w1.WithOpName("lr"), 0.5f);
  Output big =
      ops::Const(g.w1.WithOpName("big"),
                 Tensor::FromVector<float>(std::vector<float>(16385, 2.0f), TensorShape({16385})));
  Output after_bump =
      ops::Const(g.w1.WithOpName("after_bump").WithControlDependencies({g.bump}), 3.0f);
  Node* w2_op = ops::NoOp(w2.WithOpName("w2_op"));
  Output after_w2 = ops::Const(
      g.w1.WithOpName("after_w2").WithControlDependencies(std::vector<Node*>{w2_op}), 4.0f);
  // lr2 waits for w2_op, but its consumer reads from_w2, which waits for it too.
  Output from_w2 =
      ops::Identity(w2.WithOpName("from_w2").WithControlDependencies(std::vector<Node*>{w2_op}),
                    ops::Const(w2, 5.0f));
  Output lr2 =
      ops::Const(g.w1.WithOpName("lr2").WithControlDependencies(std::vector<Node*>{w2_op}), 6.0f);
  Scope ps = g.ps;
  Output sum =
      ops::AddN(ps.WithOpName("sum"),
                {ops::Mul(ps, ops::Const(ps, 2.0f), lr), ops::Sum(ps, big, std::vector<int32_t>{0}),
                 after_bump, ops::Identity(ps, after_w2), ops::Mul(ps, from_w2, lr2)});
  ASSERT_TRUE(g.root.ok()) << g.root.status();
  InProcessCluster cluster;
  ASSERT_TRUE(cluster.Run(*g.root.graph(), {}, {g.counter.initializer()->name()}).ok());
  for (int step = 1; step <= 3; ++step) {
    auto got = cluster.Run(*g.root.graph(), {sum.name()});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ((*got)[0].scalar<float>(), 1.0f + 2.0f * 16385 + 3 + 4 + 30) << step;
  }
  const auto& parts = cluster.partitions();
  // big, after_w2 and from_w2 cross; lr, after_bump and lr2 are copied.
  EXPECT_EQ(CountOps(parts.at(kPs), "_Recv"), 3);
  EXPECT_EQ(CountOps(parts.at(kW1), "_Send"), 2);
  std::map<std::string, std::vector<std::string>> copies;
  for (const auto& nd : parts.at(kPs).node()) {
    if (nd.op() == "Const" && nd.device() == kPs) {
      copies[nd.name()] = {nd.input().begin(), nd.input().end()};
    }
  }
  EXPECT_EQ(copies.count("lr_1"), 1u);
  EXPECT_EQ(copies["after_bump_1"], std::vector<std::string>{"^bump"});
  EXPECT_EQ(copies["lr2_1"], std::vector<std::string>{});
  // after_bump's copy kept its control input: every step bumped.
  auto value = cluster.Run(*g.root.graph(), {g.counter.value().name()});
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ((*value)[0].scalar<float>(), 3.0f);
}

// A control input from another partition crosses once per destination partition: not
// for a node that another input already orders after it, nor once per repetition.
TEST(PartitionerTest, RemoteControlInputsThatAddNoOrderDoNotCross) {
  PsCounter g;
  Scope w2 = g.root.WithDevice("/job:worker/task:2");
  Scope after = g.w1.WithControlDependencies({g.bump});
  Output a = ops::Identity(after.WithOpName("a"), ops::Const(g.w1, 1.0f));
  // b on worker 2 reads a, which waits for the bump: b's own wait needs no transfer.
  Output b =
      ops::Add(w2.WithOpName("b").WithControlDependencies({g.bump}), a, ops::Const(w2, 1.0f));
  // c repeats its control input.
  Output c = ops::Identity(after.WithOpName("c").WithControlDependencies({g.bump}),
                           ops::Const(g.w1, 2.0f));
  ASSERT_TRUE(g.root.ok()) << g.root.status();
  ASSERT_EQ(c.node->control_inputs().size(), 2u);
  InProcessCluster cluster;
  ASSERT_TRUE(cluster.Run(*g.root.graph(), {}, {g.counter.initializer()->name()}).ok());
  const std::vector<std::string> fetches = {b.name(), c.name()};
  for (int step = 0; step < 3; ++step) {
    auto got = cluster.Run(*g.root.graph(), fetches);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ((*got)[0].scalar<float>(), 2.0f);
    EXPECT_EQ((*got)[1].scalar<float>(), 2.0f);
  }
  const auto& parts = cluster.partitions();
  EXPECT_EQ(CountOps(parts.at(kPs), "_Send"), 1);  // The bump's dummy, to worker 1.
  EXPECT_EQ(CountOps(parts.at(kW1), "_Recv"), 1);
  EXPECT_EQ(CountOps(parts.at(kW2), "_Recv"), 1);  // a.
  auto value = cluster.Run(*g.root.graph(), {g.counter.value().name()});
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ((*value)[0].scalar<float>(), 3.0f);  // Every step bumped once.
}

TEST(PartitionerTest, AFailingPartitionAbortsTheOthers) {
  Scope root = Scope::NewRootScope();
  Scope ps = root.WithDevice("/job:ps/task:0");
  ops::Variable w(ps, "never_initialized", ops::Const(ps, {1, 2}, TensorShape({2})));
  Output a = ops::Add(root.WithOpName("a").WithDevice("/job:worker/task:1"), w.value(),
                      ops::Const(root.WithDevice("/job:worker/task:1"), 1.0f));
  Output b = ops::Mul(root.WithOpName("b").WithDevice("/job:worker/task:2"), a, a);
  ASSERT_TRUE(root.ok()) << root.status();
  InProcessCluster cluster;
  int64_t start = env::NowMicros();
  auto got = cluster.Run(*root.graph(), {b.name()}, {}, /*timeout_ms=*/60'000);
  ASSERT_FALSE(got.ok());
  EXPECT_LT(env::NowMicros() - start, 30'000'000);  // Released by the abort, not the watchdog.
  EXPECT_THAT(got.status().message(), HasSubstr("never_initialized"));
  ASSERT_EQ(cluster.statuses().size(), 3u);
  for (const absl::Status& s : cluster.statuses()) {
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(s.message(), HasSubstr("never_initialized"));
  }
}

TEST(PartitionerTest, AReceiveWithNoSenderIsReleasedByTheStepDeadline) {
  Scope root = Scope::NewRootScope();
  Scope ps = root.WithDevice("/job:ps/task:0");
  Output x = ops::Identity(ps.WithOpName("x"), ops::Const(ps, 1.0f));
  Output y = ops::Identity(root.WithOpName("y").WithDevice("/job:worker/task:1"), x);
  ASSERT_TRUE(root.ok()) << root.status();
  InProcessCluster cluster;
  ASSERT_TRUE(cluster.Run(*root.graph(), {y.name()}).ok());
  // Drop the ps partition: worker 1's _Recv has nobody to hear from.
  auto parts = cluster.partitions();
  ASSERT_EQ(parts.erase(kPs), 1u);
  auto got = cluster.RunOnly(parts, {y.name()}, /*timeout_ms=*/200);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(got.status().message(), HasSubstr("200 ms"));
}

TEST(PartitionerTest, Errors) {
  Scope root = Scope::NewRootScope();
  Scope ps = root.WithDevice("/job:ps/task:0");
  Output x = ops::Identity(ps.WithOpName("x"), ops::Const(ps.WithOpName("c"), 1.0f));
  ops::Identity(root.WithOpName("y").WithDevice("/job:worker/task:1"), x);
  ASSERT_TRUE(root.ok()) << root.status();
  auto unplaced = PartitionGraph(*root.graph(), {});
  EXPECT_EQ(unplaced.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(unplaced.status().message(), HasSubstr("'c'"));
  ASSERT_TRUE(PlaceGraph(root.graph(), std::vector<std::string>{kPs, kW1}, {}).ok());
  auto no_incarnation = PartitionGraph(*root.graph(), {});
  EXPECT_EQ(no_incarnation.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_incarnation.status().message(), HasSubstr(kPs));
  // By task: one partition per task.
  PartitionOptions by_task;
  by_task.node_to_loc = SplitByTask;
  by_task.incarnations[kPs] = 1;
  auto parts = PartitionGraph(*root.graph(), by_task);
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_EQ(parts->count("/job:ps/replica:0/task:0"), 1u);
  EXPECT_EQ(parts->count("/job:worker/replica:0/task:1"), 1u);
}

}  // namespace
}  // namespace tandem

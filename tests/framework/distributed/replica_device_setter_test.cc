// Tests of the replica device setter: round-robin and greedy placement of variables,
// other ops on the worker device, merging with the scope's partial or explicit
// devices (TensorFlow's merge_devices), merge_devices=false, colocated ops following
// their variable, the ps count from a ClusterSpec (sparse too), and the errors.
#include "framework/distributed/replica_device_setter.h"

#include <string>
#include <vector>

#include "framework/ops/array_ops.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/optimizers.h"
#include "framework/ops/state_ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ops::Variable Var(const Scope& scope, const std::string& name, const TensorShape& shape) {
  return ops::Variable(
      scope, name,
      ops::Const(scope.WithOpName(name + "_init"), Tensor::Filled(DType::kFloat, shape, 1.0)));
}

std::string DeviceOf(const Scope& scope, const std::string& node) {
  Node* n = scope.graph()->FindNode(node);
  return n == nullptr ? "<no node " + node + ">" : n->requested_device();
}

ReplicaDeviceSetterOptions TwoPs() {
  ReplicaDeviceSetterOptions o;
  o.ps_tasks = 2;
  o.worker_device = "/job:worker/task:1";
  return o;
}

TEST(ReplicaDeviceSetterTest, RoundRobinVariablesOnPsOtherOpsOnWorker) {
  Scope root = Scope::NewRootScope();
  Scope s = WithReplicaDeviceSetter(root, TwoPs());
  ops::Variable a = Var(s, "a", TensorShape({3}));
  ops::Variable b = Var(s, "b", TensorShape({3}));
  ops::Variable c = Var(s, "c", TensorShape({3}));
  Output sum = ops::Add(s.WithOpName("sum"), a.value(), b.value());
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(a.handle().node->requested_device(), "/job:ps/task:0");
  EXPECT_EQ(b.handle().node->requested_device(), "/job:ps/task:1");
  EXPECT_EQ(c.handle().node->requested_device(), "/job:ps/task:0");
  EXPECT_EQ(sum.node->requested_device(), "/job:worker/task:1");
  EXPECT_EQ(DeviceOf(s, "a_init"), "/job:worker/task:1");
}

TEST(ReplicaDeviceSetterTest, GreedyByByteSizeBalancesLoads) {
  ReplicaDeviceSetterOptions o = TwoPs();
  o.placement = PsPlacement::kGreedyByteSize;
  Scope root = Scope::NewRootScope();
  Scope s = WithReplicaDeviceSetter(root, o);
  // Loads after each: [400,0] [400,40] [400,80] [400,4080] [404,4080].
  std::vector<ops::Variable> vars = {
      Var(s, "big", TensorShape({100})), Var(s, "small", TensorShape({10})),
      Var(s, "small2", TensorShape({2, 5})), Var(s, "huge", TensorShape({1000})),
      Var(s, "scalar", TensorShape({}))};
  ASSERT_TRUE(root.ok()) << root.status();
  std::vector<std::string> devices;
  for (const auto& v : vars) devices.push_back(v.handle().node->requested_device());
  EXPECT_THAT(devices, ElementsAre("/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:1",
                                   "/job:ps/task:1", "/job:ps/task:0"));
}

TEST(ReplicaDeviceSetterTest, ByteSizeLoadFnCountsElementsTimesDtypeSize) {
  NodeSpec spec;
  spec.name = "v";
  spec.op = "VarHandleOp";
  spec.attrs["dtype"] = DType::kInt64;
  spec.attrs["shape"] = PartialShape({3, 4});
  EXPECT_EQ(*ByteSizeLoadFn(spec), 96.0);
  spec.attrs["shape"] = PartialShape({-1, 4});
  absl::StatusOr<double> unknown = ByteSizeLoadFn(spec);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr("'v'"));
}

TEST(ReplicaDeviceSetterTest, ScopeDeviceFieldsWinOverTheSetters) {
  Scope root = Scope::NewRootScope();
  Scope s = WithReplicaDeviceSetter(root, TwoPs());
  // A partial device: the setter fills job and task, the CPU stays.
  ops::Variable v0 = Var(s.WithDevice("/device:CPU:0"), "v0", TensorShape({2}));
  Output neg = ops::Neg(s.WithDevice("/device:CPU:0").WithOpName("neg"), v0.value());
  // An explicit ps task wins; the strategy still advanced (as TensorFlow's).
  ops::Variable v1 = Var(s.WithDevice("/job:ps/task:1"), "v1", TensorShape({2}));
  ops::Variable v2 = Var(s, "v2", TensorShape({2}));
  // Another job: no ps task from the strategy, the job wins.
  ops::Variable v3 = Var(s.WithDevice("/job:local"), "v3", TensorShape({2}));
  ops::Variable v4 = Var(s, "v4", TensorShape({2}));
  // A worker op with its own task.
  Output sq = ops::Square(s.WithDevice("/task:3").WithOpName("sq"), v2.value());
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(v0.handle().node->requested_device(), "/job:ps/task:0/device:CPU:0");
  EXPECT_EQ(neg.node->requested_device(), "/job:worker/task:1/device:CPU:0");
  EXPECT_EQ(v1.handle().node->requested_device(), "/job:ps/task:1");
  EXPECT_EQ(v2.handle().node->requested_device(), "/job:ps/task:0");
  EXPECT_EQ(v3.handle().node->requested_device(), "/job:local");
  EXPECT_EQ(v4.handle().node->requested_device(), "/job:ps/task:1");
  EXPECT_EQ(sq.node->requested_device(), "/job:worker/task:3");
}

TEST(ReplicaDeviceSetterTest, WithoutMergingAScopeDeviceIsKeptAsIs) {
  ReplicaDeviceSetterOptions o = TwoPs();
  o.merge_devices = false;
  Scope root = Scope::NewRootScope();
  Scope s = WithReplicaDeviceSetter(root, o);
  ops::Variable v0 = Var(s.WithDevice("/device:CPU:0"), "v0", TensorShape({2}));
  ops::Variable v1 = Var(s, "v1", TensorShape({2}));
  Output neg = ops::Neg(s.WithDevice("/job:ps").WithOpName("neg"), v1.value());
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(v0.handle().node->requested_device(), "/device:CPU:0");
  EXPECT_EQ(v1.handle().node->requested_device(), "/job:ps/task:0");
  EXPECT_EQ(neg.node->requested_device(), "/job:ps");
}

TEST(ReplicaDeviceSetterTest, ColocatedOpsFollowTheirVariable) {
  Scope root = Scope::NewRootScope();
  Scope s = WithReplicaDeviceSetter(root, TwoPs());
  ops::Variable w = Var(s, "w", TensorShape({3}));
  ops::Variable u = Var(s, "u", TensorShape({3}));
  // The variable's own initializer and cached read.
  EXPECT_EQ(DeviceOf(s, "u/Assign"), "/job:ps/task:1");
  EXPECT_EQ(DeviceOf(s, "u/Read/ReadVariableOp"), "/job:ps/task:1");
  // Assignments and gathers built later through the setter's scope.
  Output assign = ops::Assign(s.WithOpName("reassign"), u, ops::Const(s, {1.f, 2.f, 3.f}, {3}));
  Output rows = ops::ResourceGather(s.ColocateWith(u.handle().node).WithOpName("rows"), u.handle(),
                                    ops::ConstInt32(s, std::vector<int32_t>{0, 2}), DType::kFloat);
  // Optimizer update ops and slots.
  Output loss =
      ops::ReduceSumAll(s.WithOpName("loss"), ops::Square(s, ops::Mul(s, w.value(), u.value())));
  ops::MomentumOptimizer opt(0.1f, 0.9f);
  absl::StatusOr<Node*> train = opt.Minimize(s, loss);
  ASSERT_TRUE(train.ok()) << train.status();
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(assign.node->requested_device(), "/job:ps/task:1");
  EXPECT_EQ(rows.node->requested_device(), "/job:ps/task:1");
  EXPECT_EQ(loss.node->requested_device(), "/job:worker/task:1");
  EXPECT_EQ((*train)->requested_device(), "/job:worker/task:1");
  int applies = 0;
  for (const auto& n : root.graph()->nodes()) {
    if (n->op() != "ResourceApplyMomentum") continue;
    ++applies;
    ASSERT_EQ(n->ColocationGroups().size(), 1u);
    const std::string var = n->ColocationGroups()[0];
    EXPECT_EQ(n->requested_device(), DeviceOf(s, var)) << n->name();
  }
  EXPECT_EQ(applies, 2);
  // Slots are built by the optimizer outside the setter's scope: no requested device,
  // colocated with their variable (the placer puts them there).
  std::optional<ops::Variable> slot = opt.GetSlot(u, "momentum");
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->handle().node->requested_device(), "");
  EXPECT_THAT(slot->handle().node->ColocationGroups(), ElementsAre("u"));
}

TEST(ReplicaDeviceSetterTest, PsTaskCountComesFromTheCluster) {
  absl::StatusOr<ClusterSpec> cluster = ClusterSpec::FromJobs(
      {{"ps", {"h0:2222", "h1:2222", "h2:2222"}}, {"worker", {"w0:2222", "w1:2222"}}});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ReplicaDeviceSetterOptions o;
  o.ps_tasks = 99;  // Ignored: the cluster says 3.
  o.cluster = *cluster;
  Scope root = Scope::NewRootScope();
  Scope s = WithReplicaDeviceSetter(root, o);
  std::vector<std::string> devices;
  for (int i = 0; i < 4; ++i) {
    devices.push_back(
        Var(s, "v" + std::to_string(i), TensorShape({1})).handle().node->requested_device());
  }
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_THAT(devices,
              ElementsAre("/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:2", "/job:ps/task:0"));
}

TEST(ReplicaDeviceSetterTest, SparsePsTaskIdsAndCustomJobNames) {
  ClusterSpec cluster;
  ASSERT_TRUE(cluster.AddTask("moon", 1, "m1:2222").ok());
  ASSERT_TRUE(cluster.AddTask("moon", 4, "m4:2222").ok());
  ASSERT_TRUE(cluster.AddJob("sun", {"s0:2222"}).ok());
  ReplicaDeviceSetterOptions o;
  o.cluster = cluster;
  o.ps_device = "/job:moon";
  o.worker_device = "/job:sun";
  Scope root = Scope::NewRootScope();
  Scope s = WithReplicaDeviceSetter(root, o);
  ops::Variable v = Var(s, "v", TensorShape({2}));
  ops::Variable w = Var(s, "w", TensorShape({2}));
  Output a = ops::Add(s.WithOpName("a"), v.value(), w.value());
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(v.handle().node->requested_device(), "/job:moon/task:1");
  EXPECT_EQ(w.handle().node->requested_device(), "/job:moon/task:4");
  EXPECT_EQ(a.node->requested_device(), "/job:sun");
}

TEST(ReplicaDeviceSetterTest, NoPsTasksMeansNoDeviceFunction) {
  ReplicaDeviceSetterOptions none;
  absl::StatusOr<DeviceFunction> fn = ReplicaDeviceSetter(none);
  ASSERT_TRUE(fn.ok()) << fn.status();
  EXPECT_FALSE(static_cast<bool>(*fn));

  absl::StatusOr<ClusterSpec> no_ps = ClusterSpec::FromJobs({{"worker", {"w0:2222"}}});
  ASSERT_TRUE(no_ps.ok());
  ReplicaDeviceSetterOptions o = TwoPs();
  o.cluster = *no_ps;
  Scope root = Scope::NewRootScope();
  Scope s = WithReplicaDeviceSetter(root, o);
  ops::Variable v = Var(s, "v", TensorShape({2}));
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(v.handle().node->requested_device(), "");
}

TEST(ReplicaDeviceSetterTest, CustomPsOpsAndStrategy) {
  ReplicaDeviceSetterOptions o = TwoPs();
  o.ps_ops = {"Const"};
  o.ps_strategy = [](const NodeSpec&) -> absl::StatusOr<int> { return 1; };
  Scope root = Scope::NewRootScope();
  Scope s = WithReplicaDeviceSetter(root, o);
  Output c = ops::Const(s.WithOpName("c"), 1.0f);
  ops::Variable v = Var(s, "v", TensorShape({2}));
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(c.node->requested_device(), "/job:ps/task:1");
  EXPECT_EQ(v.handle().node->requested_device(), "/job:worker/task:1");
}

TEST(ReplicaDeviceSetterTest, BadOptionsAreInvalidArgument) {
  ReplicaDeviceSetterOptions negative;
  negative.ps_tasks = -1;
  EXPECT_EQ(ReplicaDeviceSetter(negative).status().code(), absl::StatusCode::kInvalidArgument);

  ReplicaDeviceSetterOptions bad_ps = TwoPs();
  bad_ps.ps_device = "job:ps";
  absl::Status s = ReplicaDeviceSetter(bad_ps).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("ps_device"));

  ReplicaDeviceSetterOptions bad_worker = TwoPs();
  bad_worker.worker_device = "/job:worker/task:x";
  Scope root = Scope::NewRootScope();
  WithReplicaDeviceSetter(root, bad_worker);
  EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(root.status().message(), HasSubstr("worker_device"));
}

TEST(ReplicaDeviceSetterTest, PlacementErrorsAreRecordedInTheScope) {
  ReplicaDeviceSetterOptions greedy = TwoPs();
  greedy.placement = PsPlacement::kGreedyByteSize;
  Scope root = Scope::NewRootScope();
  Scope s = WithReplicaDeviceSetter(root, greedy);
  Output unknown = ops::Placeholder(s.WithOpName("x"), DType::kFloat, PartialShape({-1, 3}));
  ops::Variable v(s, "ragged", unknown);
  EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(root.status().message(), HasSubstr("ragged"));
  EXPECT_THAT(root.status().message(), HasSubstr("not fully defined"));

  ReplicaDeviceSetterOptions wild = TwoPs();
  wild.ps_strategy = [](const NodeSpec&) -> absl::StatusOr<int> { return 5; };
  Scope root2 = Scope::NewRootScope();
  Var(WithReplicaDeviceSetter(root2, wild), "v", TensorShape({2}));
  EXPECT_EQ(root2.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(root2.status().message(), HasSubstr("chose task 5"));
}

}  // namespace
}  // namespace tandem

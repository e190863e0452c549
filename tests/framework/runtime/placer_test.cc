// The placer's rules: explicit devices, colocation groups ("_class" and resource
// edges), the client's default device, partial specs completed to the lowest task,
// soft placement, device filters, and the errors of impossible placements.
#include "framework/runtime/placer.h"

#include "framework/ops/array_ops.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/state_ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

const std::vector<std::string> kDevices = {
    "/job:worker/replica:0/task:2/device:CPU:0", "/job:ps/replica:0/task:1/device:CPU:0",
    "/job:worker/replica:0/task:0/device:CPU:0", "/job:ps/replica:0/task:0/device:CPU:0",
    "/job:worker/replica:0/task:1/device:CPU:0",
};
constexpr char kPs0[] = "/job:ps/replica:0/task:0/device:CPU:0";
constexpr char kPs1[] = "/job:ps/replica:0/task:1/device:CPU:0";
constexpr char kW0[] = "/job:worker/replica:0/task:0/device:CPU:0";
constexpr char kW1[] = "/job:worker/replica:0/task:1/device:CPU:0";
constexpr char kW2[] = "/job:worker/replica:0/task:2/device:CPU:0";

PlacerOptions ClientOn(const std::string& task) {
  PlacerOptions o;
  o.default_device = task;
  return o;
}

const std::string& DeviceOf(const Scope& root, const std::string& name) {
  Node* n = root.graph()->FindNode(name);
  EXPECT_NE(n, nullptr) << name;
  return n->assigned_device();
}

TEST(PlacerTest, ExplicitDevicesWinAndTheRestGoToTheClientTask) {
  Scope root = Scope::NewRootScope();
  Output a = ops::Const(root.WithOpName("a").WithDevice(kW2), 1.0f);
  Output b = ops::Const(root.WithOpName("b"), 2.0f);
  ops::Add(root.WithOpName("sum"), a, b);
  ASSERT_TRUE(root.ok()) << root.status();
  ASSERT_TRUE(PlaceGraph(root.graph(), kDevices, ClientOn("/job:worker/replica:0/task:1")).ok());
  EXPECT_EQ(DeviceOf(root, "a"), kW2);
  EXPECT_EQ(DeviceOf(root, "b"), kW1);
  EXPECT_EQ(DeviceOf(root, "sum"), kW1);
}

TEST(PlacerTest, PartialSpecsAreCompletedToTheLowestMatchingDevice) {
  Scope root = Scope::NewRootScope();
  ops::Const(root.WithOpName("ps").WithDevice("/job:ps"), 1.0f);
  ops::Const(root.WithOpName("worker").WithDevice("/job:worker"), 1.0f);
  ops::Const(root.WithOpName("task2").WithDevice("/job:worker/task:2"), 1.0f);
  ops::Const(root.WithOpName("ps1").WithDevice("/job:ps/replica:0/task:1/cpu:0"), 1.0f);
  // No job: stays on the client's task.
  ops::Const(root.WithOpName("cpu").WithDevice("/device:CPU:0"), 1.0f);
  ASSERT_TRUE(root.ok()) << root.status();
  ASSERT_TRUE(PlaceGraph(root.graph(), kDevices, ClientOn("/job:worker/replica:0/task:2")).ok());
  EXPECT_EQ(DeviceOf(root, "ps"), kPs0);
  EXPECT_EQ(DeviceOf(root, "worker"), kW0);
  EXPECT_EQ(DeviceOf(root, "task2"), kW2);
  EXPECT_EQ(DeviceOf(root, "ps1"), kPs1);
  EXPECT_EQ(DeviceOf(root, "cpu"), kW2);
}

TEST(PlacerTest, EmptyDefaultDeviceUsesTheFirstDevice) {
  Scope root = Scope::NewRootScope();
  ops::Const(root.WithOpName("c"), 1.0f);
  ASSERT_TRUE(PlaceGraph(root.graph(), kDevices, {}).ok());
  EXPECT_EQ(DeviceOf(root, "c"), kPs0);
}

TEST(PlacerTest, VariableOpsFollowTheirHandle) {
  Scope root = Scope::NewRootScope();
  Output init = ops::Const(root.WithOpName("init"), {1, 2}, TensorShape({2}));
  ops::Variable w(root.WithDevice("/job:ps/task:1"), "w", init);
  // Built on the worker without a device: colocated by "_class" (AssignAdd) or by the
  // resource edge alone (a bare ReadVariableOp).
  Scope worker = root.WithDevice("");
  ops::AssignAdd(worker.WithOpName("update"), w, ops::Const(worker, {1, 1}, TensorShape({2})));
  ops::ReadVariableOp(worker.WithOpName("bare_read"), w.handle(), DType::kFloat);
  ASSERT_TRUE(root.ok()) << root.status();
  ASSERT_TRUE(PlaceGraph(root.graph(), kDevices, ClientOn("/job:worker/task:0")).ok());
  EXPECT_EQ(DeviceOf(root, "w"), kPs1);
  EXPECT_EQ(DeviceOf(root, "w/Assign"), kPs1);
  EXPECT_EQ(DeviceOf(root, w.value().node->name()), kPs1);
  EXPECT_EQ(DeviceOf(root, "update"), kPs1);
  EXPECT_EQ(DeviceOf(root, "bare_read"), kPs1);
  // A Const with no device whose only consumer (the initializer) is on the ps goes
  // there too (heuristic A).
  EXPECT_EQ(DeviceOf(root, "init"), kPs1);
}

TEST(PlacerTest, GeneratorsFollowTheirConsumersOnlyWhenTheyAgree) {
  Scope root = Scope::NewRootScope();
  Output lr = ops::Const(root.WithOpName("lr"), 0.1f);
  Output shared = ops::Const(root.WithOpName("shared"), 2.0f);
  Output pinned = ops::Const(root.WithOpName("pinned").WithDevice("/job:worker/task:0"), 3.0f);
  Scope ps = root.WithDevice("/job:ps/task:1");
  ops::Mul(ps.WithOpName("a"), lr, pinned);
  ops::Mul(ps.WithOpName("b"), lr, shared);
  ops::Mul(root.WithOpName("c").WithDevice("/job:worker/task:0"), shared, shared);
  ASSERT_TRUE(root.ok()) << root.status();
  ASSERT_TRUE(PlaceGraph(root.graph(), kDevices, ClientOn("/job:worker/task:0")).ok());
  EXPECT_EQ(DeviceOf(root, "lr"), kPs1);     // Both consumers on ps 1.
  EXPECT_EQ(DeviceOf(root, "shared"), kW0);  // Consumers on two devices: the default.
  EXPECT_EQ(DeviceOf(root, "pinned"), kW0);  // An explicit device wins.
}

TEST(PlacerTest, ColocationGroupTakesTheExplicitDeviceOfAnyMember) {
  Scope root = Scope::NewRootScope();
  Output anchor = ops::Const(root.WithOpName("anchor"), 1.0f);
  // The anchor has no device; a member asks for ps:1, so the whole group goes there.
  ops::Identity(root.WithOpName("member").ColocateWith(anchor.node).WithDevice("/job:ps/task:1"),
                anchor);
  ops::Identity(root.WithOpName("other").ColocateWith(anchor.node), anchor);
  ASSERT_TRUE(root.ok()) << root.status();
  ASSERT_TRUE(PlaceGraph(root.graph(), kDevices, ClientOn("/job:worker/task:0")).ok());
  EXPECT_EQ(DeviceOf(root, "anchor"), kPs1);
  EXPECT_EQ(DeviceOf(root, "member"), kPs1);
  EXPECT_EQ(DeviceOf(root, "other"), kPs1);
}

TEST(PlacerTest, ConflictingDevicesInAGroupNameBothNodes) {
  Scope root = Scope::NewRootScope();
  Output anchor = ops::Const(root.WithOpName("anchor").WithDevice("/job:ps/task:0"), 1.0f);
  ops::Identity(root.WithOpName("rebel").ColocateWith(anchor.node).WithDevice("/job:ps/task:1"),
                anchor);
  ASSERT_TRUE(root.ok()) << root.status();
  absl::Status s = PlaceGraph(root.graph(), kDevices, ClientOn("/job:worker/task:0"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'anchor'"));
  EXPECT_THAT(s.message(), HasSubstr("'rebel'"));
  EXPECT_THAT(s.message(), HasSubstr("/job:ps/task:1"));
  // Nothing was assigned.
  EXPECT_EQ(DeviceOf(root, "anchor"), "");
}

TEST(PlacerTest, ResourceEdgeConflictIsAnError) {
  Scope root = Scope::NewRootScope();
  ops::Variable w(root.WithDevice("/job:ps/task:0"), "w", ops::Const(root, 1.0f));
  ops::ReadVariableOp(root.WithOpName("remote_read").WithDevice("/job:worker/task:1"), w.handle(),
                      DType::kFloat);
  ASSERT_TRUE(root.ok()) << root.status();
  absl::Status s = PlaceGraph(root.graph(), kDevices, ClientOn("/job:worker/task:0"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("remote_read"));
}

TEST(PlacerTest, ImpossiblePlacementNamesNodeRequestAndDevices) {
  Scope root = Scope::NewRootScope();
  ops::Const(root.WithOpName("lost").WithDevice("/job:ps/task:7"), 1.0f);
  absl::Status s = PlaceGraph(root.graph(), kDevices, ClientOn("/job:worker/task:0"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'lost'"));
  EXPECT_THAT(s.message(), HasSubstr("/job:ps/task:7"));
  EXPECT_THAT(s.message(), HasSubstr(kPs1));
  EXPECT_THAT(s.message(), HasSubstr(kW2));
}

TEST(PlacerTest, SoftPlacementFallsBackToTheCpuOfTheRequestedTask) {
  Scope root = Scope::NewRootScope();
  ops::Const(root.WithOpName("g").WithDevice("/job:worker/task:1/device:GPU:0"), 1.0f);
  absl::Status hard = PlaceGraph(root.graph(), kDevices, ClientOn("/job:worker/task:0"));
  EXPECT_EQ(hard.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(hard.message(), HasSubstr("GPU"));
  EXPECT_THAT(hard.message(), HasSubstr("soft placement is off"));
  PlacerOptions soft = ClientOn("/job:worker/task:0");
  soft.allow_soft_placement = true;
  ASSERT_TRUE(PlaceGraph(root.graph(), kDevices, soft).ok());
  EXPECT_EQ(DeviceOf(root, "g"), kW1);
  // Soft placement does not move a node to another task.
  Scope other = Scope::NewRootScope();
  ops::Const(other.WithOpName("g").WithDevice("/job:worker/task:9/device:GPU:0"), 1.0f);
  EXPECT_FALSE(PlaceGraph(other.graph(), kDevices, soft).ok());
}

TEST(PlacerTest, DeviceFiltersHideDevices) {
  Scope root = Scope::NewRootScope();
  ops::Const(root.WithOpName("p").WithDevice("/job:ps"), 1.0f);
  ops::Const(root.WithOpName("w"), 1.0f);
  PlacerOptions o = ClientOn("/job:worker/task:0");
  o.device_filters = {"/job:ps/task:1", "/job:worker/task:0"};
  ASSERT_TRUE(PlaceGraph(root.graph(), kDevices, o).ok());
  EXPECT_EQ(DeviceOf(root, "p"), kPs1);  // ps:0 is filtered out.
  EXPECT_EQ(DeviceOf(root, "w"), kW0);
  ops::Const(root.WithOpName("hidden").WithDevice("/job:worker/task:2"), 1.0f);
  absl::Status s = PlaceGraph(root.graph(), kDevices, o);
  EXPECT_THAT(s.message(), HasSubstr("'hidden'"));
  EXPECT_THAT(s.message(), HasSubstr("device filters"));
  o.device_filters = {"/job:evaluator"};
  EXPECT_THAT(PlaceGraph(root.graph(), kDevices, o).message(), HasSubstr("no device"));
}

TEST(PlacerTest, MalformedNamesAreErrors) {
  Scope root = Scope::NewRootScope();
  Node* n = ops::Const(root.WithOpName("c"), 1.0f).node;
  n->set_requested_device("/job:ps/bogus:1");
  absl::Status s = PlaceGraph(root.graph(), kDevices, ClientOn("/job:worker/task:0"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'c'"));
  n->set_requested_device("");
  EXPECT_FALSE(PlaceGraph(root.graph(), std::vector<std::string>{"/job:ps/task:0"}, {}).ok());
  PlacerOptions bad_filter;
  bad_filter.device_filters = {"ps"};
  EXPECT_FALSE(PlaceGraph(root.graph(), kDevices, bad_filter).ok());
}

}  // namespace
}  // namespace tandem

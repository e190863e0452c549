// Extend prepares new nodes as if they had been there at creation: under
// mixed_bfloat16 and in float32, a chain added by Extend is rewritten and fused exactly
// as the same chain given to Create, old readers keep what they read, new readers of
// a fused chain's inner tensor get its value, and a bad extension leaves the session
// working.
#include "framework/runtime/prepare_graph.h"

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "framework/ops/array_ops.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/nn_ops.h"
#include "framework/ops/standard_ops.h"
#include "framework/runtime/session.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/def_of.h"
#include "tests/util/ramp.h"

namespace tandem {
namespace {

using ::tandem::testing::DefOf;
using ::tandem::testing::Ramp;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

// "x" [4,8] placeholder, "w" [8,6] and "b" [6]: the base graph. Chain() adds
// "mm" = MatMul(x, w) -> "biased" = BiasAdd -> "act" = Relu, and "out" reading it (a
// fetch of the chain's own tensors runs the chain unfused).
struct Net {
  Scope root = Scope::NewRootScope();
  Output x, w, b;
  Net() {
    ops::EnsureStandardOps();
    x = ops::Placeholder(root.WithOpName("x"), DType::kFloat, PartialShape({4, 8}));
    w = ops::Const(root.WithOpName("w"), Ramp(TensorShape({8, 6}), 0.37f, 0.1f));
    b = ops::Const(root.WithOpName("b"), Ramp(TensorShape({6}), 1.1f, 0.0f));
  }
  void Chain() {
    Output mm = ops::MatMul(root.WithOpName("mm"), x, w);
    Output act = ops::Relu(root.WithOpName("act"), ops::BiasAdd(root.WithOpName("biased"), mm, b));
    ops::Identity(root.WithOpName("out"), act);
  }
};

FeedMap Feed() { return {{"x:0", Ramp(TensorShape({4, 8}), 0.53f, -0.2f)}}; }

struct Step {
  std::vector<Tensor> values;
  std::multiset<std::string> ops;  // Of every node that ran.
};

Step RunTraced(Session* session, const std::vector<std::string>& fetches) {
  RunOptions options;
  options.trace = true;
  RunMetadata metadata;
  auto out = session->Run(Feed(), fetches, {}, options, &metadata);
  EXPECT_TRUE(out.ok()) << out.status();
  Step step;
  if (out.ok()) step.values = *out;
  for (const NodeExecStats& n : metadata.step_stats.nodes) step.ops.insert(n.op);
  return step;
}

// A mixed_bfloat16 session created with `net`'s graph, its chain included.
std::unique_ptr<Session> MixedSessionWithChain(Net* net) {
  net->Chain();
  SessionOptions so;
  so.precision = Precision::kMixedBfloat16;
  auto session = NewDirectSession(DefOf(net->root), so);
  EXPECT_TRUE(session.ok()) << session.status();
  return session.ok() ? std::move(*session) : nullptr;
}

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.TotalBytes()) == 0;
}

// A session created with the base graph and extended by the chain runs what a
// session created with the whole graph runs, bit for bit and op for op.
void CheckExtensionMatchesCreation(Precision precision) {
  SessionOptions so;
  so.precision = precision;
  Net base;
  auto extended = NewDirectSession(DefOf(base.root), so);
  ASSERT_TRUE(extended.ok()) << extended.status();
  base.Chain();
  ASSERT_TRUE((*extended)->Extend(DefOf(base.root)).ok());
  Net whole;
  whole.Chain();
  auto created = NewDirectSession(DefOf(whole.root), so);
  ASSERT_TRUE(created.ok()) << created.status();

  Step a = RunTraced(extended->get(), {"out:0"});
  Step b = RunTraced(created->get(), {"out:0"});
  ASSERT_EQ(a.values.size(), 1u);
  ASSERT_EQ(b.values.size(), 1u);
  EXPECT_TRUE(SameBits(a.values[0], b.values[0]));
  EXPECT_EQ(a.ops, b.ops);
  EXPECT_THAT(a.ops, Contains("_FusedMatMul"));
  EXPECT_THAT(a.ops, Not(Contains("BiasAdd")));
}

TEST(PreparedGraphTest, AnExtensionIsFusedInFloat32) {
  CheckExtensionMatchesCreation(Precision::kFloat32);
}

TEST(PreparedGraphTest, AnExtensionIsRewrittenAndFusedUnderMixedBfloat16) {
  CheckExtensionMatchesCreation(Precision::kMixedBfloat16);
  // And it really ran on bfloat16: float32 gives other bits.
  SessionOptions so;
  Net net;
  net.Chain();
  so.precision = Precision::kMixedBfloat16;
  auto mixed = NewDirectSession(DefOf(net.root), so);
  so.precision = Precision::kFloat32;
  auto f32 = NewDirectSession(DefOf(net.root), so);
  ASSERT_TRUE(mixed.ok() && f32.ok());
  Step m = RunTraced(mixed->get(), {"out:0"});
  Step f = RunTraced(f32->get(), {"out:0"});
  ASSERT_EQ(m.values.size(), 1u);
  ASSERT_EQ(f.values.size(), 1u);
  EXPECT_FALSE(SameBits(m.values[0], f.values[0]));
  EXPECT_THAT(m.ops, Contains("Cast"));
}

TEST(PreparedGraphTest, NewReadersOfAFusedChainGetItsInnerValueAndOldReadersKeepTheirs) {
  Net net;
  std::unique_ptr<Session> session = MixedSessionWithChain(&net);
  ASSERT_NE(session, nullptr);
  Step before = RunTraced(session.get(), {"out:0"});
  // A reader of the MatMul: in a graph given whole, the chain would not fuse.
  ops::Identity(net.root.WithOpName("seen_mm"), Output(net.root.graph()->FindNode("mm"), 0));
  ASSERT_TRUE(session->Extend(DefOf(net.root)).ok());
  Step after = RunTraced(session.get(), {"out:0", "seen_mm:0"});
  SessionOptions so;
  so.precision = Precision::kMixedBfloat16;
  auto whole = NewDirectSession(DefOf(net.root), so);
  ASSERT_TRUE(whole.ok()) << whole.status();
  Step fresh = RunTraced(whole->get(), {"out:0", "seen_mm:0"});
  ASSERT_EQ(before.values.size(), 1u);
  ASSERT_EQ(after.values.size(), 2u);
  ASSERT_EQ(fresh.values.size(), 2u);
  EXPECT_TRUE(SameBits(after.values[0], before.values[0]));  // Still the fused node.
  EXPECT_TRUE(SameBits(after.values[1], fresh.values[1]));   // The MatMul's value.
  EXPECT_THAT(after.ops, Contains("_FusedMatMul"));
  EXPECT_THAT(fresh.ops, Not(Contains("_FusedMatMul")));
}

TEST(PreparedGraphTest, ExtendingWithWhatTheSessionHoldsChangesNothing) {
  Net net;
  std::unique_ptr<Session> session = MixedSessionWithChain(&net);
  ASSERT_NE(session, nullptr);
  Step first = RunTraced(session.get(), {"out:0"});
  ASSERT_TRUE(session->Extend(DefOf(net.root)).ok());
  ASSERT_TRUE(session->Extend(proto::GraphDef()).ok());
  Step again = RunTraced(session.get(), {"out:0"});
  ASSERT_EQ(again.values.size(), 1u);
  EXPECT_TRUE(SameBits(first.values[0], again.values[0]));
  EXPECT_EQ(first.ops, again.ops);
}

TEST(PreparedGraphTest, ABadExtensionIsRefusedAndTheSessionKeepsWorking) {
  Net net;
  std::unique_ptr<Session> session = MixedSessionWithChain(&net);
  ASSERT_NE(session, nullptr);
  proto::GraphDef bad;
  proto::NodeDef* n = bad.add_node();
  n->set_name("orphan");
  n->set_op("Identity");
  n->add_input("no_such_node:0");
  absl::Status st = session->Extend(bad);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("no_such_node"));
  EXPECT_EQ(RunTraced(session.get(), {"out:0"}).values.size(), 1u);
  // The refused node left no trace: a good node may take its name.
  ops::Identity(net.root.WithOpName("orphan"), Output(net.root.graph()->FindNode("out"), 0));
  ASSERT_TRUE(session->Extend(DefOf(net.root)).ok());
  EXPECT_EQ(RunTraced(session.get(), {"orphan:0"}).values.size(), 1u);
}

}  // namespace
}  // namespace tandem

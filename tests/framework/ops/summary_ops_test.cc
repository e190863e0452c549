// tests/framework/ops/summary_ops_test.cc
//
// ScalarSummary: inference (one element, numeric dtype, non-empty tag), the kernel's
// float value through DirectSession, tag deduplication and naming, the kSummaries
// collection read back by ScalarSummaries, and the no-gradient mark.
#include "framework/ops/summary_ops.h"

#include <string>
#include <vector>

#include "framework/ops/array_ops.h"
#include "framework/ops/gradients.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/standard_ops.h"
#include "framework/ops/state_ops.h"
#include "framework/runtime/session.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<std::vector<Tensor>> RunOutputs(const Scope& root,
                                               const std::vector<Output>& fetches,
                                               const FeedMap& feeds = {}) {
  if (!root.ok()) return root.status();
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  auto session = NewDirectSession(def);
  if (!session.ok()) return session.status();
  std::vector<std::string> names;
  for (const Output& o : fetches) names.push_back(o.name());
  return (*session)->Run(feeds, names);
}

std::vector<std::string> Tags(const Graph& graph) {
  std::vector<std::string> tags;
  for (const auto& s : ops::summary::ScalarSummaries(graph)) tags.push_back(s.tag);
  return tags;
}

TEST(SummaryOpsTest, ScalarOpIsRegisteredWithoutGradient) {
  ops::EnsureStandardOps();
  EXPECT_TRUE(OpRegistry::Global()->Lookup("ScalarSummary").ok());
  auto fn = GradientRegistry::Global()->Lookup("ScalarSummary");
  ASSERT_TRUE(fn.ok()) << fn.status();
  EXPECT_EQ(*fn, nullptr);
  EXPECT_FALSE(GradientRegistry::Global()->HasGradient("ScalarSummary"));
}

TEST(SummaryOpsTest, ScalarOutputsTheValueAsFloat32) {
  Scope root = Scope::NewRootScope();
  Output f = ops::summary::Scalar(root, "f", ops::Const(root, 2.5f));
  Output i32 = ops::summary::Scalar(root, "i32", ops::ConstInt32(root, int32_t{-7}));
  Output i64 = ops::summary::Scalar(
      root, "i64", ops::Const(root, Tensor::FromVector<int64_t>({123456789}, TensorShape({1, 1}))));
  Output fed = ops::summary::Scalar(
      root, "fed", ops::Placeholder(root.WithOpName("x"), DType::kFloat, PartialShape({1})));
  ASSERT_TRUE(root.ok()) << root.status();
  for (const Output& o : {f, i32, i64, fed}) {
    EXPECT_EQ(o.dtype(), DType::kFloat);
    EXPECT_EQ(o.shape(), PartialShape({}));
    EXPECT_EQ(o.node->op(), "ScalarSummary");
  }
  EXPECT_EQ(GetAttrOr<DType>(i64.node->attrs(), "T", DType::kInvalid), DType::kInt64);
  EXPECT_EQ(GetAttrOr<std::string>(i32.node->attrs(), "tag", ""), "i32");

  auto out = RunOutputs(root, {f, i32, i64, fed},
                        {{"x:0", Tensor::FromVector<float>({0.25f}, TensorShape({1}))}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 4u);
  for (const Tensor& t : *out) {
    EXPECT_EQ(t.dtype(), DType::kFloat);
    EXPECT_EQ(t.NumElements(), 1);
  }
  EXPECT_FLOAT_EQ((*out)[0].data<float>()[0], 2.5f);
  EXPECT_FLOAT_EQ((*out)[1].data<float>()[0], -7.0f);
  EXPECT_FLOAT_EQ((*out)[2].data<float>()[0], 123456789.0f);
  EXPECT_FLOAT_EQ((*out)[3].data<float>()[0], 0.25f);
}

TEST(SummaryOpsTest, MoreThanOneElementIsAnErrorNamingOpAndShape) {
  Scope root = Scope::NewRootScope();
  Output v = ops::Const(root, {1, 2, 3, 4, 5, 6}, TensorShape({2, 3}));
  Output s = ops::summary::Scalar(root, "loss", v);
  EXPECT_FALSE(s.valid());
  EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(root.status().message(), HasSubstr("ScalarSummary"));
  EXPECT_THAT(root.status().message(), HasSubstr("[2,3]"));
  EXPECT_THAT(root.status().message(), HasSubstr("loss"));
  EXPECT_TRUE(Tags(*root.graph()).empty());
}

TEST(SummaryOpsTest, AKnownDimensionOtherThanOneIsAnError) {
  Scope root = Scope::NewRootScope();
  Output p = ops::Placeholder(root, DType::kFloat, PartialShape({-1, 2}));
  ops::summary::Scalar(root, "x", p);
  EXPECT_THAT(root.status().message(), HasSubstr("[?,2]"));
}

TEST(SummaryOpsTest, UnknownShapeIsCheckedWhenRun) {
  Scope root = Scope::NewRootScope();
  Output p = ops::Placeholder(root.WithOpName("p"), DType::kFloat);
  Output s = ops::summary::Scalar(root, "x", p);
  ASSERT_TRUE(root.ok()) << root.status();
  auto ok = RunOutputs(root, {s}, {{"p:0", Tensor::FromVector<float>({4.0f}, TensorShape({}))}});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_FLOAT_EQ((*ok)[0].data<float>()[0], 4.0f);
  auto bad = RunOutputs(root, {s}, {{"p:0", Tensor::FromVector<float>({1, 2}, TensorShape({2}))}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("ScalarSummary"));
  EXPECT_THAT(bad.status().message(), HasSubstr("[2]"));
}

TEST(SummaryOpsTest, NonNumericDtypeAndEmptyTagAreErrors) {
  {
    Scope root = Scope::NewRootScope();
    ops::summary::Scalar(root, "flag", ops::Const(root, Tensor::Scalar<bool>(true)));
    EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(root.status().message(), HasSubstr("bool"));
  }
  {
    Scope root = Scope::NewRootScope();
    ops::summary::Scalar(root, "", ops::Const(root, 1.0f));
    EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(root.status().message(), HasSubstr("tag"));
  }
  {
    Scope root = Scope::NewRootScope();
    ops::Variable v(root, "v", ops::Const(root, 1.0f));
    ops::summary::Scalar(root, "handle", v.handle());
    EXPECT_THAT(root.status().message(), HasSubstr("resource"));
  }
}

TEST(SummaryOpsTest, RepeatedTagsGetSuffixesInCreationOrder) {
  Scope root = Scope::NewRootScope();
  Output c = ops::Const(root, 1.0f);
  Output a = ops::summary::Scalar(root, "loss", c);
  Output b = ops::summary::Scalar(root, "loss_1", c);  // Taken before the dedupe needs it.
  Output d = ops::summary::Scalar(root, "loss", c);
  Output e = ops::summary::Scalar(root, "loss", c);
  Output f = ops::summary::Scalar(root, "accuracy", c);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_THAT(Tags(*root.graph()), ElementsAre("loss", "loss_1", "loss_2", "loss_3", "accuracy"));
  auto summaries = ops::summary::ScalarSummaries(*root.graph());
  ASSERT_EQ(summaries.size(), 5u);
  EXPECT_EQ(summaries[0].tensor, a.name());
  EXPECT_EQ(summaries[1].tensor, b.name());
  EXPECT_EQ(summaries[2].tensor, d.name());
  EXPECT_EQ(summaries[3].tensor, e.name());
  EXPECT_EQ(summaries[4].tensor, f.name());
  // Node names are unique and the tensors resolve in the graph.
  for (const auto& s : summaries) EXPECT_TRUE(root.graph()->FindOutput(s.tensor).ok()) << s.tensor;
  EXPECT_THAT(root.graph()->GetCollection(ops::kSummaries), ::testing::SizeIs(5));
}

TEST(SummaryOpsTest, TagIgnoresNameScopeAndOddCharactersStayInTheTag) {
  Scope root = Scope::NewRootScope();
  Scope tower = root.NewSubScope("tower_0");
  Output s = ops::summary::Scalar(tower, "loss", ops::Const(tower, 3.0f));
  Output odd = ops::summary::Scalar(root, "eval loss:top 1", ops::Const(root, 2.0f));
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(s.node->name(), "tower_0/loss");
  EXPECT_THAT(Tags(*root.graph()), ElementsAre("loss", "eval loss:top 1"));
  EXPECT_EQ(odd.node->name().find(':'), std::string::npos);
  auto out = RunOutputs(root, {s, odd});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FLOAT_EQ((*out)[1].data<float>()[0], 2.0f);
}

TEST(SummaryOpsTest, SummariesSurviveAGraphDefRoundTripOfTheirNodes) {
  Scope root = Scope::NewRootScope();
  ops::summary::Scalar(root, "lr", ops::Const(root, 0.1f));
  ASSERT_TRUE(root.ok());
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  auto g = Graph::FromGraphDef(def, OpRegistry::Global());
  ASSERT_TRUE(g.ok()) << g.status();
  Node* n = (*g)->FindNode("lr");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(GetAttrOr<std::string>(n->attrs(), "tag", ""), "lr");
}

TEST(SummaryOpsTest, GradientPathsThroughASummaryAreCut) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DType::kFloat, PartialShape({}));
  Output s = ops::summary::Scalar(root, "x", ops::Square(root, x));
  auto grads = Gradients(root, {s}, {x});
  ASSERT_TRUE(grads.ok()) << grads.status();
  ASSERT_EQ(grads->size(), 1u);
  EXPECT_FALSE((*grads)[0].valid());
}

}  // namespace
}  // namespace tandem

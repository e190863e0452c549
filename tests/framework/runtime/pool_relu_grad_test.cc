// MaskBeforeMaxPoolGrad (remapper.h): which ReluGrad -> MaxPoolGrad pairs it rewrites,
// that every reader of the ReluGrad then reads the masked MaxPoolGrad, and that the
// rewritten gradient equals the original bit for bit, in float32 and under
// mixed_bfloat16, with disjoint 2x2 windows and with overlapping 3x3 ones, on inputs
// where whole windows are zero after the ReLU (so the mask changes the result).
// BiasGradBeforeMaxPoolGrad: that the bias gradient is then summed from the pooled
// gradient, equal to the full-size one's sums up to rounding, and only over a
// MaxPoolGrad on its device.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "framework/graph/graph.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/gradients.h"
#include "framework/ops/internal/build.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/nn_ops.h"
#include "framework/ops/standard_ops.h"
#include "framework/runtime/prepare_graph.h"
#include "framework/runtime/remapper.h"
#include "framework/runtime/session.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/def_of.h"
#include "tests/util/ramp.h"

namespace tandem {
namespace {

using ::tandem::testing::DefOf;
using ::tandem::testing::Ramp;
using ::testing::ElementsAre;

// x [2,6,6,2] -> Conv2D [3,3,2,3] SAME -> BiasAdd (a negative bias: many zeros after the
// ReLU) -> Relu "act" -> MaxPool "pool" -> sum(pool * r), and its gradients with
// respect to the filter and the bias.
struct Net {
  Scope root = Scope::NewRootScope();
  std::vector<Output> grads;

  explicit Net(const ops::PoolAttrs& pool_attrs) {
    ops::EnsureStandardOps();
    Output x = ops::Placeholder(root.WithOpName("x"), DType::kFloat, PartialShape({2, 6, 6, 2}));
    Output f = ops::Const(root.WithOpName("f"), Ramp(TensorShape({3, 3, 2, 3}), 0.7f, 0.0f));
    Output cb = ops::Const(root.WithOpName("cb"), Ramp(TensorShape({3}), 1.3f, -1.2f));
    ops::Conv2DAttrs same;
    same.padding = "SAME";
    Output act =
        ops::Relu(root.WithOpName("act"),
                  ops::BiasAdd(root, ops::Conv2D(root.WithOpName("conv"), x, f, same), cb));
    Output pool = ops::MaxPool(root.WithOpName("pool"), act, pool_attrs);
    const PartialShape& shape = pool.shape();
    Output r = ops::Const(root.WithOpName("r"),
                          Ramp(TensorShape({2, shape.dim(1), shape.dim(2), 3}), 1.9f, 0.1f));
    auto g = Gradients(root, {ops::Mul(root, pool, r)}, {f, cb});
    EXPECT_TRUE(g.ok()) << g.status();
    if (g.ok()) grads = *g;
  }
};

ops::PoolAttrs Disjoint2x2() { return {}; }
ops::PoolAttrs Overlapping3x3() { return {{1, 3, 3, 1}, {1, 2, 2, 1}, "SAME"}; }

const proto::NodeDef* FindOp(const proto::GraphDef& def, const std::string& op) {
  for (const auto& n : def.node()) {
    if (n.op() == op) return &n;
  }
  return nullptr;
}

TEST(MaskBeforeMaxPoolGradTest, MovesTheMaskAndRewiresEveryReader) {
  Net net(Disjoint2x2());
  const proto::GraphDef def = DefOf(net.root);
  const proto::NodeDef* relu_grad = FindOp(def, "ReluGrad");
  const proto::NodeDef* pool_grad = FindOp(def, "MaxPoolGrad");
  ASSERT_NE(relu_grad, nullptr);
  ASSERT_NE(pool_grad, nullptr);
  RemapReport report;
  auto out = MaskBeforeMaxPoolGrad(def, OpRegistry::Global(), &report);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(report.masks_before_pool_grad, 1);

  auto g = Graph::FromGraphDef(*out, OpRegistry::Global());
  ASSERT_TRUE(g.ok()) << g.status();
  const Node* pooled = (*g)->FindNode(relu_grad->name() + "/pooled");
  const Node* routed = (*g)->FindNode(relu_grad->name() + "/routed");
  ASSERT_NE(pooled, nullptr);
  ASSERT_NE(routed, nullptr);
  EXPECT_EQ(pooled->op(), "ReluGrad");
  EXPECT_EQ(routed->op(), "MaxPoolGrad");
  // ReluGrad(g, pool) and MaxPoolGrad(act, pool, that).
  EXPECT_EQ(pooled->input(0).name(), (*g)->FindNode(pool_grad->name())->input(2).name());
  EXPECT_EQ(pooled->input(1).name(), "pool:0");
  EXPECT_EQ(routed->input(0).name(), "act:0");
  EXPECT_EQ(routed->input(1).name(), "pool:0");
  EXPECT_EQ(routed->input(2).node, pooled);
  // The original pair stays, unread, fetchable by name; its readers (the bias and
  // filter gradients) read the routed node.
  EXPECT_TRUE((*g)->FindNode(relu_grad->name())->out_edges().empty());
  std::vector<std::string> readers;
  for (const auto& [reader, slot] : routed->out_edges()) readers.push_back(reader->op());
  std::sort(readers.begin(), readers.end());
  EXPECT_THAT(readers, ElementsAre("BiasAddGrad", "Conv2DBackpropFilter", "Conv2DBackpropInput"));
}

// Runs the prepared net and compares the original ReluGrad (fetched by name, which
// runs the unrewritten pair) with the routed node that its readers now read.
void ExpectBitForBit(const ops::PoolAttrs& pool_attrs, Precision precision) {
  Net net(pool_attrs);
  const proto::GraphDef def = DefOf(net.root);
  auto prepared = PrepareGraph(def, precision);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  std::string routed, original, unmasked;
  for (const auto& n : prepared->node()) {
    if (n.op() == "MaxPoolGrad" && n.name().ends_with("/routed")) {
      routed = n.name();
      original = n.name().substr(0, n.name().size() - std::string("/routed").size());
    }
  }
  ASSERT_FALSE(routed.empty()) << "not rewritten";
  for (const auto& n : prepared->node()) {
    if (n.name() == original) unmasked = n.input(0);  // The MaxPoolGrad it masked.
  }
  ASSERT_FALSE(unmasked.empty());

  SessionOptions so;
  so.precision = precision;
  auto session = NewDirectSession(def, so);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<std::string> fetches = {original, routed, unmasked};
  for (const Output& grad : net.grads) fetches.push_back(grad.name());
  auto out = (*session)->Run({{"x:0", Ramp(TensorShape({2, 6, 6, 2}), 0.61f, 0.0f)}}, fetches);
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor &want = (*out)[0], &got = (*out)[1], &before_mask = (*out)[2];
  ASSERT_EQ(want.shape(), got.shape());
  int masked = 0, kept = 0;
  for (int64_t k = 0; k < want.NumElements(); ++k) {
    ASSERT_EQ(got.ValueAsDouble(k), want.ValueAsDouble(k)) << k;
    masked += before_mask.ValueAsDouble(k) != 0 && want.ValueAsDouble(k) == 0;
    kept += want.ValueAsDouble(k) != 0;
  }
  EXPECT_GT(masked, 0);  // Windows whose maximum was 0 lost their gradient ...
  EXPECT_GT(kept, 0);    // ... and others kept it.
  for (size_t i = 3; i < out->size(); ++i) {
    for (int64_t k = 0; k < (*out)[i].NumElements(); ++k) {
      EXPECT_TRUE(std::isfinite((*out)[i].ValueAsDouble(k))) << i;
    }
  }
}

TEST(MaskBeforeMaxPoolGradTest, Float32DisjointWindowsEqualBitForBit) {
  ExpectBitForBit(Disjoint2x2(), Precision::kFloat32);
}

TEST(MaskBeforeMaxPoolGradTest, Float32OverlappingWindowsEqualBitForBit) {
  ExpectBitForBit(Overlapping3x3(), Precision::kFloat32);
}

TEST(MaskBeforeMaxPoolGradTest, MixedBfloat16EqualsBitForBit) {
  ExpectBitForBit(Disjoint2x2(), Precision::kMixedBfloat16);
  ExpectBitForBit(Overlapping3x3(), Precision::kMixedBfloat16);
}

// a [1,4,4,1], ReluGrad(MaxPoolGrad(a, MaxPool(a), g), c) in the variants that must not
// be rewritten.
TEST(MaskBeforeMaxPoolGradTest, LeavesPairsItCannotProveEqual) {
  ops::EnsureStandardOps();
  Scope root = Scope::NewRootScope();
  Output a = ops::Placeholder(root.WithOpName("a"), DType::kFloat, PartialShape({1, 4, 4, 1}));
  Output other = ops::Placeholder(root.WithOpName("c"), DType::kFloat, PartialShape({1, 4, 4, 1}));
  Output g = ops::Placeholder(root.WithOpName("g"), DType::kFloat, PartialShape({1, 2, 2, 1}));
  Output pool = ops::MaxPool(root.WithOpName("pool"), a);
  AttrMap geometry = {{"ksize", std::vector<int64_t>{1, 2, 2, 1}},
                      {"strides", std::vector<int64_t>{1, 2, 2, 1}},
                      {"padding", std::string("VALID")},
                      {"T", DType::kFloat}};
  auto pool_grad = [&](const std::string& name, const AttrMap& attrs) {
    return ops::internal::Build(root.WithOpName(name), "MaxPoolGrad", {a, pool, g}, attrs);
  };
  auto relu_grad = [&](const std::string& name, Output grad, Output features) {
    return ops::internal::Build(root.WithOpName(name), "ReluGrad", {grad, features},
                                {{"T", DType::kFloat}});
  };
  // The mask is of another tensor than the pooled one.
  relu_grad("other_features", pool_grad("pg1", geometry), other);
  // The full-size gradient has a second reader.
  Output pg2 = pool_grad("pg2", geometry);
  relu_grad("shared", pg2, a);
  ops::Identity(root.WithOpName("reader"), pg2);
  // The gradient's windows are not the MaxPool's.
  AttrMap wider = geometry;
  wider["ksize"] = std::vector<int64_t>{1, 3, 3, 1};
  wider["padding"] = std::string("SAME");
  relu_grad("other_windows", pool_grad("pg3", wider), a);
  // The one that is rewritten.
  relu_grad("plain", pool_grad("pg4", geometry), a);

  RemapReport report;
  auto out = MaskBeforeMaxPoolGrad(DefOf(root), OpRegistry::Global(), &report);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(report.masks_before_pool_grad, 1);
  std::vector<std::string> routed;
  for (const auto& n : out->node()) {
    if (n.name().ends_with("/routed")) routed.push_back(n.name());
  }
  EXPECT_THAT(routed, ElementsAre("plain/routed"));
}

// BiasGradBeforeMaxPoolGrad (run by PrepareGraph after the mask has moved): the bias
// gradient's readers read BiasAddGrad(pooled gradient), whose sums equal those of the
// full-size routed gradient (fetched, summed here in double) up to float rounding.
void ExpectBiasGradOfPooledGradient(const ops::PoolAttrs& pool_attrs, Precision precision) {
  Net net(pool_attrs);
  const proto::GraphDef def = DefOf(net.root);
  auto prepared = PrepareGraph(def, precision);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  std::string pooled_sum, original_sum, routed, masked;
  for (const auto& n : prepared->node()) {
    if (n.op() == "BiasAddGrad" && n.name().ends_with("/pooled")) {
      pooled_sum = n.name();
      masked = n.input(0);
    }
    if (n.op() == "MaxPoolGrad" && n.name().ends_with("/routed")) routed = n.name();
  }
  ASSERT_FALSE(pooled_sum.empty()) << "not rewritten";
  for (const auto& n : prepared->node()) {
    const bool reads_routed =
        n.input_size() > 0 && (n.input(0) == routed || n.input(0) == routed + ":0");
    if (n.op() == "BiasAddGrad" && reads_routed) original_sum = n.name();
  }
  ASSERT_FALSE(original_sum.empty());
  EXPECT_TRUE(masked.ends_with("/pooled")) << masked;  // The masked, pooled gradient.

  SessionOptions so;
  so.precision = precision;
  auto session = NewDirectSession(def, so);
  ASSERT_TRUE(session.ok()) << session.status();
  auto out = (*session)->Run({{"x:0", Ramp(TensorShape({2, 6, 6, 2}), 0.61f, 0.0f)}},
                             {pooled_sum, original_sum, routed});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor &got = (*out)[0], &unrewritten = (*out)[1], &full = (*out)[2];
  const int64_t c = full.dim(3);
  ASSERT_EQ(got.NumElements(), c);
  std::vector<double> want(c, 0.0), scale(c, 0.0);
  for (int64_t k = 0; k < full.NumElements(); ++k) {
    want[k % c] += full.ValueAsDouble(k);
    scale[k % c] += std::fabs(full.ValueAsDouble(k));
  }
  // float32 sums; a bfloat16 result rounds once more.
  const double tolerance = precision == Precision::kFloat32 ? 1e-6 : 1e-2;
  int nonzero = 0;
  for (int64_t ch = 0; ch < c; ++ch) {
    EXPECT_NEAR(got.ValueAsDouble(ch), want[ch], tolerance * scale[ch] + 1e-12) << ch;
    EXPECT_NEAR(unrewritten.ValueAsDouble(ch), want[ch], tolerance * scale[ch] + 1e-12) << ch;
    nonzero += want[ch] != 0;
  }
  EXPECT_GT(nonzero, 0);
}

TEST(BiasGradBeforeMaxPoolGradTest, SumsThePooledGradient) {
  ExpectBiasGradOfPooledGradient(Disjoint2x2(), Precision::kFloat32);
  ExpectBiasGradOfPooledGradient(Overlapping3x3(), Precision::kFloat32);
  ExpectBiasGradOfPooledGradient(Disjoint2x2(), Precision::kMixedBfloat16);
  ExpectBiasGradOfPooledGradient(Overlapping3x3(), Precision::kMixedBfloat16);
}

TEST(BiasGradBeforeMaxPoolGradTest, OnlyOverAMaxPoolGradOnItsDevice) {
  ops::EnsureStandardOps();
  Scope root = Scope::NewRootScope();
  Output a = ops::Placeholder(root.WithOpName("a"), DType::kFloat, PartialShape({1, 4, 4, 3}));
  Output g = ops::Placeholder(root.WithOpName("g"), DType::kFloat, PartialShape({1, 2, 2, 3}));
  Output pool = ops::MaxPool(root.WithOpName("pool"), a);
  const AttrMap geometry = {{"ksize", std::vector<int64_t>{1, 2, 2, 1}},
                            {"strides", std::vector<int64_t>{1, 2, 2, 1}},
                            {"padding", std::string("VALID")},
                            {"T", DType::kFloat}};
  Output pg = ops::internal::Build(root.WithOpName("pg"), "MaxPoolGrad", {a, pool, g}, geometry);
  auto bias_grad = [&](const Scope& scope, const std::string& name, Output x) {
    return ops::internal::Build(scope.WithOpName(name), "BiasAddGrad", {x}, {{"T", DType::kFloat}});
  };
  bias_grad(root, "of_pool_grad", pg);
  bias_grad(root.WithDevice("/job:localhost/replica:0/task:0/device:CPU:1"), "elsewhere", pg);
  bias_grad(
      root, "of_relu_grad",
      ops::internal::Build(root.WithOpName("rg"), "ReluGrad", {a, a}, {{"T", DType::kFloat}}));

  RemapReport report;
  auto out = BiasGradBeforeMaxPoolGrad(DefOf(root), OpRegistry::Global(), &report);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(report.bias_grads_before_pool_grad, 1);
  std::vector<std::string> rewritten;
  for (const auto& n : out->node()) {
    if (n.name().ends_with("/pooled")) {
      rewritten.push_back(n.name());
      EXPECT_EQ(n.input(0), "g");
    }
  }
  EXPECT_THAT(rewritten, ElementsAre("of_pool_grad/pooled"));
}

TEST(MaskBeforeMaxPoolGradTest, ABadGraphIsAnError) {
  proto::GraphDef def;
  auto* n = def.add_node();
  n->set_name("r");
  n->set_op("ReluGrad");
  n->add_input("missing:0");
  n->add_input("missing:0");
  EXPECT_FALSE(MaskBeforeMaxPoolGrad(def, OpRegistry::Global()).ok());
}

}  // namespace
}  // namespace tandem

// FilterGradOfMaxPoolGrad (remapper.h) and its kernel: a first layer's filter gradient,
// whose output gradient is its pool's MaxPoolGrad, becomes one
// _Conv2DBackpropFilterOfMaxPoolGrad node, and its result equals the original pair's
// (fetched by name, which runs the unrewritten nodes) bit for bit: float32 and
// mixed_bfloat16, fashion_cnn's 5x5 layer on one channel (the unfolded AMX path with
// each image routed as it is read, where the process has AMX), odd sizes (rows and
// columns no window covers), overlapping 3x3 windows (written whole), and with
// TANDEM_POOL_GRAD_ROUTING=whole. The per-image routing is also called directly against
// the whole routed gradient. Pairs it must leave: a MaxPoolGrad that something fetched
// takes, and one on another device.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/graph/graph.h"
#include "framework/kernels/cpu/conv_filter_grad.h"
#include "framework/kernels/cpu/pool_util.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/gradients.h"
#include "framework/ops/internal/build.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/nn_ops.h"
#include "framework/ops/standard_ops.h"
#include "framework/runtime/prepare_graph.h"
#include "framework/runtime/remapper.h"
#include "framework/runtime/session.h"
#include "gtest/gtest.h"
#include "tests/util/def_of.h"
#include "tests/util/ramp.h"

namespace tandem {
namespace {

using ::tandem::testing::DefOf;
using ::tandem::testing::Ramp;

// x [n,h,w,1] -> Conv2D [5,5,1,8] SAME -> BiasAdd -> Relu -> MaxPool -> sum(pool * r),
// and its gradients with respect to the filter and the bias (a first layer: none with
// respect to x); "dw" reads the filter gradient, so it reads the rewritten node.
struct Layer {
  Scope root = Scope::NewRootScope();
  TensorShape x_shape;
  std::vector<Output> grads;

  Layer(int64_t n, int64_t h, int64_t w, const ops::PoolAttrs& pool_attrs) : x_shape({n, h, w, 1}) {
    ops::EnsureStandardOps();
    Output x = ops::Placeholder(root.WithOpName("x"), DType::kFloat, PartialShape({n, h, w, 1}));
    Output f = ops::Const(root.WithOpName("f"), Ramp(TensorShape({5, 5, 1, 8}), 0.7f, 0.0f));
    Output cb = ops::Const(root.WithOpName("cb"), Ramp(TensorShape({8}), 1.3f, -0.3f));
    Output act = ops::Relu(root, ops::BiasAdd(root, ops::Conv2D(root, x, f), cb));
    Output pool = ops::MaxPool(root.WithOpName("pool"), act, pool_attrs);
    const PartialShape& shape = pool.shape();
    Output r = ops::Const(root.WithOpName("r"),
                          Ramp(TensorShape({n, shape.dim(1), shape.dim(2), 8}), 1.9f, 0.1f));
    auto g = Gradients(root, {ops::Mul(root, pool, r)}, {f, cb});
    EXPECT_TRUE(g.ok()) << g.status();
    if (g.ok()) grads = *g;
    if (g.ok()) ops::Identity(root.WithOpName("dw"), grads[0]);
  }
};

ops::PoolAttrs Overlapping3x3() { return {{1, 3, 3, 1}, {1, 2, 2, 1}, "SAME"}; }

// Prepares the layer's graph, checks the filter gradient was rewritten, and compares
// the original (fetched by name) with the rewritten node, under TANDEM_POOL_GRAD_ROUTING
// = `routing` (empty: unset).
void ExpectBitForBit(const Layer& layer, Precision precision, const std::string& routing = "") {
  const proto::GraphDef def = DefOf(layer.root);
  auto prepared = PrepareGraph(def, precision);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  std::string fused, original;
  for (const auto& n : prepared->node()) {
    if (n.op() != "_Conv2DBackpropFilterOfMaxPoolGrad") continue;
    ASSERT_TRUE(fused.empty()) << "two rewrites";
    fused = n.name();
    original = n.name().substr(0, n.name().size() - std::string("/of_pool_grad").size());
    EXPECT_EQ(n.input_size(), 5);
  }
  ASSERT_FALSE(fused.empty()) << "not rewritten";
  SessionOptions so;
  so.precision = precision;
  if (!routing.empty()) setenv("TANDEM_POOL_GRAD_ROUTING", routing.c_str(), 1);
  auto session = NewDirectSession(def, so);
  ASSERT_TRUE(session.ok()) << session.status();
  auto out =
      (*session)->Run({{"x:0", Ramp(layer.x_shape, 0.61f, 0.0f)}}, {original, fused, "dw:0"});
  unsetenv("TANDEM_POOL_GRAD_ROUTING");
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor &want = (*out)[0], &got = (*out)[1], &read = (*out)[2];
  ASSERT_EQ(want.shape(), got.shape());
  ASSERT_EQ(want.dtype(), got.dtype());
  int nonzero = 0;
  for (int64_t k = 0; k < want.NumElements(); ++k) {
    ASSERT_EQ(got.ValueAsDouble(k), want.ValueAsDouble(k)) << k;
    ASSERT_EQ(read.ValueAsDouble(k), want.ValueAsDouble(k)) << k;
    nonzero += want.ValueAsDouble(k) != 0;
  }
  EXPECT_GT(nonzero, want.NumElements() / 2);
}

TEST(FilterGradOfMaxPoolGradTest, FashionLayerEqualsThePairBitForBit) {
  const Layer layer(6, 28, 28, ops::PoolAttrs{});
  ExpectBitForBit(layer, Precision::kFloat32);
  ExpectBitForBit(layer, Precision::kMixedBfloat16);
  ExpectBitForBit(layer, Precision::kMixedBfloat16, "whole");
}

TEST(FilterGradOfMaxPoolGradTest, OddSizesEqualThePairBitForBit) {
  const Layer layer(3, 9, 7, ops::PoolAttrs{});  // row 8 and column 6 in no window
  ExpectBitForBit(layer, Precision::kFloat32);
  ExpectBitForBit(layer, Precision::kMixedBfloat16);
}

TEST(FilterGradOfMaxPoolGradTest, OverlappingWindowsEqualThePairBitForBit) {
  const Layer layer(2, 8, 8, Overlapping3x3());
  ExpectBitForBit(layer, Precision::kFloat32);
  ExpectBitForBit(layer, Precision::kMixedBfloat16);
}

TEST(FilterGradOfMaxPoolGradTest, AnUnknownRoutingIsAnError) {
  const Layer layer(1, 8, 8, ops::PoolAttrs{});
  setenv("TANDEM_POOL_GRAD_ROUTING", "sideways", 1);
  auto session = NewDirectSession(DefOf(layer.root), SessionOptions{});
  ASSERT_TRUE(session.ok()) << session.status();
  auto out = (*session)->Run({{"x:0", Ramp(layer.x_shape, 0.61f, 0.0f)}}, {"dw:0"});
  unsetenv("TANDEM_POOL_GRAD_ROUTING");
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("TANDEM_POOL_GRAD_ROUTING"), std::string::npos)
      << out.status();
}

// a [1,4,4,2] -> MaxPoolGrad "pg" -> Conv2DBackpropFilter, in the variants that must not
// be rewritten, and the one that must.
TEST(FilterGradOfMaxPoolGradTest, OnlyWhereNothingElseTakesTheMaxPoolGrad) {
  ops::EnsureStandardOps();
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DType::kFloat, PartialShape({1, 4, 4, 1}));
  Output a = ops::Placeholder(root.WithOpName("a"), DType::kFloat, PartialShape({1, 4, 4, 2}));
  Output g = ops::Placeholder(root.WithOpName("g"), DType::kFloat, PartialShape({1, 2, 2, 2}));
  Output pool = ops::MaxPool(root.WithOpName("pool"), a);
  const AttrMap geometry = {{"ksize", std::vector<int64_t>{1, 2, 2, 1}},
                            {"strides", std::vector<int64_t>{1, 2, 2, 1}},
                            {"padding", std::string("VALID")},
                            {"T", DType::kFloat}};
  auto pool_grad = [&](const Scope& scope, const std::string& name) {
    return ops::internal::Build(scope.WithOpName(name), "MaxPoolGrad", {a, pool, g}, geometry);
  };
  auto filter_grad = [&](const Scope& scope, const std::string& name, Output dy) {
    return ops::Conv2DBackpropFilter(scope.WithOpName(name), x, ops::ConstInt32(root, {3, 3, 1, 2}),
                                     dy, ops::Conv2DAttrs{});
  };
  // Taken alone (an unread Identity beside it runs only when fetched).
  Output alone = pool_grad(root, "alone");
  filter_grad(root, "of_alone", alone);
  ops::Identity(root.WithOpName("unread"), alone);
  // Also read by a node an update waits for (a control edge): it runs anyway.
  Output shared = pool_grad(root, "shared");
  filter_grad(root, "of_shared", shared);
  Output used = ops::Identity(root.WithOpName("used"), shared);
  ops::NoOp(root.WithOpName("train").WithControlDependencies({used}));
  // On another device than its filter gradient.
  Output there = pool_grad(root, "there");
  filter_grad(root.WithDevice("/job:localhost/replica:0/task:0/device:CPU:1"), "of_there", there);

  RemapReport report;
  auto out = FilterGradOfMaxPoolGrad(DefOf(root), OpRegistry::Global(), &report);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(report.filter_grads_of_pool_grad, 1);
  std::vector<std::string> rewritten;
  for (const auto& n : out->node()) {
    if (n.op() != "_Conv2DBackpropFilterOfMaxPoolGrad") continue;
    rewritten.push_back(n.name());
    ASSERT_EQ(n.input_size(), 5);
    EXPECT_EQ(n.input(0), "x");
    EXPECT_EQ(n.input(2), "a");
    EXPECT_EQ(n.input(3), "pool");
    EXPECT_EQ(n.input(4), "g");
    EXPECT_EQ(n.attr().at("pool_padding").s(), "VALID");
    EXPECT_EQ(n.attr().at("padding").s(), "SAME");
  }
  EXPECT_EQ(rewritten, std::vector<std::string>{"of_alone/of_pool_grad"});
}

// The per-image routing called directly (the session tests reach it only where the
// process has AMX): equal bit for bit to the unfolded path on the whole routed gradient,
// for even and odd sizes.
TEST(FilterGradOfMaxPoolGradTest, RoutingPerImageEqualsTheWholeGradient) {
  for (const auto& [h, w] : {std::pair<int64_t, int64_t>{28, 28}, {9, 7}}) {
    SCOPED_TRACE(absl::StrCat(h, "x", w));
    const nn::FilterGradGeometry g{5, h, w, 1, 5, 5, 32, h, w, 1, 1, 1, 1, 2, 2};
    if (!nn::AmxFilterGradIsAvailable() || !nn::AmxUnfoldedFilterGradApplies(g)) {
      GTEST_SKIP() << "this CPU, kernel or ONEDNN_MAX_CPU_ISA gives the process no AMX tiles";
    }
    auto bf16 = [](const TensorShape& shape, float scale, float offset) {
      const Tensor f = Ramp(shape, scale, offset);
      Tensor t(DType::kBFloat16, shape);
      for (int64_t i = 0; i < f.NumElements(); ++i) {
        t.data<bfloat16>()[i] = bfloat16(f.data<float>()[i]);
      }
      return t;
    };
    const Tensor x = bf16(TensorShape({5, h, w, 1}), 0.61f, 0.0f);
    const Tensor a = bf16(TensorShape({5, h, w, 32}), 0.37f, 0.2f);
    const Tensor pg = bf16(TensorShape({5, h / 2, w / 2, 32}), 1.9f, 0.1f);
    nn::PoolShape p{5, h, w, 32, h / 2, w / 2, {h / 2, 0, 0}, {w / 2, 0, 0}, {2, 2, 2, 2, false}};
    Tensor routed(DType::kBFloat16, a.shape());
    nn::MaxPoolGradInto(p, a, pg, &routed);
    Tensor want(DType::kFloat, TensorShape({5, 5, 1, 32}));
    Tensor got(DType::kFloat, TensorShape({5, 5, 1, 32}));
    ASSERT_TRUE(nn::FilterGradAmxUnfolded(g, x, routed, &want).ok());
    ASSERT_TRUE(nn::FilterGradAmxUnfoldedOfMaxPool(g, x, a, pg, &got).ok());
    EXPECT_EQ(std::memcmp(want.raw_data(), got.raw_data(), want.TotalBytes()), 0);
    int nonzero = 0;
    for (int64_t i = 0; i < want.NumElements(); ++i) nonzero += want.data<float>()[i] != 0;
    EXPECT_EQ(nonzero, want.NumElements());
  }
}

}  // namespace
}  // namespace tandem

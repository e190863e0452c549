// The first layer's rewrites around its max pool (remapper.h) and their kernels.
// FilterGradOfMaxPoolGrad: the filter gradient, whose output gradient is its pool's
// MaxPoolGrad, becomes one _Conv2DBackpropFilterOfMaxPoolGrad node. FuseConvAndMaxPool:
// the _FusedConv2D and its 2x2 MaxPool become one _FusedConv2DWithMaxPool node with both
// outputs. Each result equals the original nodes' (fetched by name, which runs them
// unrewritten) bit for bit: float32 and mixed_bfloat16, fashion_cnn's 5x5 layer on one
// channel (on AMX tiles where the process has them: each image routed as it is read,
// and pooled as it leaves the tiles), odd sizes (rows and columns no window covers),
// SAME pooling that pads (pooled after the convolution), overlapping 3x3 windows (the
// pool not fused, the routed gradient written whole), with TANDEM_POOL_GRAD_ROUTING=whole
// and TANDEM_CONV_FORWARD=onednn. KeepPoolArgmax: the fused pair keeps the pool's argmax
// in place of the convolution's output, and the filter gradient routes by it; equal too.
// The per-image routing is also called directly against the whole routed gradient.
// Graphs each pass must leave alone.
#include <cstdlib>
#include <cstring>
#include <map>
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

// The one node of `op` in `def` (a test failure and "" if not one).
std::string OnlyNodeOf(const proto::GraphDef& def, const std::string& op) {
  std::vector<std::string> names;
  for (const auto& n : def.node()) {
    if (n.op() == op) names.push_back(n.name());
  }
  EXPECT_EQ(names.size(), 1u) << op;
  return names.size() == 1 ? names[0] : "";
}

// Equal values and shapes; returns the count of nonzero elements. Under mixed_bfloat16 a
// user's name fetches the float32 view of a bfloat16 node: values compare as doubles,
// which both dtypes widen to exactly.
int64_t ExpectEqual(const Tensor& want, const Tensor& got, const std::string& what) {
  EXPECT_EQ(want.shape(), got.shape()) << what;
  if (want.shape() != got.shape()) return 0;
  int64_t nonzero = 0;
  for (int64_t k = 0; k < want.NumElements(); ++k) {
    if (got.ValueAsDouble(k) != want.ValueAsDouble(k)) {
      ADD_FAILURE() << what << " element " << k << ": " << got.ValueAsDouble(k) << " vs "
                    << want.ValueAsDouble(k);
      return nonzero;
    }
    nonzero += want.ValueAsDouble(k) != 0;
  }
  return nonzero;
}

struct Env {
  const char* name;
  std::string value;
};

// Prepares the layer's graph, checks that the filter gradient was rewritten (and the
// pool fused where `pool_fused`), and compares each original (fetched by name) with its
// rewritten output, under the environment `env`.
void ExpectBitForBit(const Layer& layer, Precision precision, bool pool_fused,
                     const std::vector<Env>& env = {}) {
  const proto::GraphDef def = DefOf(layer.root);
  auto prepared = PrepareGraph(def, precision);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  const std::string filter_grad = OnlyNodeOf(*prepared, "_Conv2DBackpropFilterOfMaxPoolGrad");
  ASSERT_FALSE(filter_grad.empty());
  const std::string original_grad =
      filter_grad.substr(0, filter_grad.size() - std::string("/of_pool_grad").size());
  std::vector<std::string> fetches = {original_grad, filter_grad, "dw:0"};
  if (pool_fused) {
    const std::string conv_pool = OnlyNodeOf(*prepared, "_FusedConv2DWithMaxPool");
    ASSERT_FALSE(conv_pool.empty());
    const std::string conv =
        conv_pool.substr(0, conv_pool.size() - std::string("/with_pool").size());
    // The MaxPool node itself (under mixed_bfloat16, "pool" is its float32 view, which
    // now reads the fused node), reading the fused node's output 0.
    const std::string pool = OnlyNodeOf(*prepared, "MaxPool");
    // KeepPoolArgmax: the argmax forms of both, which "dw" now reads.
    EXPECT_EQ(OnlyNodeOf(*prepared, "_FusedConv2DWithMaxPoolArgmax"), conv_pool + "/argmax");
    EXPECT_EQ(OnlyNodeOf(*prepared, "_Conv2DBackpropFilterOfMaxPoolArgmax"),
              filter_grad + "/by_argmax");
    fetches.insert(fetches.end(), {conv, conv_pool + ":0", pool, conv_pool + ":1",
                                   conv_pool + "/argmax:0", filter_grad + "/by_argmax:0"});
  } else {
    for (const auto& n : prepared->node()) {
      EXPECT_NE(n.op(), "_FusedConv2DWithMaxPool");
      EXPECT_NE(n.op(), "_FusedConv2DWithMaxPoolArgmax");
    }
  }
  SessionOptions so;
  so.precision = precision;
  for (const Env& e : env) setenv(e.name, e.value.c_str(), 1);
  auto session = NewDirectSession(def, so);
  ASSERT_TRUE(session.ok()) << session.status();
  auto out = (*session)->Run({{"x:0", Ramp(layer.x_shape, 0.61f, 0.0f)}}, fetches);
  for (const Env& e : env) unsetenv(e.name);
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& want = (*out)[0];
  EXPECT_GT(ExpectEqual(want, (*out)[1], "filter gradient"), want.NumElements() / 2);
  ExpectEqual(want, (*out)[2], "the filter gradient's reader");
  if (pool_fused) {
    EXPECT_GT(ExpectEqual((*out)[3], (*out)[4], "convolution"), 0);
    EXPECT_GT(ExpectEqual((*out)[5], (*out)[6], "pool"), 0);
    ExpectEqual((*out)[5], (*out)[7], "pool beside its argmax");
    ExpectEqual(want, (*out)[8], "filter gradient routed by the argmax");
  }
}

TEST(ConvPoolFusionTest, FashionLayerEqualsTheOriginalsBitForBit) {
  const Layer layer(6, 28, 28, ops::PoolAttrs{});
  ExpectBitForBit(layer, Precision::kFloat32, true);
  ExpectBitForBit(layer, Precision::kMixedBfloat16, true);
  ExpectBitForBit(layer, Precision::kMixedBfloat16, true,
                  {{"TANDEM_POOL_GRAD_ROUTING", "whole"}, {"TANDEM_CONV_FORWARD", "onednn"}});
}

TEST(ConvPoolFusionTest, OddSizesEqualTheOriginalsBitForBit) {
  const Layer layer(3, 9, 7, ops::PoolAttrs{});  // row 8 and column 6 in no window
  ExpectBitForBit(layer, Precision::kFloat32, true);
  ExpectBitForBit(layer, Precision::kMixedBfloat16, true);
}

TEST(ConvPoolFusionTest, PaddedPoolEqualsTheOriginalsBitForBit) {
  const Layer layer(2, 9, 7, ops::PoolAttrs{{1, 2, 2, 1}, {1, 2, 2, 1}, "SAME"});
  ExpectBitForBit(layer, Precision::kFloat32, true);
  ExpectBitForBit(layer, Precision::kMixedBfloat16, true);
}

TEST(ConvPoolFusionTest, OverlappingWindowsEqualTheOriginalsBitForBit) {
  const Layer layer(2, 8, 8, Overlapping3x3());
  ExpectBitForBit(layer, Precision::kFloat32, false);
  ExpectBitForBit(layer, Precision::kMixedBfloat16, false);
}

TEST(ConvPoolFusionTest, AnUnknownRoutingIsAnError) {
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

// A graph's x [1,8,8,1], 3x3 filter f to 4 channels and bias b: the rewrite tests'
// convolution operands.
struct ConvOperands {
  Scope root = Scope::NewRootScope();
  Output x, f, b;
  ConvOperands() {
    ops::EnsureStandardOps();
    x = ops::Placeholder(root.WithOpName("x"), DType::kFloat, PartialShape({1, 8, 8, 1}));
    f = ops::Const(root.WithOpName("f"), Ramp(TensorShape({3, 3, 1, 4}), 0.7f, 0.0f));
    b = ops::Const(root.WithOpName("b"), Ramp(TensorShape({4}), 1.3f, 0.0f));
  }
};

// x -> _FusedConv2D variants -> MaxPool: which FuseConvAndMaxPool rewrites, and that the
// pool's readers then read output 1 and the convolution's output 0.
TEST(FuseConvAndMaxPoolTest, OnlyA2x2PoolOfAFusedConvolution) {
  const ConvOperands operands;
  const Scope& root = operands.root;
  const Output &x = operands.x, &f = operands.f, &b = operands.b;
  auto conv = [&](const Scope& scope, const std::string& name) {
    return ops::internal::Build(scope.WithOpName(name), "_FusedConv2D", {x, f, b},
                                {{"T", DType::kFloat}, {"activation", std::string("relu")}});
  };
  // Fused: its pool's reader and its own reader move to the fused node's outputs.
  Output c = conv(root, "c");
  Output pool = ops::MaxPool(root.WithOpName("pool"), c);
  ops::Identity(root.WithOpName("reads_pool"), pool);
  ops::Identity(root.WithOpName("reads_conv"), c);
  // Not fused: two pools of one convolution, a 3x3 pool, a pool on another device.
  Output twice = conv(root, "twice");
  ops::MaxPool(root.WithOpName("first"), twice);
  ops::MaxPool(root.WithOpName("second"), twice);
  ops::MaxPool(root.WithOpName("wide"), conv(root, "under_wide"),
               ops::PoolAttrs{{1, 3, 3, 1}, {1, 2, 2, 1}, "VALID"});
  ops::MaxPool(root.WithOpName("there").WithDevice("/job:localhost/replica:0/task:0/device:CPU:1"),
               conv(root, "here"));

  RemapReport report;
  auto out = FuseConvAndMaxPool(DefOf(root), OpRegistry::Global(), &report);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(report.pools_inside_convs, 1);
  EXPECT_EQ(OnlyNodeOf(*out, "_FusedConv2DWithMaxPool"), "c/with_pool");
  for (const auto& n : out->node()) {
    if (n.name() == "c/with_pool") {
      EXPECT_EQ(n.attr().at("pool_padding").s(), "VALID");
      EXPECT_EQ(n.attr().at("activation").s(), "relu");
    }
    if (n.name() == "reads_pool") {
      EXPECT_EQ(n.input(0), "c/with_pool:1");
    }
    if (n.name() == "reads_conv") {
      EXPECT_EQ(n.input(0), "c/with_pool");  // output 0
    }
  }
}

// x -> _FusedConv2DWithMaxPool variants and their readers: which KeepPoolArgmax
// rewrites, and what the rewritten nodes read.
TEST(KeepPoolArgmaxTest, OnlyWhereNothingLiveReadsTheConvolution) {
  const ConvOperands operands;
  const Scope& root = operands.root;
  const Output &x = operands.x, &f = operands.f, &b = operands.b;
  Output g = ops::Placeholder(root.WithOpName("g"), DType::kFloat, PartialShape({1, 4, 4, 4}));
  Output sizes = ops::ConstInt32(root.WithOpName("sizes"), {3, 3, 1, 4});
  const AttrMap attrs = {{"T", DType::kFloat}, {"activation", std::string("relu")}};
  auto conv = [&](const std::string& name) {
    return ops::internal::AllOutputs(ops::internal::BuildNode(
        root.WithOpName(name), "_FusedConv2DWithMaxPool", {x, f, b}, attrs));
  };
  auto filter_grad = [&](const Scope& scope, const std::string& name,
                         const std::vector<Output>& c) {
    return ops::internal::Build(scope.WithOpName(name), "_Conv2DBackpropFilterOfMaxPoolGrad",
                                {x, sizes, c[0], c[1], g}, {{"T", DType::kFloat}});
  };
  // Rewritten: a training layer (its pool read, its output only by the filter gradient
  // and an unread Identity) and an inference one (only the pool read).
  std::vector<Output> kept = conv("kept");
  ops::Identity(root.WithOpName("reads_pool"), kept[1]);
  ops::Identity(root.WithOpName("dw"), filter_grad(root, "kept_grad", kept));
  ops::Identity(root.WithOpName("unread"), kept[0]);
  ops::Identity(root.WithOpName("reads_inference_pool"), conv("inference")[1]);
  // Not rewritten: the convolution also read by a node an update waits for; a filter
  // gradient, which an update waits for, on another device.
  std::vector<Output> shared = conv("shared");
  filter_grad(root, "shared_grad", shared);
  Output used = ops::Identity(root.WithOpName("used"), shared[0]);
  Output there = filter_grad(root.WithDevice("/job:localhost/replica:0/task:0/device:CPU:1"),
                             "there_grad", conv("there"));
  ops::NoOp(root.WithOpName("train").WithControlDependencies({used, there}));

  RemapReport report;
  auto out = KeepPoolArgmax(DefOf(root), OpRegistry::Global(), &report);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(report.pool_argmaxes_kept, 2);
  std::vector<std::string> convs, grads;
  for (const auto& n : out->node()) {
    if (n.op() == "_FusedConv2DWithMaxPoolArgmax") convs.push_back(n.name());
    if (n.op() == "_Conv2DBackpropFilterOfMaxPoolArgmax") {
      grads.push_back(n.name());
      EXPECT_EQ(std::vector<std::string>(n.input().begin(), n.input().end()),
                (std::vector<std::string>{"x", "sizes", "kept/argmax:1", "g"}));
    }
    const std::map<std::string, std::string> reads = {
        {"reads_pool", "kept/argmax:0"},
        {"reads_inference_pool", "inference/argmax:0"},
        {"dw", "kept_grad/by_argmax"},
        {"unread", "kept"}};  // the original's output 0
    auto it = reads.find(n.name());
    if (it != reads.end()) {
      EXPECT_EQ(n.input(0), it->second) << n.name();
    }
  }
  EXPECT_EQ(convs, (std::vector<std::string>{"kept/argmax", "inference/argmax"}));
  EXPECT_EQ(grads, std::vector<std::string>{"kept_grad/by_argmax"});
}

// The per-image routing called directly (the session tests reach it only where the
// process has AMX), from the pool's input and from its argmax codes: equal bit for bit
// to the unfolded path on the whole routed gradient, for even and odd sizes.
TEST(ConvPoolFusionTest, RoutingPerImageEqualsTheWholeGradient) {
  for (const auto& [h, w] : {std::pair<int64_t, int64_t>{28, 28}, {9, 7}}) {
    SCOPED_TRACE(absl::StrCat(h, "x", w));
    const nn::FilterGradGeometry g{5, h, w, 1, 5, 5, 32, h, w, 1, 1, 1, 1, 2, 2};
    if (!nn::AmxFilterGradIsAvailable() || !nn::AmxUnfoldedFilterGradApplies(g)) {
      GTEST_SKIP() << "this CPU, kernel or ONEDNN_MAX_CPU_ISA gives the process no AMX tiles";
    }
    auto bf16 = [](const TensorShape& shape, float scale, float offset) {
      const Tensor f = Ramp(shape, scale, offset);
      const float* v = f.data<float>();
      return Tensor::FromVector<bfloat16>(std::vector<bfloat16>(v, v + f.NumElements()), shape);
    };
    const Tensor x = bf16(TensorShape({5, h, w, 1}), 0.61f, 0.0f);
    const Tensor a = bf16(TensorShape({5, h, w, 32}), 0.37f, 0.2f);
    const Tensor pg = bf16(TensorShape({5, h / 2, w / 2, 32}), 1.9f, 0.1f);
    nn::PoolGeometry p{
        5, h, w, 32, h / 2, w / 2, {h / 2, 0, 0}, {w / 2, 0, 0}, {2, 2, 2, 2, false}};
    Tensor routed(DType::kBFloat16, a.shape());
    nn::MaxPoolGradInto(p, a, pg, &routed);
    Tensor want(DType::kFloat, TensorShape({5, 5, 1, 32}));
    Tensor got(DType::kFloat, TensorShape({5, 5, 1, 32}));
    ASSERT_TRUE(nn::FilterGradAmxUnfolded(g, x, routed, &want).ok());
    ASSERT_TRUE(nn::FilterGradAmxUnfoldedOfMaxPool(g, x, a, pg, &got).ok());
    EXPECT_EQ(std::memcmp(want.raw_data(), got.raw_data(), want.TotalBytes()), 0);
    // Routed by the pool's argmax codes.
    Tensor pooled(DType::kBFloat16, pg.shape()), codes(DType::kUInt8, pg.shape());
    nn::MaxPoolArgmaxInto(p, a, &pooled, &codes);
    Tensor by_codes(DType::kFloat, TensorShape({5, 5, 1, 32}));
    ASSERT_TRUE(nn::FilterGradAmxUnfoldedOfMaxPoolArgmax(g, x, codes, pg, &by_codes).ok());
    EXPECT_EQ(std::memcmp(want.raw_data(), by_codes.raw_data(), want.TotalBytes()), 0);
    int nonzero = 0;
    for (int64_t i = 0; i < want.NumElements(); ++i) nonzero += want.data<float>()[i] != 0;
    EXPECT_EQ(nonzero, want.NumElements());
  }
}

}  // namespace
}  // namespace tandem

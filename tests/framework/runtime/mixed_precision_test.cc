// The mixed_bfloat16 rewrite: which ops move to bfloat16, that every name the caller
// knows keeps its dtype, that a float32 tensor is cast once per consuming device, and
// that a session running the rewritten graph computes what float32 does within
// bfloat16's precision. ctest also runs this binary with ONEDNN_MAX_CPU_ISA=AVX2,
// where oneDNN has no bf16 kernels and the float32 fallback must give the same.
#include "framework/runtime/mixed_precision.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

#include "framework/graph/graph.h"
#include "framework/kernels/cpu/onednn_util.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/gradients.h"
#include "framework/ops/internal/build.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/nn_ops.h"
#include "framework/ops/standard_ops.h"
#include "framework/runtime/session.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/util/ramp.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

using ::tandem::testing::Ramp;

// x [8,6] -> MatMul w1 [6,5] -> BiasAdd b -> Relu -> MatMul w2 [5,4] -> Softmax, plus
// the gradients of sum(softmax * r) with respect to x, w1 and w2 (w2 is read by the
// forward MatMul and by the backward one).
struct Net {
  Scope root = Scope::NewRootScope();
  Output x, logits, probs, hidden;
  std::vector<Output> grads;

  Net() {
    x = ops::Placeholder(root.WithOpName("x"), DType::kFloat, PartialShape({8, 6}));
    Output w1 = ops::Const(root.WithOpName("w1"), Ramp(TensorShape({6, 5}), 0.7f, 0.1f));
    Output b = ops::Const(root.WithOpName("b"), Ramp(TensorShape({5}), 1.3f, 0.0f));
    Output w2 = ops::Const(root.WithOpName("w2"), Ramp(TensorShape({5, 4}), 0.4f, -0.2f));
    hidden = ops::Relu(root.WithOpName("hidden"),
                       ops::BiasAdd(root.WithOpName("bias"), ops::MatMul(root, x, w1), b));
    logits = ops::MatMul(root.WithOpName("logits"), hidden, w2);
    probs = ops::Softmax(root.WithOpName("probs"), logits);
    Output r = ops::Const(root.WithOpName("r"), Ramp(TensorShape({8, 4}), 2.1f, 0.0f));
    auto g = Gradients(root, {probs}, {x, w1, w2}, {r});
    EXPECT_TRUE(g.ok()) << g.status();
    if (g.ok()) grads = *g;
  }

  proto::GraphDef Def() const {
    proto::GraphDef def;
    root.graph()->ToGraphDef(&def);
    return def;
  }
};

const proto::NodeDef* FindDef(const proto::GraphDef& def, const std::string& name) {
  for (const auto& n : def.node()) {
    if (n.name() == name) return &n;
  }
  return nullptr;
}

TEST(PrecisionTest, ParsesTheTwoPolicies) {
  EXPECT_EQ(*ParsePrecision("float32"), Precision::kFloat32);
  EXPECT_EQ(*ParsePrecision("mixed_bfloat16"), Precision::kMixedBfloat16);
  auto bad = ParsePrecision("bfloat16");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("\"mixed_bfloat16\""));
  EXPECT_EQ(PrecisionName(Precision::kMixedBfloat16), "mixed_bfloat16");
}

TEST(MixedPrecisionRewriteTest, Float32LeavesTheGraphAlone) {
  ops::EnsureStandardOps();
  Net net;
  proto::GraphDef def = net.Def();
  auto out = ApplyPrecision(def, Precision::kFloat32);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*out, def));
}

TEST(MixedPrecisionRewriteTest, ConvertsAllowAndInferOpsAndKeepsNames) {
  ops::EnsureStandardOps();
  Net net;
  MixedPrecisionReport report;
  auto out = RewriteForMixedBfloat16(net.Def(), OpRegistry::Global(), &report);
  ASSERT_TRUE(out.ok()) << out.status();
  auto g = Graph::FromGraphDef(*out, OpRegistry::Global());
  ASSERT_TRUE(g.ok()) << g.status();

  // The first MatMul, BiasAdd and Relu run on bfloat16 under new names; the old names
  // are float32 Casts of them.
  for (const std::string& name :
       {std::string("MatMul"), std::string("bias"), std::string("hidden")}) {
    const Node* low = (*g)->FindNode(name + "/bfloat16");
    ASSERT_NE(low, nullptr) << name;
    EXPECT_EQ(low->output_dtype(0), DType::kBFloat16) << name;
    const Node* same = (*g)->FindNode(name);
    ASSERT_NE(same, nullptr);
    EXPECT_EQ(same->op(), "Cast");
    EXPECT_EQ(same->output_dtype(0), DType::kFloat);
  }
  // The logits MatMul feeds only Softmax (denied): it keeps its name and multiplies
  // bfloat16 operands into a float32 output, which Softmax reads.
  const Node* logits = (*g)->FindNode("logits");
  EXPECT_EQ(logits->op(), "MatMul");
  EXPECT_EQ(logits->input(0).dtype(), DType::kBFloat16);
  EXPECT_EQ(logits->output_dtype(0), DType::kFloat);
  const Node* probs = (*g)->FindNode("probs");
  EXPECT_EQ(probs->op(), "Softmax");
  EXPECT_EQ(probs->input(0).node, logits);
  // So do the weight gradients (nothing consumes them here; an optimizer would).
  for (const Output& t : {net.grads[1], net.grads[2]}) {
    const Node* grad = (*g)->FindNode(t.node->name());
    EXPECT_EQ(grad->op(), "MatMul");
    EXPECT_EQ(grad->input(0).dtype(), DType::kBFloat16);
    EXPECT_EQ(grad->output_dtype(0), DType::kFloat);
  }
  // Every fetchable name keeps its dtype.
  for (const Output& t : net.grads) {
    EXPECT_EQ((*g)->FindNode(t.node->name())->output_dtype(t.index), DType::kFloat);
  }
  EXPECT_EQ(report.converted["MatMul"], 6);  // 2 forward, 4 backward (x's grad included).
  // logits, dx and the two weight gradients write float32.
  EXPECT_EQ(report.float32_outputs, 4);
  EXPECT_EQ(report.converted["BiasAdd"], 1);
  EXPECT_EQ(report.converted["Relu"], 1);
  EXPECT_EQ(report.converted.count("Softmax"), 0);
  EXPECT_EQ(report.converted.count("Cast"), 0);
}

TEST(MixedPrecisionRewriteTest, CastsEachFloat32TensorOncePerDevice) {
  ops::EnsureStandardOps();
  Net net;
  auto out = RewriteForMixedBfloat16(net.Def(), OpRegistry::Global());
  ASSERT_TRUE(out.ok()) << out.status();
  // w2 feeds the forward MatMul and the backward MatMul for hidden's gradient: one cast.
  int w2_casts = 0;
  for (const auto& n : out->node()) {
    if (n.op() == "Cast" && n.input(0) == "w2:0") ++w2_casts;
  }
  EXPECT_EQ(w2_casts, 1);

  // Two consumers on two devices: one cast on each.
  Scope root = Scope::NewRootScope();
  Output w = ops::Const(root.WithOpName("w"), Ramp(TensorShape({3, 3}), 0.3f, 0.0f));
  Output a = ops::Placeholder(root.WithOpName("a"), DType::kFloat, PartialShape({2, 3}));
  ops::MatMul(root.WithOpName("m0").WithDevice("/job:worker/task:0"), a, w);
  ops::MatMul(root.WithOpName("m1").WithDevice("/job:worker/task:1"), a, w);
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  auto two = RewriteForMixedBfloat16(def, OpRegistry::Global());
  ASSERT_TRUE(two.ok()) << two.status();
  std::vector<std::string> devices;
  for (const auto& n : two->node()) {
    if (n.op() == "Cast" && n.input(0) == "w:0") devices.push_back(n.device());
  }
  EXPECT_THAT(devices, ::testing::UnorderedElementsAre("/job:worker/task:0", "/job:worker/task:1"));
  // The float32 view of each MatMul stays on its device.
  EXPECT_EQ(FindDef(*two, "m1")->device(), "/job:worker/task:1");
}

TEST(MixedPrecisionRewriteTest, LeavesExplicitBfloat16GraphsAlone) {
  ops::EnsureStandardOps();
  Scope root = Scope::NewRootScope();
  Output a =
      ops::Cast(root, ops::Placeholder(root.WithOpName("a"), DType::kFloat, PartialShape({2, 3})),
                DType::kBFloat16);
  ops::MatMul(root.WithOpName("m"), a, a, false, true);
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  MixedPrecisionReport report;
  auto out = RewriteForMixedBfloat16(def, OpRegistry::Global(), &report);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(report.converted.empty());
  EXPECT_EQ(report.casts_to_bfloat16, 0);
  EXPECT_EQ(out->node_size(), def.node_size());
}

TEST(MixedPrecisionRewriteTest, ABadGraphIsAnError) {
  proto::GraphDef def;
  auto* n = def.add_node();
  n->set_name("m");
  n->set_op("MatMul");
  n->add_input("missing:0");
  n->add_input("missing:0");
  EXPECT_FALSE(RewriteForMixedBfloat16(def, OpRegistry::Global()).ok());
}

// Runs the net's fetches in a session of `precision`.
std::vector<Tensor> RunNet(const Net& net, Precision precision) {
  SessionOptions so;
  so.precision = precision;
  auto session = NewDirectSession(net.Def(), so);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return {};
  std::vector<std::string> fetches = {net.logits.name(), net.probs.name()};
  for (const Output& g : net.grads) fetches.push_back(g.name());
  auto out = (*session)->Run({{"x:0", Ramp(TensorShape({8, 6}), 0.9f, 0.0f)}}, fetches);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::vector<Tensor>{};
}

TEST(MixedPrecisionSessionTest, ComputesWhatFloat32DoesWithinBfloat16Precision) {
  ops::EnsureStandardOps();
  Net net;
  std::vector<Tensor> f32 = RunNet(net, Precision::kFloat32);
  std::vector<Tensor> mixed = RunNet(net, Precision::kMixedBfloat16);
  ASSERT_EQ(f32.size(), mixed.size());
  double worst = 0;
  for (size_t i = 0; i < f32.size(); ++i) {
    ASSERT_EQ(mixed[i].dtype(), DType::kFloat) << i;  // Fetches keep their dtype.
    ASSERT_EQ(mixed[i].shape(), f32[i].shape()) << i;
    double scale = 0;
    for (int64_t k = 0; k < f32[i].NumElements(); ++k) {
      scale = std::max(scale, std::fabs(f32[i].ValueAsDouble(k)));
    }
    for (int64_t k = 0; k < f32[i].NumElements(); ++k) {
      const double err = std::fabs(mixed[i].ValueAsDouble(k) - f32[i].ValueAsDouble(k));
      worst = std::max(worst, err / (scale + 1e-30));
    }
  }
  // Relative to each tensor's largest value: a few bfloat16 roundings (2^-8 each)
  // through two layers and their gradients.
  EXPECT_LT(worst, 0.05);
  EXPECT_GT(worst, 0.0);  // It did run on bfloat16.
}

// MatMul and Conv2DBackpropFilter with Tout = float32: bfloat16 operands, a float32
// result equal to the float32 computation on the same (bfloat16-exact) values, to
// float32 accuracy, which a bfloat16 result (8 bits) could not match.
TEST(MixedPrecisionKernelTest, Float32OutputFromBfloat16Operands) {
  ops::EnsureStandardOps();
  // Values exact in bfloat16, so the float32 reference sees the same operands.
  auto exact = [](const TensorShape& shape, float scale) {
    Tensor t = Ramp(shape, scale, 0.0f);
    for (float& v : t.flat<float>()) v = static_cast<float>(bfloat16(v));
    return t;
  };
  Tensor a = exact(TensorShape({16, 40}), 0.37f), b = exact(TensorShape({40, 24}), 0.61f);
  Tensor x = exact(TensorShape({2, 6, 6, 3}), 0.29f), dy = exact(TensorShape({2, 6, 6, 4}), 0.53f);
  auto run = [&](bool low) -> std::vector<Tensor> {
    Scope root = Scope::NewRootScope();
    auto in = [&](const char* name, const Tensor& t) {
      Output p = ops::Placeholder(root.WithOpName(name), DType::kFloat, PartialShape(t.shape()));
      return low ? ops::Cast(root, p, DType::kBFloat16) : p;
    };
    AttrMap wide;
    if (low) wide["Tout"] = AttrValue(DType::kFloat);
    AttrMap mm = wide;
    Output product =
        ops::internal::Build(root.WithOpName("mm"), "MatMul", {in("a", a), in("b", b)}, mm);
    AttrMap conv = wide;
    conv["strides"] = AttrValue(std::vector<int64_t>{1, 1, 1, 1});
    conv["dilations"] = AttrValue(std::vector<int64_t>{1, 1, 1, 1});
    conv["padding"] = AttrValue(std::string("SAME"));
    conv["data_format"] = AttrValue(std::string("NHWC"));
    const int32_t filter[] = {3, 3, 3, 4};
    Output sizes = ops::Const(root, Tensor::FromVector<int32_t>(filter, TensorShape({4})));
    Output dw = ops::internal::Build(root.WithOpName("dw"), "Conv2DBackpropFilter",
                                     {in("x", x), sizes, in("dy", dy)}, conv);
    EXPECT_TRUE(root.ok()) << root.status();
    proto::GraphDef def;
    root.graph()->ToGraphDef(&def);
    auto session = NewDirectSession(def);
    EXPECT_TRUE(session.ok()) << session.status();
    auto out = (*session)->Run({{"a:0", a}, {"b:0", b}, {"x:0", x}, {"dy:0", dy}},
                               {product.name(), dw.name()});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : std::vector<Tensor>{};
  };
  std::vector<Tensor> want = run(false), got = run(true);
  ASSERT_EQ(got.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(got[i].dtype(), DType::kFloat);
    ASSERT_EQ(got[i].shape(), want[i].shape());
    for (int64_t k = 0; k < want[i].NumElements(); ++k) {
      const double w = want[i].ValueAsDouble(k);
      EXPECT_NEAR(got[i].ValueAsDouble(k), w, 1e-5 * (1 + std::fabs(w))) << i << "[" << k << "]";
    }
  }
}

// ctest runs this binary again with ONEDNN_MAX_CPU_ISA=AVX2: oneDNN then reports no
// bf16 kernels, and the tests above ran through the float32 fallback.
TEST(Bf16FallbackTest, IsaCapMeansTheFallback) {
  const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (cap == nullptr || std::string(cap) != "AVX2") {
    GTEST_SKIP() << "runs under ONEDNN_MAX_CPU_ISA=AVX2 (ctest mixed_precision_avx2_test)";
  }
  EXPECT_FALSE(onednn::HasBf16Kernels());
  EXPECT_EQ(onednn::EffectiveIsaName(), "avx2");
}

// Whether /proc/cpuinfo lists a bfloat16 dot product (AVX512-BF16 or AMX-BF16).
bool CpuinfoHasBf16() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    line += ' ';
    return line.find(" avx512_bf16 ") != std::string::npos ||
           line.find(" amx_bf16 ") != std::string::npos;
  }
  return false;
}

// mixed_bfloat16 stays where the CPU has bfloat16 dot products and becomes float32
// where it has not (here under ONEDNN_MAX_CPU_ISA=AVX2 too, which caps oneDNN below
// them); TANDEM_ALLOW_EMULATED_BF16=1 keeps it. float32 is always float32.
TEST(PrecisionForCpuTest, MixedBfloat16NeedsNativeBfloat16) {
  const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  const bool native = cap == nullptr && CpuinfoHasBf16();
  EXPECT_EQ(onednn::HasNativeBf16(), native) << onednn::EffectiveIsaName();
  EXPECT_EQ(PrecisionForCpu(Precision::kMixedBfloat16),
            native ? Precision::kMixedBfloat16 : Precision::kFloat32);
  EXPECT_EQ(PrecisionForCpu(Precision::kFloat32), Precision::kFloat32);
  setenv("TANDEM_ALLOW_EMULATED_BF16", "1", 1);
  EXPECT_EQ(PrecisionForCpu(Precision::kMixedBfloat16), Precision::kMixedBfloat16);
  setenv("TANDEM_ALLOW_EMULATED_BF16", "0", 1);
  EXPECT_EQ(PrecisionForCpu(Precision::kMixedBfloat16),
            native ? Precision::kMixedBfloat16 : Precision::kFloat32);
  unsetenv("TANDEM_ALLOW_EMULATED_BF16");
}

}  // namespace
}  // namespace tandem

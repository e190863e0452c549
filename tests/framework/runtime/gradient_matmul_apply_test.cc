// FuseGradientMatMulIntoApply (remapper.h) and the _<op>WithMatMul kernels
// (training_kernels.cc, matmul_rows.h): which MatMul -> dense update pairs the pass
// rewrites, and that the fused update leaves the variables where the separate MatMul
// and update do, for every transpose, with blocks of rows that do not divide the
// gradient, in float32 and under mixed_bfloat16 (bfloat16 operands, float32 product).
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "framework/ops/array_ops.h"
#include "framework/ops/internal/build.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/standard_ops.h"
#include "framework/ops/state_ops.h"
#include "framework/ops/training_ops.h"
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

// w [rows, cols] and two slots; "grad" = MatMul(x, y) with the given transposes (x, y
// constants shaped for them, inner dimension 40); "adam" applies it (with `momentum`,
// "momentum" does, Nesterov's: an input after the gradient) and "train" waits for the
// update. With `seen`, "seen" = Identity(grad) reads the gradient too.
struct Net {
  Scope root = Scope::NewRootScope();
  Output w, m, v, grad;
  Node* update = nullptr;

  Net(int64_t rows, int64_t cols, bool ta, bool tb, bool seen = false,
      const std::string& matmul_device = "", bool momentum = false,
      const std::string& var_device = "") {
    ops::EnsureStandardOps();
    const TensorShape shape({rows, cols});
    constexpr int64_t k = 40;
    auto var = [&](const char* name, const Tensor& init) {
      Output h = ops::VarHandleOp(root.WithOpName(name).WithDevice(var_device), DType::kFloat,
                                  PartialShape({rows, cols}));
      ops::AssignVariableOp(root.WithOpName(std::string(name) + "_init"), h,
                            ops::Const(root, init));
      return h;
    };
    w = var("w", Ramp(shape, 0.37f, 0.1f));
    m = var("m", Tensor::Filled(DType::kFloat, shape, 0.0));
    v = var("v", Tensor::Filled(DType::kFloat, shape, 0.0));
    Output x =
        ops::Const(root, Ramp(ta ? TensorShape({k, rows}) : TensorShape({rows, k}), 0.71f, -0.2f));
    Output y =
        ops::Const(root, Ramp(tb ? TensorShape({cols, k}) : TensorShape({k, cols}), 0.53f, 0.3f));
    grad = ops::MatMul(root.WithOpName("grad").WithDevice(matmul_device), x, y, ta, tb);
    if (seen) ops::Identity(root.WithOpName("seen"), grad);
    auto scalar = [&](float s) { return ops::Const(root, Tensor::Scalar<float>(s)); };
    update = momentum ? ops::ResourceApplyMomentum(root.WithOpName("momentum"), w, m,
                                                   scalar(0.001f), grad, scalar(0.9f),
                                                   /*use_nesterov=*/true)
                      : ops::ResourceApplyAdam(root.WithOpName("adam"), w, m, v, scalar(0.9f),
                                               scalar(0.999f), scalar(0.01f), scalar(0.9f),
                                               scalar(0.999f), scalar(1e-7f), grad);
    ops::NoOp(root.WithOpName("train").WithControlDependencies(std::vector<Node*>{update}));
  }
};

const proto::NodeDef* Find(const proto::GraphDef& def, const std::string& name) {
  for (const auto& n : def.node()) {
    if (n.name() == name) return &n;
  }
  return nullptr;
}

TEST(FuseGradientMatMulIntoApplyTest, TakesTheMatMulIntoTheUpdate) {
  Net net(30, 20, /*ta=*/true, /*tb=*/false);
  RemapReport report;
  auto out = FuseGradientMatMulIntoApply(DefOf(net.root), OpRegistry::Global(), &report);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(report.gradients_computed_in_updates, 1);
  const proto::NodeDef* fused = Find(*out, "adam/with_matmul");
  ASSERT_NE(fused, nullptr);
  EXPECT_EQ(fused->op(), "_ResourceApplyAdamWithMatMul");
  const proto::NodeDef* grad = Find(*out, "grad");
  ASSERT_NE(grad, nullptr);
  // Adam's inputs with the gradient (input 9) replaced by the MatMul's two operands.
  const proto::NodeDef* adam = Find(*out, "adam");
  ASSERT_NE(adam, nullptr);
  ASSERT_EQ(fused->input_size(), 11);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(fused->input(i), adam->input(i)) << i;
  EXPECT_EQ(fused->input(9), grad->input(0));
  EXPECT_EQ(fused->input(10), grad->input(1));
  EXPECT_TRUE(fused->attr().at("transpose_a").b());
  EXPECT_FALSE(fused->attr().at("transpose_b").b());
  // What waited for the update waits for the fused node; the pair stays.
  ASSERT_NE(Find(*out, "train"), nullptr);
  EXPECT_EQ(Find(*out, "train")->input(0), "^adam/with_matmul");
}

TEST(FuseGradientMatMulIntoApplyTest, KeepsTheInputsAfterTheGradientInOrder) {
  Net net(30, 20, false, true, false, "", /*momentum=*/true);
  auto out = FuseGradientMatMulIntoApply(DefOf(net.root), OpRegistry::Global());
  ASSERT_TRUE(out.ok()) << out.status();
  const proto::NodeDef* fused = Find(*out, "momentum/with_matmul");
  const proto::NodeDef* momentum = Find(*out, "momentum");
  const proto::NodeDef* grad = Find(*out, "grad");
  ASSERT_TRUE(fused != nullptr && momentum != nullptr && grad != nullptr);
  EXPECT_EQ(fused->op(), "_ResourceApplyMomentumWithMatMul");
  // var, accum, lr, a, b, momentum.
  ASSERT_EQ(fused->input_size(), 6);
  EXPECT_EQ(fused->input(2), momentum->input(2));
  EXPECT_EQ(fused->input(3), grad->input(0));
  EXPECT_EQ(fused->input(4), grad->input(1));
  EXPECT_EQ(fused->input(5), momentum->input(4));
  EXPECT_TRUE(fused->attr().at("use_nesterov").b());
  EXPECT_TRUE(fused->attr().at("transpose_b").b());
}

TEST(FuseGradientMatMulIntoApplyTest, LeavesAGradientReadElsewhereOrComputedOnAnotherDevice) {
  for (const auto& [seen, device] :
       std::vector<std::pair<bool, std::string>>{{true, ""}, {false, "/job:worker/task:0"}}) {
    Net net(30, 20, false, false, seen, device);
    RemapReport report;
    auto out = FuseGradientMatMulIntoApply(DefOf(net.root), OpRegistry::Global(), &report);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(report.gradients_computed_in_updates, 0) << "seen " << seen << " device " << device;
    EXPECT_EQ(Find(*out, "adam/with_matmul"), nullptr);
  }
  {
    // The variable on a ps, the MatMul left to the client's task: the update follows
    // the variable, the MatMul stays with the worker.
    Net net(30, 20, false, false, false, "", false, "/job:ps/task:0");
    RemapReport report;
    auto out = FuseGradientMatMulIntoApply(DefOf(net.root), OpRegistry::Global(), &report);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(report.gradients_computed_in_updates, 0);
  }
  // A session with a GPU keeps its variables there: PrepareGraph leaves the pair.
  Net net(30, 20, false, false);
  auto gpu = PrepareGraph(DefOf(net.root), Precision::kFloat32, /*variables_on_cpu=*/false);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ(Find(*gpu, "adam/with_matmul"), nullptr);
}

TEST(FuseGradientMatMulIntoApplyTest, TheFusedOpChecksItsOperands) {
  ops::EnsureStandardOps();
  // The status of building the fused op on w [3, 4] with operands of shapes a and b.
  auto fused = [](const TensorShape& a, const TensorShape& b) {
    Scope root = Scope::NewRootScope();
    Output w = ops::VarHandleOp(root.WithOpName("w"), DType::kFloat, PartialShape({3, 4}));
    std::vector<Output> in = {w, w, w};
    for (int i = 0; i < 6; ++i) in.push_back(ops::Const(root, Tensor::Scalar<float>(0.5f)));
    in.push_back(ops::Const(root, Tensor::Filled(DType::kFloat, a, 1.0)));
    in.push_back(ops::Const(root, Tensor::Filled(DType::kFloat, b, 1.0)));
    ops::internal::BuildNode(root, "_ResourceApplyAdamWithMatMul", in);
    return root.status();
  };
  EXPECT_TRUE(fused(TensorShape({3, 5}), TensorShape({5, 4})).ok());
  const absl::Status inner = fused(TensorShape({3, 5}), TensorShape({6, 4}));
  EXPECT_NE(inner.message().find("do not multiply"), std::string::npos) << inner;
  const absl::Status outer = fused(TensorShape({3, 5}), TensorShape({5, 3}));
  EXPECT_NE(outer.message().find("same shape"), std::string::npos) << outer;
}

// "read_w" after three steps of `net`'s "train" in a session with `precision`.
std::vector<float> Train(const Net& net, Precision precision) {
  SessionOptions options;
  options.precision = precision;
  auto session = NewDirectSession(DefOf(net.root), options);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return {};
  EXPECT_TRUE((*session)->Run({}, {}, {"w_init", "m_init", "v_init"}).ok());
  for (int step = 0; step < 3; ++step) EXPECT_TRUE((*session)->Run({}, {}, {"train"}).ok());
  auto read = (*session)->Run({}, {"read_w:0"});
  EXPECT_TRUE(read.ok()) << read.status();
  if (!read.ok()) return {};
  const Tensor& t = (*read)[0];
  return std::vector<float>(t.data<float>(), t.data<float>() + t.NumElements());
}

TEST(ApplyWithMatMulKernelTest, UpdatesAsTheSeparateMatMulAndUpdate) {
  // 1000 x 70: blocks of 468 rows (32768 / 70), the last of 64. Adam for every
  // transpose and precision; Nesterov momentum (its hyper-parameter after the gradient)
  // once.
  struct Config {
    Precision precision;
    bool ta, tb, momentum;
  };
  std::vector<Config> configs;
  for (const Precision precision : {Precision::kFloat32, Precision::kMixedBfloat16}) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) configs.push_back({precision, ta, tb, false});
    }
  }
  configs.push_back({Precision::kFloat32, true, false, true});
  for (const auto& [precision, ta, tb, momentum] : configs) {
    SCOPED_TRACE(::testing::Message()
                 << "mixed " << (precision != Precision::kFloat32) << " transpose_a " << ta
                 << " transpose_b " << tb << " momentum " << momentum);
    Net fused(1000, 70, ta, tb, false, "", momentum);
    Net separate(1000, 70, ta, tb, /*seen=*/true, "", momentum);  // "seen": the MatMul apart
    for (Net* n : {&fused, &separate}) {
      ops::ReadVariableOp(n->root.WithOpName("read_w"), n->w, DType::kFloat);
    }
    const std::vector<float> a = Train(fused, precision), b = Train(separate, precision);
    ASSERT_EQ(a.size(), 70000u);
    ASSERT_EQ(b.size(), a.size());
    int differ = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_NEAR(a[i], b[i], 1e-6f * (1.0f + std::fabs(b[i]))) << "element " << i;
      differ += a[i] != b[i];
    }
    std::printf("elements differing in their last bits: %d of %zu\n", differ, a.size());
  }
}

}  // namespace
}  // namespace tandem

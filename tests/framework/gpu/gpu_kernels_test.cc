// Every GPU kernel against its CPU twin and under the finite-difference gradient check,
// on the GPU: each case of the central gradient-check suite (tests/framework/ops) runs
// once in a CPU-only session and once in a session with GPU:0, where every node with a
// GPU kernel for its dtype is placed there. The GPU run must pass the same
// finite-difference check, and its forward value and gradients must match the CPU's.
// The test also fails for any op with a GPU kernel that no case ran on the GPU.
#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/kernels/kernel_registry.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/initializers.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/nn_ops.h"
#include "framework/ops/optimizers.h"
#include "framework/ops/state_ops.h"
#include "framework/runtime/runtime_kernels.h"
#include "gmock/gmock.h"
#include "tests/framework/gpu/gpu_test_util.h"
#include "tests/framework/ops/gradient_check.h"

namespace tandem::testing {
namespace {

// MatMul -> BiasAdd [-> Relu], which the session fuses into one _FusedMatMul. With the
// ReLU, every pre-activation is positive (no kink under the finite differences).
GradCheckCase FusedDense(bool relu) {
  GradCheckCase c;
  c.op = "_FusedMatMul";
  c.label = relu ? "bias_relu" : "bias";
  c.inputs = {RandomTensor(TensorShape({4, 6}), 11, 0.1f, 1.0f),
              RandomTensor(TensorShape({6, 5}), 12, 0.1f, 1.0f),
              RandomTensor(TensorShape({5}), 13, 0.5f, 1.0f)};
  c.build = [relu](const Scope& s, const std::vector<Output>& x) {
    Output y = ops::BiasAdd(s, ops::MatMul(s, x[0], x[1]), x[2]);
    return relu ? ops::Relu(s, y) : y;
  };
  return c;
}

// Conv2D (SAME) -> BiasAdd -> Relu, fused into one _FusedConv2D; positive inputs keep
// the ReLU off its kink.
GradCheckCase FusedConv() {
  GradCheckCase c;
  c.op = "_FusedConv2D";
  c.label = "bias_relu";
  c.inputs = {RandomTensor(TensorShape({2, 5, 5, 2}), 21, 0.1f, 1.0f),
              RandomTensor(TensorShape({3, 3, 2, 3}), 22, 0.1f, 1.0f),
              RandomTensor(TensorShape({3}), 23, 0.5f, 1.0f)};
  c.build = [](const Scope& s, const std::vector<Output>& x) {
    ops::Conv2DAttrs attrs;
    attrs.padding = "SAME";
    return ops::Relu(s, ops::BiasAdd(s, ops::Conv2D(s, x[0], x[1], attrs), x[2]));
  };
  return c;
}

std::vector<GradCheckCase> AllCases() {
  std::vector<GradCheckCase> all;
  for (auto family :
       {ArrayGradCheckCases, MathGradCheckCases, NnGradCheckCases, StateGradCheckCases}) {
    for (GradCheckCase& c : family()) all.push_back(std::move(c));
  }
  all.push_back(FusedDense(false));
  all.push_back(FusedDense(true));
  all.push_back(FusedConv());
  return all;
}

// The ops with bfloat16 GPU kernels whose cases run again with f on bfloat16.
const std::set<std::string> kBf16Ops = {"MatMul", "_FusedMatMul", "BiasAdd", "Relu"};
// As gradient_check_test's bfloat16 suite: 8 units of bfloat16 roundoff (2^-8).
constexpr double kBf16Tolerance = 8.0 / 256.0;

// max over elements of |gpu - cpu| / (1 + |cpu|).
double Difference(const Tensor& cpu, const Tensor& gpu) {
  double worst = 0;
  for (int64_t k = 0; k < cpu.NumElements(); ++k) {
    double c = cpu.ValueAsDouble(k), g = gpu.ValueAsDouble(k);
    double d = std::isnan(g) ? INFINITY : std::fabs(g - c) / (1 + std::fabs(c));
    worst = std::max(worst, d);
  }
  return worst;
}

// The case on the CPU and on the GPU; adds the ops that ran on the GPU to `on_gpu`.
void CheckOnGpu(const GradCheckCase& c, std::set<std::string>* on_gpu) {
  GradCheckSessionOptions().num_gpus = 0;
  absl::StatusOr<GradCheckResult> cpu = CheckGradient(c);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  GradCheckSessionOptions().num_gpus = 1;
  absl::StatusOr<GradCheckResult> gpu = CheckGradient(c);
  GradCheckSessionOptions().num_gpus = 0;
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_LE(gpu->max_error, c.tolerance) << "on the GPU, worst: " << gpu->worst;
  ASSERT_EQ(cpu->values.size(), gpu->values.size());
  double worst = 0;
  for (size_t i = 0; i < cpu->values.size(); ++i) {
    ASSERT_EQ(cpu->values[i].shape(), gpu->values[i].shape()) << "value " << i;
    worst = std::max(worst, Difference(cpu->values[i], gpu->values[i]));
  }
  // float32 on both sides; the GPU sums in another order (and cuDNN may pick another
  // convolution algorithm), so results agree to rounding, not bit for bit.
  EXPECT_LE(worst, 1e-4) << "GPU against CPU";
  std::set<std::string> ops(gpu->gpu_ops.begin(), gpu->gpu_ops.end());
  std::cout << "[ gpu ] " << c.op << "/" << c.label << ": |gpu-cpu| " << worst
            << ", gradient error " << gpu->max_error << " (tolerance " << c.tolerance
            << "), on the GPU: " << absl::StrJoin(ops, " ") << std::endl;
  on_gpu->insert(ops.begin(), ops.end());
}

// Runs one traced step and adds the ops that ran on a GPU to `on_gpu`.
absl::StatusOr<std::vector<Tensor>> RunTraced(Session& session, const FeedMap& feeds,
                                              const std::vector<std::string>& fetches,
                                              const std::vector<std::string>& targets,
                                              std::set<std::string>* on_gpu) {
  RunOptions traced;
  traced.trace = true;
  RunMetadata md;
  absl::StatusOr<std::vector<Tensor>> out = session.Run(feeds, fetches, targets, traced, &md);
  for (const NodeExecStats& n : md.step_stats.nodes) {
    if (n.device.find("/device:GPU:") != std::string::npos) on_gpu->insert(n.op);
  }
  return out;
}

struct OptimizerCase {
  const char* name;
  std::function<std::unique_ptr<ops::Optimizer>()> make;
};

// 20 steps of `make`'s optimizer on sum((w - 0.5)^2) on the CPU and on the GPU: the
// variable must take the same values (the update kernels are elementwise: to rounding).
void CheckOptimizerOnGpu(const OptimizerCase& c, std::set<std::string>* on_gpu) {
  std::vector<std::vector<float>> finals;
  for (int gpus : {0, 1}) {
    Scope root = Scope::NewRootScope();
    ops::Variable w(root, "w", ops::Const(root, RandomTensor(TensorShape({4, 8}), 5, -2, 2)));
    Output target = ops::Const(root, 0.5f);
    Output loss = ops::ReduceSumAll(root, ops::Square(root, ops::Sub(root, w.value(), target)));
    std::unique_ptr<ops::Optimizer> opt = c.make();
    auto train = opt->Minimize(root, loss);
    ASSERT_TRUE(train.ok()) << train.status();
    Node* init = ops::GlobalVariablesInitializer(root);
    proto::GraphDef def;
    root.graph()->ToGraphDef(&def);
    SessionOptions options;
    options.num_gpus = gpus;
    auto session = NewDirectSession(def, options);
    ASSERT_TRUE(session.ok()) << session.status();
    ASSERT_TRUE(RunTraced(**session, {}, {}, {init->name()}, on_gpu).ok());
    for (int i = 0; i < 20; ++i) {
      auto s = RunTraced(**session, {}, {}, {(*train)->name()}, on_gpu);
      ASSERT_TRUE(s.ok()) << s.status();
    }
    Output ready = ops::VarIsInitializedOp(root, w.handle());
    root.graph()->ToGraphDef(&def);
    ASSERT_TRUE((*session)->Extend(def).ok());
    auto is_ready = RunTraced(**session, {}, {ready.name()}, {}, on_gpu);
    ASSERT_TRUE(is_ready.ok()) << is_ready.status();
    EXPECT_TRUE((*is_ready)[0].scalar<bool>());
    auto w_out = (*session)->Run({}, {w.value().name()}, {});
    ASSERT_TRUE(w_out.ok()) << w_out.status();
    const Tensor& t = (*w_out)[0];
    finals.emplace_back(t.flat<float>().begin(), t.flat<float>().end());
  }
  for (size_t k = 0; k < finals[0].size(); ++k) {
    EXPECT_NEAR(finals[1][k], finals[0][k], 1e-5 * (1 + std::fabs(finals[0][k])))
        << c.name << " element " << k;
  }
}

// Variables initialised by the random initializers: the GPU's kernels draw on the
// host with the CPU's, so the values are the CPU session's, bit for bit.
void CheckInitializersOnGpu(std::set<std::string>* on_gpu) {
  std::vector<std::vector<float>> values;  // [device] all variables, concatenated.
  for (int gpus : {0, 1}) {
    Scope root = Scope::NewRootScope();
    root.graph()->set_seed(9);
    const ops::Initializer inits[] = {ops::RandomUniformInitializer(-1, 1, 1),
                                      ops::RandomNormalInitializer(0, 1, 2),
                                      ops::TruncatedNormalInitializer(0, 1, 3)};
    std::vector<std::string> reads;
    for (int i = 0; i < 3; ++i) {
      ops::Variable v(root, absl::StrCat("v", i),
                      inits[i](root, TensorShape({7, 9}), DType::kFloat));
      reads.push_back(v.value().name());
    }
    Node* init = ops::GlobalVariablesInitializer(root);
    proto::GraphDef def;
    root.graph()->ToGraphDef(&def);
    SessionOptions options;
    options.num_gpus = gpus;
    auto session = NewDirectSession(def, options);
    ASSERT_TRUE(session.ok()) << session.status();
    ASSERT_TRUE(RunTraced(**session, {}, {}, {init->name()}, on_gpu).ok());
    auto out = (*session)->Run({}, reads, {});
    ASSERT_TRUE(out.ok()) << out.status();
    values.emplace_back();
    for (const Tensor& t : *out) {
      values.back().insert(values.back().end(), t.flat<float>().begin(), t.flat<float>().end());
    }
  }
  EXPECT_EQ(values[0], values[1]);
}

TEST(GpuKernels, EachMatchesTheCpuPassesTheGradientCheckAndIsCovered) {
  TANDEM_SKIP_WITHOUT_GPU();
  EnsureKernels();
  std::set<std::string> on_gpu;
  for (const GradCheckCase& c : AllCases()) {
    SCOPED_TRACE(absl::StrCat(c.op, "/", c.label));
    CheckOnGpu(c, &on_gpu);
  }
  const OptimizerCase optimizers[] = {
      {"GradientDescent", [] { return std::make_unique<ops::GradientDescentOptimizer>(0.1f); }},
      {"Momentum", [] { return std::make_unique<ops::MomentumOptimizer>(0.05f, 0.9f); }},
      {"Nesterov", [] { return std::make_unique<ops::MomentumOptimizer>(0.05f, 0.9f, true); }},
      {"Adagrad", [] { return std::make_unique<ops::AdagradOptimizer>(0.5f); }},
      {"Adam", [] { return std::make_unique<ops::AdamOptimizer>(0.1f); }},
      {"RMSProp", [] { return std::make_unique<ops::RMSPropOptimizer>(0.02f); }},
      {"CenteredRMSProp",
       [] { return std::make_unique<ops::RMSPropOptimizer>(0.02f, 0.9f, 0.0f, 1e-10f, true); }},
  };
  for (const OptimizerCase& c : optimizers) {
    SCOPED_TRACE(c.name);
    CheckOptimizerOnGpu(c, &on_gpu);
  }
  CheckInitializersOnGpu(&on_gpu);
  GradCheckSessionOptions().num_gpus = 1;
  for (const GradCheckCase& c : AllCases()) {
    if (!kBf16Ops.count(c.op)) continue;
    SCOPED_TRACE(absl::StrCat("bfloat16 ", c.op, "/", c.label));
    absl::StatusOr<GradCheckResult> r = CheckGradientInBfloat16(c);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_LE(r->max_error, kBf16Tolerance) << r->worst;
    EXPECT_THAT(r->gpu_ops, ::testing::Contains(c.op == "_FusedMatMul" ? "_FusedMatMul" : c.op));
    std::cout << "[ gpu ] bfloat16 " << c.op << "/" << c.label << ": gradient error "
              << r->max_error << std::endl;
  }
  GradCheckSessionOptions().num_gpus = 0;
  std::vector<std::string> missing;
  for (const std::string& op : KernelRegistry::Global()->OpsOn(kDeviceGpu)) {
    if (op == "_Send" || op == "_Recv") continue;  // The runtime's own, in every GPU step.
    if (!on_gpu.count(op)) missing.push_back(op);
  }
  EXPECT_TRUE(missing.empty()) << "GPU kernels that no case ran on the GPU: "
                               << absl::StrJoin(missing, ", ");
  std::cout << "[ gpu ] ops run on the GPU: " << absl::StrJoin(on_gpu, " ") << std::endl;
}

// The GPU's Dropout draws the CPU's Philox stream: the same seeds give the same mask,
// run after run (the second run continues the stream on both).
TEST(GpuKernels, DropoutDrawsTheCpusMasks) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::vector<std::vector<Tensor>> runs;  // [device][run * 2 + output]
  for (int gpus : {0, 1}) {
    Scope root = Scope::NewRootScope();
    root.graph()->set_seed(3);
    Output x = ops::Placeholder(root.WithOpName("x"), DType::kFloat);
    std::vector<Output> d = ops::Dropout(root, x, 0.4f, /*seed=*/11);
    proto::GraphDef def;
    root.graph()->ToGraphDef(&def);
    SessionOptions options;
    options.num_gpus = gpus;
    auto session = NewDirectSession(def, options);
    ASSERT_TRUE(session.ok()) << session.status();
    std::vector<Tensor> outs;
    for (int run = 0; run < 2; ++run) {
      RunOptions traced;
      traced.trace = true;
      RunMetadata md;
      auto out = (*session)->Run({{"x", RandomTensor(TensorShape({37, 129}), 4)}},
                                 {d[0].name(), d[1].name()}, {}, traced, &md);
      ASSERT_TRUE(out.ok()) << out.status();
      for (const NodeExecStats& n : md.step_stats.nodes) {
        if (n.op == "Dropout") {
          EXPECT_EQ(n.device.find("GPU") != std::string::npos, gpus == 1);
        }
      }
      for (Tensor& t : *out) outs.push_back(t);
    }
    runs.push_back(std::move(outs));
  }
  int64_t dropped = 0;
  for (size_t k = 0; k < runs[0].size(); ++k) {
    const Tensor &cpu = runs[0][k], &gpu = runs[1][k];
    ASSERT_EQ(cpu.shape(), gpu.shape());
    for (int64_t i = 0; i < cpu.NumElements(); ++i) {
      ASSERT_EQ(cpu.flat<float>()[i], gpu.flat<float>()[i]) << "output " << k << " element " << i;
      dropped += k % 2 == 1 && cpu.flat<float>()[i] == 0;
    }
  }
  // About 40% of 2 x 4773 elements are dropped.
  EXPECT_GT(dropped, 3000);
  EXPECT_LT(dropped, 4700);
}

}  // namespace
}  // namespace tandem::testing

// A session with GPU:0: placement (float work on the GPU, the int64 step counter and
// ops without a GPU kernel on the CPU), a small MLP trained with Adam on the GPU giving
// the CPU's losses step by step, the caching allocator's reuse, and out-of-memory
// errors that name the node, its op and the bytes.
#include <cmath>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "framework/core/random.h"
#include "framework/kernels/cuda/gpu_context.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/layers.h"
#include "framework/ops/losses.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/optimizers.h"
#include "framework/ops/state_ops.h"
#include "framework/runtime/session.h"
#include "gmock/gmock.h"
#include "tests/framework/gpu/gpu_test_util.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

Tensor Uniform(const TensorShape& shape, uint64_t seed) {
  RandomSampler rng(PhiloxRandom(seed, 3));
  Tensor t(DType::kFloat, shape);
  for (float& v : t.flat<float>()) v = rng.Uniform() * 2 - 1;
  return t;
}

struct Mlp {
  proto::GraphDef def;
  std::string loss, train, init, step;
};

// 64 features -> 128 -> 64 -> 10 classes, ReLU, Adam, a global step.
Mlp BuildMlp() {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DType::kFloat, PartialShape({-1, 64}));
  Output y = ops::Placeholder(root.WithOpName("y"), DType::kInt32, PartialShape({-1}));
  Output h = x;
  int64_t seed = 1;
  for (int64_t units : {128, 64}) {
    ops::DenseOptions o;
    o.activation = ops::Activation::kRelu;
    o.kernel_initializer = ops::GlorotUniformInitializer(++seed);
    h = ops::Dense(root, h, units, o);
  }
  ops::DenseOptions out;
  out.kernel_initializer = ops::GlorotUniformInitializer(++seed);
  Output logits = ops::Dense(root, h, 10, out);
  Output loss = ops::SparseSoftmaxCrossEntropy(root, y, logits);
  ops::Variable step = ops::GetOrCreateGlobalStep(root);
  ops::AdamOptimizer adam(0.01f);
  absl::StatusOr<Node*> train = adam.Minimize(root, loss, &step);
  CHECK(train.ok()) << train.status();
  Node* init = ops::GlobalVariablesInitializer(root);
  CHECK(root.status().ok()) << root.status();
  Mlp m;
  root.graph()->ToGraphDef(&m.def);
  m.loss = loss.name();
  m.train = (*train)->name();
  m.init = init->name();
  m.step = step.value().name();
  return m;
}

SessionOptions WithGpus(int n) {
  SessionOptions o;
  o.num_gpus = n;
  return o;
}

TEST(GpuSession, TrainsAnMlpWithTheCpuLossesAndPlacesByKernelAndDtype) {
  TANDEM_SKIP_WITHOUT_GPU();
  Mlp m = BuildMlp();
  Tensor x = Uniform(TensorShape({256, 64}), 7);
  Tensor y(DType::kInt32, TensorShape({256}));
  for (int i = 0; i < 256; ++i) y.flat<int32_t>()[i] = (i * 7) % 10;
  FeedMap feeds = {{"x", x}, {"y", y}};
  std::map<int, std::vector<float>> losses;
  std::map<std::string, NodeExecStats> ran;  // GPU session's first step, by node.
  for (int gpus : {0, 1}) {
    auto session = NewDirectSession(m.def, WithGpus(gpus));
    ASSERT_TRUE(session.ok()) << session.status();
    ASSERT_TRUE((*session)->Run({}, {}, {m.init}).ok());
    for (int i = 0; i < 40; ++i) {
      RunOptions traced;
      traced.trace = gpus == 1 && i == 0;
      RunMetadata md;
      auto out = (*session)->Run(feeds, {m.loss}, {m.train}, traced, &md);
      ASSERT_TRUE(out.ok()) << out.status();
      losses[gpus].push_back((*out)[0].scalar<float>());
      for (const NodeExecStats& n : md.step_stats.nodes) ran[n.node_name] = n;
    }
    auto step = (*session)->Run({}, {m.step}, {});
    ASSERT_TRUE(step.ok()) << step.status();
    EXPECT_EQ((*step)[0].scalar<int64_t>(), 40);
  }
  for (int i = 0; i < 40; ++i) {
    // Adam divides by sqrt(v) + 1e-7, which magnifies rounding early on; 1e-3 relative
    // is still far below the loss's change per step.
    EXPECT_NEAR(losses[1][i], losses[0][i], 1e-3 * std::fabs(losses[0][i])) << "step " << i;
  }
  EXPECT_LT(losses[1].back(), 0.5 * losses[1].front());
  std::cout << "loss on the CPU " << losses[0].front() << " -> " << losses[0].back()
            << ", on the GPU " << losses[1].front() << " -> " << losses[1].back() << std::endl;
  int on_gpu = 0;
  for (const auto& [node, stats] : ran) {
    bool gpu = stats.device.find("/device:GPU:0") != std::string::npos;
    on_gpu += gpu;
    if (stats.op == "ResourceApplyAdam" || stats.op == "MatMul" || stats.op == "_FusedMatMul" ||
        stats.op == "SparseSoftmaxCrossEntropyWithLogits") {
      EXPECT_TRUE(gpu) << node << " (" << stats.op << ") ran on " << stats.device;
    }
    if (stats.op == "AssignAddVariableOp") {  // The int64 global step's increment.
      EXPECT_FALSE(gpu) << node << " ran on " << stats.device;
    }
  }
  EXPECT_GT(on_gpu, 10);
}

TEST(GpuSession, OutOfMemoryNamesTheNodeTheOpAndTheBytes) {
  TANDEM_SKIP_WITHOUT_GPU();
  Scope root = Scope::NewRootScope();
  Output a = ops::Placeholder(root.WithOpName("a"), DType::kFloat);
  Output b = ops::Placeholder(root.WithOpName("b"), DType::kFloat);
  Output p = ops::MatMul(root.WithOpName("huge"), a, b);
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  auto session = NewDirectSession(def, WithGpus(1));
  ASSERT_TRUE(session.ok()) << session.status();
  // [N,1] x [1,N] = N*N floats: 1.6e11 bytes, more than any GPU's memory.
  const int64_t n = 200000;
  auto out = (*session)->Run(
      {{"a", Uniform(TensorShape({n, 1}), 1)}, {"b", Uniform(TensorShape({1, n}), 2)}}, {p.name()},
      {});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr("'huge' (MatMul)"));
  EXPECT_THAT(out.status().message(), HasSubstr("160000000000 bytes"));
  EXPECT_THAT(out.status().message(), HasSubstr("GPU:0"));
  // The session still works after the failed step.
  auto small = (*session)->Run(
      {{"a", Uniform(TensorShape({2, 3}), 1)}, {"b", Uniform(TensorShape({3, 2}), 2)}}, {p.name()},
      {});
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_TRUE((*small)[0].on_host());
}

TEST(GpuAllocator, ReusesFreedBlocksAndStaysWithinItsLimit) {
  TANDEM_SKIP_WITHOUT_GPU();
  auto ctx = gpu::GpuContext::Get(0);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  gpu::GpuAllocator a(0, (*ctx)->stream(), size_t{64} << 20);  // 64 MiB.
  size_t cap1 = 0, cap2 = 0;
  void* p = a.Allocate(1000, &cap1);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(cap1, 1024u);
  a.Deallocate(p, cap1);
  void* q = a.Allocate(900, &cap2);
  EXPECT_EQ(q, p) << "a freed block of the same class is reused";
  EXPECT_EQ(a.GetStats().mallocs, 1);
  a.Deallocate(q, cap2);
  // 40 MiB fits; a second 40 MiB does not, even after the cache is released.
  size_t c40 = 0, c40b = 0;
  void* big = a.Allocate(size_t{40} << 20, &c40);
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(a.Allocate(size_t{40} << 20, &c40b), nullptr);
  EXPECT_THAT(a.UsageString(), HasSubstr("of a limit of 67108864 bytes"));
  a.Deallocate(big, c40);
  // Bytes round-trip through the device.
  auto t = Tensor::CopyToDevice(Uniform(TensorShape({3, 5}), 9), &a);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE(t->on_host());
  auto copy = t->DeepCopy().ToHost();
  ASSERT_TRUE(copy.ok()) << copy.status();
  Tensor want = Uniform(TensorShape({3, 5}), 9);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(copy->flat<float>()[i], want.flat<float>()[i]);
  EXPECT_THAT(t->DebugString(), HasSubstr("on GPU:0"));
}

}  // namespace
}  // namespace tandem

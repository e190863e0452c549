// Placement on a process with a GPU, without needing one: the placer decides from the
// kernel registry alone, so this runs in the default tier of any CUDA build. A model's
// float work, its variables, their optimizer slots and updates go to GPU:0; the int64
// global step, the random initializers' generators and ops without a GPU kernel stay
// on the CPU.
#include <map>
#include <string>

#include "framework/kernels/kernel_registry.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/layers.h"
#include "framework/ops/losses.h"
#include "framework/ops/optimizers.h"
#include "framework/ops/state_ops.h"
#include "framework/runtime/placer.h"
#include "framework/runtime/runtime_kernels.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

constexpr char kCpu[] = "/job:localhost/replica:0/task:0/device:CPU:0";
constexpr char kGpu[] = "/job:localhost/replica:0/task:0/device:GPU:0";

TEST(GpuPlacement, VariablesSlotsAndUpdatesGoToTheGpuAndTheStepCounterStaysOnTheCpu) {
  EnsureKernels();
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DType::kFloat, PartialShape({-1, 8}));
  Output y = ops::Placeholder(root.WithOpName("y"), DType::kInt32, PartialShape({-1}));
  ops::DenseOptions o;
  o.activation = ops::Activation::kRelu;
  Output h = ops::Dense(root, x, 16, o);
  Output logits = ops::Dense(root, h, 10);
  Output loss = ops::SparseSoftmaxCrossEntropy(root, y, logits);
  ops::Variable step = ops::GetOrCreateGlobalStep(root);
  ops::AdamOptimizer adam(0.01f);
  ASSERT_TRUE(adam.Minimize(root, loss, &step).ok());
  ops::GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.status().ok()) << root.status();
  Graph* g = root.graph();
  PlacerOptions options;
  options.default_device = "/job:localhost/replica:0/task:0";
  options.allow_soft_placement = true;
  ASSERT_TRUE(PlaceGraph(g, {kCpu, kGpu}, options).ok());
  std::map<std::string, int> gpu_ops, cpu_ops;
  for (const auto& n : g->nodes()) {
    (n->assigned_device() == kGpu ? gpu_ops : cpu_ops)[n->op()]++;
    if (n->op() == "ResourceApplyAdam" || n->op() == "MatMul" ||
        n->op() == "SparseSoftmaxCrossEntropyWithLogits") {
      EXPECT_EQ(n->assigned_device(), kGpu) << n->name() << " (" << n->op() << ")";
    }
  }
  EXPECT_EQ(g->FindNode("global_step")->assigned_device(), kCpu);
  EXPECT_EQ(g->FindNode("dense/kernel")->assigned_device(), kGpu);
  EXPECT_EQ(g->FindNode("dense/kernel/Adam")->assigned_device(), kGpu);
  for (const auto& n : g->nodes()) {
    if (n->assigned_device() == kCpu && !KernelRegistry::Global()->Supports(*n, kDeviceGpu)) {
      std::cout << "no GPU kernel: " << n->name() << " (" << n->op() << ")\n";
    }
  }
  for (const auto& [op, n] : cpu_ops) std::cout << "CPU: " << op << " x" << n << "\n";
  for (const auto& [op, n] : gpu_ops) std::cout << "GPU: " << op << " x" << n << "\n";
}

}  // namespace
}  // namespace tandem

// framework/kernels/op_kernel.h
//
// OpKernel is the device-specific implementation of one op. The runtime creates one
// kernel object per node of an executable graph (KernelRegistry::Create), calls
// Init once with the node so it can read and validate attrs, then Compute once per
// step with an OpKernelContext holding that step's inputs. A kernel reports bad
// input through the returned Status (ctx.Error() adds the node and op); it never
// CHECK-fails on anything a user or peer can send.
//
// Thread safety: Compute may run concurrently for different steps of one kernel
// object; kernels that keep state (random generators, primitive caches) lock it.
#ifndef TANDEM_FRAMEWORK_KERNELS_OP_KERNEL_H_
#define TANDEM_FRAMEWORK_KERNELS_OP_KERNEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "framework/core/thread_pool.h"
#include "framework/graph/graph.h"
#include "framework/kernels/resource_mgr.h"
#include "framework/tensor/tensor.h"

namespace tandem {

class OpKernelContext;
class Rendezvous;       // kernels/rendezvous.h; kernels of Send/Recv use it.
class Collectives;      // kernels/collectives.h; collective kernels use it.
class DeviceAllocator;  // framework/tensor/allocator.h
namespace gpu {
class GpuContext;  // framework/kernels/cuda/gpu_context.h; GPU kernels use it.
}  // namespace gpu

class OpKernel {
 public:
  virtual ~OpKernel() = default;
  // Reads attrs of `node`; errors become the session's error at setup.
  virtual absl::Status Init(const Node& node) { return absl::OkStatus(); }
  virtual absl::Status Compute(OpKernelContext& ctx) = 0;

  const Node& node() const { return *node_; }
  const std::string& name() const { return node_->name(); }

 private:
  friend class KernelRegistry;
  const Node* node_ = nullptr;  // Not owned; the graph outlives its kernels.
};

// An OpKernel that may finish after ComputeAsync returns (e.g. _Recv waiting for its
// peer): it must call `done` exactly once, from any thread, after setting its outputs
// on `ctx`, which stays valid until then. The executor does not block a thread on it.
class AsyncOpKernel : public OpKernel {
 public:
  using DoneCallback = std::function<void(const absl::Status&)>;
  virtual void ComputeAsync(OpKernelContext& ctx, DoneCallback done) = 0;
  // Blocking form for callers that cannot wait asynchronously.
  absl::Status Compute(OpKernelContext& ctx) final;
};

// Per-step services a kernel may use besides its inputs.
struct StepContext {
  int64_t step_id = 0;
  ResourceMgr* resources = nullptr;           // The device's resources. Not owned.
  ThreadPool* intra_op_pool = nullptr;        // May be null. Not owned.
  bool ops_one_at_a_time = false;             // ExecutorArgs::ops_one_at_a_time
  Rendezvous* rendezvous = nullptr;           // May be null. Not owned.
  const std::string* device_name = nullptr;   // Full name of the running device.
  const std::vector<Tensor>* args = nullptr;  // Values of _Arg nodes. Not owned.
  std::vector<Tensor>* retvals = nullptr;     // Values of _Retval nodes. Not owned.
  Collectives* collective = nullptr;          // May be null. Not owned.
  // The running device's memory when it is not the host's (a GPU), else null.
  DeviceAllocator* device_allocator = nullptr;
  gpu::GpuContext* gpu = nullptr;  // Non-null on a GPU device. Not owned.
  // A traced step: GPU kernels wait for their device work, so that each node's traced
  // time is its GPU time rather than its launch time.
  bool traced = false;
};

class OpKernelContext {
 public:
  OpKernelContext(const OpKernel* kernel, const StepContext* step, std::vector<Tensor> inputs)
      : kernel_(kernel),
        step_(step),
        inputs_(std::move(inputs)),
        outputs_(kernel->node().num_outputs()) {}

  const Node& node() const { return kernel_->node(); }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  const Tensor& input(int i) const { return inputs_[i]; }
  // Moves input i out (e.g. to reuse its buffer when BufferIsUnique()).
  Tensor release_input(int i) { return std::move(inputs_[i]); }
  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  DType output_dtype(int i) const { return node().output_dtype(i); }

  // Allocates output i with the node's output dtype.
  Tensor* allocate_output(int i, const TensorShape& shape) {
    outputs_[i] = Tensor(output_dtype(i), shape);
    return &outputs_[i];
  }
  // Output i as `shape`, reusing input `input_index`'s buffer when this context holds
  // the only reference to it and its dtype and size match; else a new buffer.
  Tensor* forward_input_or_allocate_output(int input_index, int i, const TensorShape& shape);
  void set_output(int i, Tensor t) { outputs_[i] = std::move(t); }
  std::vector<Tensor>& outputs() { return outputs_; }

  const StepContext& step() const { return *step_; }
  ResourceMgr* resources() const { return step_->resources; }
  ThreadPool* intra_op_pool() const { return step_->intra_op_pool; }

  // INVALID_ARGUMENT "node 'n' (Op): message".
  absl::Status Error(absl::string_view message) const {
    return absl::InvalidArgumentError(
        absl::StrCat("node '", node().name(), "' (", node().op(), "): ", message));
  }
  // `s` with the node and op prefixed (for errors from helpers).
  absl::Status Annotate(const absl::Status& s) const;

 private:
  const OpKernel* kernel_;
  const StepContext* step_;
  std::vector<Tensor> inputs_;
  std::vector<Tensor> outputs_;
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_KERNELS_OP_KERNEL_H_

// framework/kernels/cuda/gpu_context.h
//
// GpuContext: what the kernels of one GPU share, made once per GPU per process (cuBLAS
// and cuDNN handles cost tens of milliseconds to create): the GPU's ordinal, its one
// compute stream, cuBLAS and cuDNN handles bound to that stream, and its GpuAllocator.
//
// Ordering: every kernel of a GPU is queued on its compute stream in the order the
// executor starts them, and a kernel starts only after its inputs' producers were
// queued, so the stream's order is the dataflow's. A buffer freed to the allocator can
// therefore be handed to a later kernel at once: that kernel is queued after every use
// of the buffer's previous owner. The host sees device bytes only through the
// allocator's copies, which wait for the stream.
//
// Thread safety: the stream may be used from any thread; calls through the cuBLAS and
// cuDNN handles must hold library_mu() (the handles carry per-call state).
#ifndef TANDEM_FRAMEWORK_KERNELS_CUDA_GPU_CONTEXT_H_
#define TANDEM_FRAMEWORK_KERNELS_CUDA_GPU_CONTEXT_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "framework/kernels/cuda/gpu_allocator.h"
#include "framework/kernels/op_kernel.h"

namespace tandem::gpu {

// INTERNAL "<what>: <CUDA's error name and text>" unless `e` is cudaSuccess.
absl::Status CudaStatus(cudaError_t e, absl::string_view what);
absl::Status CublasStatus(cublasStatus_t s, absl::string_view what);
absl::Status CudnnStatus(cudnnStatus_t s, absl::string_view what);

class GpuContext {
 public:
  // The context of GPU `ordinal`, made on first use; lives until the process exits.
  // `memory_fraction` of the GPU's memory bounds its allocator; it applies at the
  // first call for that GPU only.
  static absl::StatusOr<GpuContext*> Get(int ordinal, double memory_fraction = kDefaultFraction);
  static constexpr double kDefaultFraction = 0.9;

  int ordinal() const { return ordinal_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  absl::Mutex* library_mu() const { return &library_mu_; }
  GpuAllocator* allocator() const { return allocator_.get(); }
  // Makes this GPU current on the calling thread (cheap when it already is).
  absl::Status Activate() const;
  // Waits for everything queued on the stream.
  absl::Status Synchronize() const;

 private:
  GpuContext() = default;
  int ordinal_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  mutable absl::Mutex library_mu_;
  std::unique_ptr<GpuAllocator> allocator_;
};

// Base of every GPU kernel: Compute makes the step's GPU current and calls ComputeGpu
// with its context, then checks that the kernels it launched were accepted (an
// asynchronous fault surfaces at the next copy to the host). In a traced step it also
// waits for them, so the trace times GPU work.
class GpuOpKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) final;
  virtual absl::Status ComputeGpu(OpKernelContext& ctx, GpuContext& gpu) = 0;
};

// Output i of `ctx`: in the GPU's memory for float32 and bfloat16 (KeptOnDevice), in
// host memory for other dtypes. Out of memory is RESOURCE_EXHAUSTED naming the node,
// its op, the bytes and the GPU's usage.
absl::StatusOr<Tensor*> AllocateOutput(OpKernelContext& ctx, int i, const TensorShape& shape);
// A scratch tensor on the GPU, with the same error.
absl::StatusOr<Tensor> AllocateTemp(OpKernelContext& ctx, DType dtype, const TensorShape& shape);

// Runs `cpu` (the node's CPU kernel) on host copies of ctx's inputs and sets ctx's
// outputs, uploading those of GPU dtypes. Waits for the GPU when an input is there.
absl::Status RunOnHost(OpKernel& cpu, OpKernelContext& ctx, GpuContext& gpu);

// UNIMPLEMENTED unless input i is `dtype`; INTERNAL when a non-empty input i is in
// host memory (the runtime moves float inputs of GPU nodes into GPU memory).
absl::Status ExpectDeviceInput(const OpKernelContext& ctx, int i, DType dtype);

// Blocks per grid and threads per block for a one-dimensional loop over n elements
// (grid-stride loops cover the rest).
inline int BlocksFor(int64_t n, int threads = 256) {
  int64_t b = (n + threads - 1) / threads;
  return static_cast<int>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

}  // namespace tandem::gpu

#endif  // TANDEM_FRAMEWORK_KERNELS_CUDA_GPU_CONTEXT_H_

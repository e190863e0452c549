// GpuContext (one per GPU per process), GpuOpKernel, the output allocation helpers and
// the plain-C++ entry points of cuda_kernels.h.
#include "framework/kernels/cuda/gpu_context.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/kernels/cuda/cuda_kernels.h"

namespace tandem::gpu {

absl::Status CudaStatus(cudaError_t e, absl::string_view what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, ": ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")"));
}

absl::Status CublasStatus(cublasStatus_t s, absl::string_view what) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, ": ", cublasGetStatusName(s), " (", cublasGetStatusString(s), ")"));
}

absl::Status CudnnStatus(cudnnStatus_t s, absl::string_view what) {
  if (s == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudnnGetErrorString(s)));
}

absl::StatusOr<GpuContext*> GpuContext::Get(int ordinal, double memory_fraction) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* contexts = new std::map<int, GpuContext*>();  // Never freed: process-wide.
  absl::MutexLock lock(&mu);
  auto it = contexts->find(ordinal);
  if (it != contexts->end()) return it->second;
  if (ordinal < 0 || ordinal >= VisibleGpus()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GPU:", ordinal, " does not exist: this process sees ", VisibleGpus(), " GPU(s)"));
  }
  if (!(memory_fraction > 0 && memory_fraction <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPU memory fraction must be in (0, 1], got ", memory_fraction));
  }
  std::unique_ptr<GpuContext> c(new GpuContext());
  c->ordinal_ = ordinal;
  std::string where = absl::StrCat("GPU:", ordinal);
  TANDEM_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ordinal), where));
  TANDEM_RETURN_IF_ERROR(
      CudaStatus(cudaStreamCreateWithFlags(&c->stream_, cudaStreamNonBlocking), where));
  TANDEM_RETURN_IF_ERROR(CublasStatus(cublasCreate(&c->cublas_), where));
  TANDEM_RETURN_IF_ERROR(CublasStatus(cublasSetStream(c->cublas_, c->stream_), where));
  // Full float32 products: the kernels are checked against the CPU's.
  TANDEM_RETURN_IF_ERROR(CublasStatus(cublasSetMathMode(c->cublas_, CUBLAS_DEFAULT_MATH), where));
  TANDEM_RETURN_IF_ERROR(CudnnStatus(cudnnCreate(&c->cudnn_), where));
  TANDEM_RETURN_IF_ERROR(CudnnStatus(cudnnSetStream(c->cudnn_, c->stream_), where));
  size_t free_bytes = 0, total_bytes = 0;
  TANDEM_RETURN_IF_ERROR(CudaStatus(cudaMemGetInfo(&free_bytes, &total_bytes), where));
  size_t limit = static_cast<size_t>(static_cast<double>(total_bytes) * memory_fraction);
  c->allocator_ = std::make_unique<GpuAllocator>(ordinal, c->stream_, limit);
  cudaDeviceProp prop;
  TANDEM_RETURN_IF_ERROR(CudaStatus(cudaGetDeviceProperties(&prop, ordinal), where));
  LOG(INFO) << where << ": " << prop.name << ", compute capability " << prop.major << "."
            << prop.minor << ", " << prop.multiProcessorCount << " multiprocessors, "
            << total_bytes / (1 << 20) << " MiB (" << free_bytes / (1 << 20)
            << " MiB free); tensors may use " << limit / (1 << 20) << " MiB";
  GpuContext* raw = c.release();
  (*contexts)[ordinal] = raw;
  return raw;
}

absl::Status GpuContext::Activate() const {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == ordinal_) return absl::OkStatus();
  return CudaStatus(cudaSetDevice(ordinal_), absl::StrCat("GPU:", ordinal_));
}

absl::Status GpuContext::Synchronize() const {
  TANDEM_RETURN_IF_ERROR(Activate());
  return CudaStatus(cudaStreamSynchronize(stream_), absl::StrCat("GPU:", ordinal_));
}

absl::Status GpuOpKernel::Compute(OpKernelContext& ctx) {
  GpuContext* gpu = ctx.step().gpu;
  if (gpu == nullptr) return ctx.Error("a GPU kernel ran on a device without a GPU context");
  TANDEM_RETURN_IF_ERROR(gpu->Activate());
  absl::Status s = ComputeGpu(ctx, *gpu);
  if (!s.ok()) return s;
  TANDEM_RETURN_IF_ERROR(ctx.Annotate(CudaStatus(cudaGetLastError(), "launching the kernel")));
  if (ctx.step().traced) return ctx.Annotate(gpu->Synchronize());
  return absl::OkStatus();
}

namespace {

absl::StatusOr<Tensor> Allocate(OpKernelContext& ctx, DType dtype, const TensorShape& shape) {
  if (!KeptOnDevice(dtype)) return Tensor(dtype, shape);
  GpuContext* gpu = ctx.step().gpu;
  if (gpu == nullptr) return ctx.Error("a GPU allocation on a device without a GPU context");
  absl::StatusOr<Tensor> t = Tensor::OnDevice(dtype, shape, gpu->allocator());
  if (!t.ok()) {
    return absl::ResourceExhaustedError(absl::StrCat("node '", ctx.node().name(), "' (",
                                                     ctx.node().op(), "): ", t.status().message()));
  }
  return t;
}

}  // namespace

absl::StatusOr<Tensor*> AllocateOutput(OpKernelContext& ctx, int i, const TensorShape& shape) {
  TANDEM_ASSIGN_OR_RETURN(Tensor t, Allocate(ctx, ctx.output_dtype(i), shape));
  ctx.set_output(i, std::move(t));
  return &ctx.outputs()[i];
}

absl::StatusOr<Tensor> AllocateTemp(OpKernelContext& ctx, DType dtype, const TensorShape& shape) {
  return Allocate(ctx, dtype, shape);
}

absl::Status ExpectDeviceInput(const OpKernelContext& ctx, int i, DType dtype) {
  const Tensor& t = ctx.input(i);
  if (t.dtype() != dtype) {
    return ctx.Annotate(absl::UnimplementedError(absl::StrCat(
        "the GPU kernel is for ", DTypeName(dtype), "; input ", i, " is ", DTypeName(t.dtype()))));
  }
  if (t.on_host() && t.NumElements() > 0) {
    return ctx.Annotate(absl::InternalError(absl::StrCat("input ", i, " (", DTypeName(t.dtype()),
                                                         t.shape().DebugString(),
                                                         ") is in host memory, not the GPU's")));
  }
  return absl::OkStatus();
}

int VisibleGpus() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

absl::StatusOr<GpuContext*> ContextFor(int ordinal, double memory_fraction) {
  return GpuContext::Get(ordinal, memory_fraction);
}

DeviceAllocator* AllocatorOf(GpuContext* context) { return context->allocator(); }

}  // namespace tandem::gpu

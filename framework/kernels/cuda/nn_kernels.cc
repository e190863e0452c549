// framework/kernels/cuda/nn_kernels.cc
//
// GPU kernels of BiasAdd and BiasAddGrad (float32 and bfloat16, channels last: the
// only data_format tandem has), Softmax and LogSoftmax (float32), and
// SparseSoftmaxCrossEntropyWithLogits (float32 logits on the GPU, int32 or int64
// labels in host memory, checked there as the CPU kernel does and uploaded for the
// kernel). Names, checks and formulas mirror nn_activation_kernels.cc and
// softmax_kernels.cc; BiasAddGrad sums bfloat16 in float32 and rounds once. The
// device code is in nn_kernels.cu and reduction_kernels.cu.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/nn_kernel_util.h"
#include "framework/kernels/cuda/cuda_kernels.h"
#include "framework/kernels/cuda/cuda_launchers.h"
#include "framework/kernels/cuda/gpu_context.h"

namespace tandem {
namespace gpu {
namespace {

// Input i has `dtype` and, unless empty, is in GPU memory.
const __nv_bfloat16* Bf16(const Tensor& t) {
  return reinterpret_cast<const __nv_bfloat16*>(t.raw_data());
}
__nv_bfloat16* MutableBf16(Tensor* t) { return reinterpret_cast<__nv_bfloat16*>(t->raw_data()); }

// UNIMPLEMENTED at Init for a data_format other than NHWC (channels last).
absl::Status CheckChannelsLast(const Node& node) {
  const std::string format = GetAttrOr<std::string>(node.attrs(), "data_format", "NHWC");
  if (format == "NHWC") return absl::OkStatus();
  return absl::UnimplementedError(
      absl::StrCat("the GPU kernel supports data_format NHWC only, got '", format, "'"));
}

class BiasAddKernel : public GpuOpKernel {
 public:
  explicit BiasAddKernel(DType dtype) : dtype_(dtype) {}
  absl::Status Init(const Node& node) override { return CheckChannelsLast(node); }

  absl::Status ComputeGpu(OpKernelContext& ctx, GpuContext& gpu) override {
    if (ctx.input(0).dtype() != ctx.input(1).dtype()) {
      return ctx.Error(absl::StrCat("value and bias differ in dtype: ", nn::InputShapes(ctx)));
    }
    TANDEM_RETURN_IF_ERROR(ExpectDeviceInput(ctx, 0, dtype_));
    TANDEM_RETURN_IF_ERROR(ExpectDeviceInput(ctx, 1, dtype_));
    const Tensor& value = ctx.input(0);
    const Tensor& bias = ctx.input(1);
    if (value.rank() < 1 || bias.rank() != 1 || value.dim(value.rank() - 1) != bias.dim(0)) {
      return ctx.Error(absl::StrCat("bias must be a vector the size of value's last dimension: ",
                                    nn::InputShapes(ctx)));
    }
    const int64_t c = bias.dim(0);
    TANDEM_ASSIGN_OR_RETURN(Tensor * y, AllocateOutput(ctx, 0, value.shape()));
    const int64_t n = value.NumElements();
    if (n == 0) return absl::OkStatus();  // Also when c == 0.
    const int64_t rows = n / c;
    cudaError_t e;
    if (dtype_ == DType::kFloat) {
      e = LaunchBiasAdd(value.data<float>(), bias.data<float>(), y->data<float>(), rows, c,
                        /*relu=*/false, gpu.stream());
    } else {
      e = LaunchBiasAddBf16(Bf16(value), Bf16(bias), MutableBf16(y), rows, c, /*relu=*/false,
                            gpu.stream());
    }
    return CudaStatus(e, "BiasAdd");
  }

 private:
  const DType dtype_;
};

class BiasAddGradKernel : public GpuOpKernel {
 public:
  explicit BiasAddGradKernel(DType dtype) : dtype_(dtype) {}
  absl::Status Init(const Node& node) override { return CheckChannelsLast(node); }

  absl::Status ComputeGpu(OpKernelContext& ctx, GpuContext& gpu) override {
    TANDEM_RETURN_IF_ERROR(ExpectDeviceInput(ctx, 0, dtype_));
    const Tensor& g = ctx.input(0);
    if (g.rank() < 1) {
      return ctx.Error(absl::StrCat("input must have rank >= 1: ", nn::InputShapes(ctx)));
    }
    const int64_t c = g.dim(g.rank() - 1);
    TANDEM_ASSIGN_OR_RETURN(Tensor * out, AllocateOutput(ctx, 0, TensorShape({c})));
    if (c == 0) return absl::OkStatus();
    const int64_t rows = g.NumElements() / c;
    if (rows == 0) {  // No rows: the sums are 0.
      return CudaStatus(dtype_ == DType::kFloat
                            ? LaunchFill(out->data<float>(), c, 0.0f, gpu.stream())
                            : LaunchFillBf16(MutableBf16(out), c, 0.0f, gpu.stream()),
                        "BiasAddGrad");
    }
    const int64_t chunks = ReduceChunks(1, rows, c);
    TANDEM_ASSIGN_OR_RETURN(Tensor partial,
                            AllocateTemp(ctx, DType::kFloat, TensorShape({chunks * c})));
    cudaError_t e;
    if (dtype_ == DType::kFloat) {
      e = LaunchReduceSum(g.data<float>(), partial.data<float>(), out->data<float>(), 1, rows, c,
                          chunks, 1.0f, gpu.stream());
    } else {
      e = LaunchReduceSumBf16(Bf16(g), partial.data<float>(), MutableBf16(out), 1, rows, c, chunks,
                              1.0f, gpu.stream());
    }
    return CudaStatus(e, "BiasAddGrad");
  }

 private:
  const DType dtype_;
};

template <bool kLog>
class SoftmaxKernel : public GpuOpKernel {
 public:
  absl::Status ComputeGpu(OpKernelContext& ctx, GpuContext& gpu) override {
    TANDEM_RETURN_IF_ERROR(ExpectDeviceInput(ctx, 0, DType::kFloat));
    const Tensor& x = ctx.input(0);
    if (x.rank() < 1) {
      return ctx.Error(absl::StrCat("logits must have rank >= 1: ", nn::InputShapes(ctx)));
    }
    const int64_t c = x.dim(x.rank() - 1);
    TANDEM_ASSIGN_OR_RETURN(Tensor * y, AllocateOutput(ctx, 0, x.shape()));
    const int64_t n = x.NumElements();
    if (n == 0) return absl::OkStatus();  // Also when c == 0.
    return CudaStatus(
        LaunchSoftmax(x.data<float>(), y->data<float>(), n / c, c, kLog, gpu.stream()),
        node().op());
  }
};

// (features [batch, classes], labels [batch]) -> (loss [batch], backprop).
class SparseXentKernel : public GpuOpKernel {
 public:
  absl::Status ComputeGpu(OpKernelContext& ctx, GpuContext& gpu) override {
    TANDEM_RETURN_IF_ERROR(ExpectDeviceInput(ctx, 0, DType::kFloat));
    const Tensor& features = ctx.input(0);
    const Tensor& labels = ctx.input(1);
    if (labels.dtype() != DType::kInt32 && labels.dtype() != DType::kInt64) {
      return ctx.Error(
          absl::StrCat("labels must be int32 or int64, got ", DTypeName(labels.dtype())));
    }
    if (features.rank() != 2 || labels.rank() != 1 || labels.dim(0) != features.dim(0)) {
      return ctx.Error(absl::StrCat("features must be [batch, classes] and labels [batch]: ",
                                    nn::InputShapes(ctx)));
    }
    if (!labels.on_host()) {
      return ctx.Annotate(absl::InternalError("labels are not in host memory"));
    }
    const int64_t batch = features.dim(0), c = features.dim(1);
    std::vector<int64_t> host_labels(static_cast<size_t>(batch));
    for (int64_t r = 0; r < batch; ++r) {
      const int64_t label =
          labels.dtype() == DType::kInt32 ? labels.data<int32_t>()[r] : labels.data<int64_t>()[r];
      if (label < 0 || label >= c) {
        return ctx.Error(absl::StrCat("received a label value of ", label, " (at index ", r,
                                      ") which is outside the valid range of [0, ", c, ")"));
      }
      host_labels[r] = label;
    }
    if (c == 0 && batch > 0) return ctx.Error("logits have no classes");
    TANDEM_ASSIGN_OR_RETURN(Tensor * loss, AllocateOutput(ctx, 0, TensorShape({batch})));
    TANDEM_ASSIGN_OR_RETURN(Tensor * backprop, AllocateOutput(ctx, 1, features.shape()));
    if (batch == 0) return absl::OkStatus();
    // The labels as int64 in a float32 scratch of twice the elements (device scratch
    // holds floating-point dtypes only).
    TANDEM_ASSIGN_OR_RETURN(Tensor device_labels,
                            AllocateTemp(ctx, DType::kFloat, TensorShape({2 * batch})));
    TANDEM_RETURN_IF_ERROR(ctx.Annotate(gpu.allocator()->CopyFromHost(
        host_labels.data(), device_labels.raw_data(), host_labels.size() * sizeof(int64_t))));
    return CudaStatus(
        LaunchSparseXent(features.data<float>(),
                         reinterpret_cast<const int64_t*>(device_labels.raw_data()),
                         loss->data<float>(), backprop->data<float>(), batch, c, gpu.stream()),
        "SparseSoftmaxCrossEntropyWithLogits");
  }
};

template <typename K>
void RegisterTyped(KernelRegistry* r, const std::string& op, DType dtype) {
  r->Register(op, kDeviceGpu, dtype, [dtype] { return std::make_unique<K>(dtype); });
}

// Dropout(x) -> (y, mask) on the GPU with the CPU kernel's Philox stream: the same
// seeds give the same masks on either device (nn_dropout_kernels.cc). Each run takes
// the next ceil(n / 4) blocks of the stream under the mutex.
class DropoutKernel : public GpuOpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(nn::DropoutAttrs attrs, nn::ParseDropoutAttrs(node));
    rate_ = attrs.rate;
    absl::MutexLock lock(&mu_);  // As PhiloxRandom(seed, seed2).
    state_.key[0] = static_cast<uint32_t>(attrs.seeds.seed);
    state_.key[1] = static_cast<uint32_t>(attrs.seeds.seed >> 32);
    state_.counter[0] = state_.counter[1] = 0;
    state_.counter[2] = static_cast<uint32_t>(attrs.seeds.seed2);
    state_.counter[3] = static_cast<uint32_t>(attrs.seeds.seed2 >> 32);
    return absl::OkStatus();
  }

  absl::Status ComputeGpu(OpKernelContext& ctx, GpuContext& gpu) override {
    TANDEM_RETURN_IF_ERROR(ExpectDeviceInput(ctx, 0, DType::kFloat));
    const Tensor& x = ctx.input(0);
    const int64_t n = x.NumElements();
    PhiloxState start;
    {
      absl::MutexLock lock(&mu_);
      start = state_;
      Skip(static_cast<uint64_t>((n + 3) / 4));  // As PhiloxRandom::Skip.
    }
    TANDEM_ASSIGN_OR_RETURN(Tensor * y, AllocateOutput(ctx, 0, x.shape()));
    TANDEM_ASSIGN_OR_RETURN(Tensor * mask, AllocateOutput(ctx, 1, x.shape()));
    return ctx.Annotate(
        CudaStatus(LaunchDropout(x.data<float>(), y->data<float>(), mask->data<float>(), n, start,
                                 rate_, 1.0f / (1.0f - rate_), gpu.stream()),
                   "Dropout"));
  }

 private:
  void Skip(uint64_t blocks) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    uint32_t* c = state_.counter;
    const uint64_t lo = (static_cast<uint64_t>(c[1]) << 32) | c[0];
    const uint64_t next = lo + blocks;
    c[0] = static_cast<uint32_t>(next);
    c[1] = static_cast<uint32_t>(next >> 32);
    if (next < lo && ++c[2] == 0) ++c[3];
  }

  float rate_ = 0;
  absl::Mutex mu_;
  PhiloxState state_ ABSL_GUARDED_BY(mu_) = {};
};

}  // namespace
}  // namespace gpu

void RegisterCudaNnKernels(KernelRegistry* r) {
  r->Register<gpu::DropoutKernel>("Dropout", kDeviceGpu, DType::kFloat);
  for (DType dtype : {DType::kFloat, DType::kBFloat16}) {
    gpu::RegisterTyped<gpu::BiasAddKernel>(r, "BiasAdd", dtype);
    gpu::RegisterTyped<gpu::BiasAddGradKernel>(r, "BiasAddGrad", dtype);
  }
  r->Register<gpu::SoftmaxKernel<false>>("Softmax", kDeviceGpu, DType::kFloat);
  r->Register<gpu::SoftmaxKernel<true>>("LogSoftmax", kDeviceGpu, DType::kFloat);
  r->Register<gpu::SparseXentKernel>("SparseSoftmaxCrossEntropyWithLogits", kDeviceGpu,
                                     DType::kFloat);
}

}  // namespace tandem

// GPU kernels of the ops that fill a tensor once, for initial values: Fill on the
// device, and the random generators (RandomUniform, RandomStandardNormal,
// TruncatedNormal) run by their CPU kernels on the host and uploaded. An initializer is
// colocated with its variable, so without them a variable and its updates could not
// live on the GPU; drawing on the host keeps a GPU session's initial values equal to a
// CPU session's, bit for bit, for the same seeds.
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/array_util.h"
#include "framework/kernels/cuda/cuda_kernels.h"
#include "framework/kernels/cuda/cuda_launchers.h"
#include "framework/kernels/cuda/gpu_context.h"

namespace tandem {
namespace gpu {
namespace {

// Fill(dims, value): dims on the host, the scalar value on the device.
class FillKernel : public GpuOpKernel {
 public:
  absl::Status ComputeGpu(OpKernelContext& ctx, GpuContext& gpu) override {
    TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                            array_kernels::ReadIndexVector(ctx, 0, "dims"));
    auto shape = TensorShape::Create(dims);
    if (!shape.ok()) return ctx.Annotate(shape.status());
    const Tensor& value = ctx.input(1);
    if (value.rank() != 0) {
      return ctx.Error(
          absl::StrCat("value must be a scalar, got shape ", value.shape().DebugString()));
    }
    if (value.on_host()) return ctx.Error("value is in host memory, expected the GPU's");
    TANDEM_ASSIGN_OR_RETURN(Tensor * out, AllocateOutput(ctx, 0, *shape));
    const int64_t n = out->NumElements();
    cudaError_t e =
        value.dtype() == DType::kFloat
            ? LaunchFillFromScalar(out->data<float>(), n, value.data<float>(), gpu.stream())
            : LaunchFillFromScalarBf16(reinterpret_cast<__nv_bfloat16*>(out->raw_data()), n,
                                       reinterpret_cast<const __nv_bfloat16*>(value.raw_data()),
                                       gpu.stream());
    return ctx.Annotate(CudaStatus(e, "Fill"));
  }
};

// Runs the node's CPU kernel on host copies of the inputs (RunOnHost). For ops that
// run once per variable, not per step.
class HostComputedKernel : public GpuOpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(cpu_, KernelRegistry::Global()->Create(node, kDeviceCpu));
    return absl::OkStatus();
  }
  absl::Status ComputeGpu(OpKernelContext& ctx, GpuContext& gpu) override {
    return RunOnHost(*cpu_, ctx, gpu);
  }

 private:
  std::unique_ptr<OpKernel> cpu_;
};

}  // namespace

absl::Status RunOnHost(OpKernel& cpu, OpKernelContext& ctx, GpuContext& gpu) {
  std::vector<Tensor> inputs;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    absl::StatusOr<Tensor> host = ctx.input(i).ToHost();
    if (!host.ok()) return ctx.Annotate(host.status());
    inputs.push_back(*std::move(host));
  }
  StepContext host_step = ctx.step();
  host_step.device_allocator = nullptr;
  host_step.gpu = nullptr;
  OpKernelContext host_ctx(&cpu, &host_step, std::move(inputs));
  TANDEM_RETURN_IF_ERROR(cpu.Compute(host_ctx));
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    Tensor& t = host_ctx.outputs()[i];
    if (t.IsInitialized() && KeptOnDevice(t.dtype())) {
      absl::StatusOr<Tensor> up = Tensor::CopyToDevice(t, gpu.allocator());
      if (!up.ok()) return ctx.Annotate(up.status());
      ctx.set_output(i, *std::move(up));
    } else {
      ctx.set_output(i, std::move(t));
    }
  }
  return absl::OkStatus();
}

}  // namespace gpu

void RegisterCudaHostKernels(KernelRegistry* r) {
  for (DType d : {DType::kFloat, DType::kBFloat16}) {
    r->Register<gpu::FillKernel>("Fill", kDeviceGpu, d);
    for (const char* op : {"RandomUniform", "RandomStandardNormal", "TruncatedNormal"}) {
      r->Register<gpu::HostComputedKernel>(op, kDeviceGpu, d, "dtype");
    }
  }
}

}  // namespace tandem

// framework/kernels/cuda/array_kernels.cc
//
// GPU kernels of the structural ops and Cast:
//   - Const (float32, bfloat16): the value is uploaded once, on the first Compute,
//     and the same device tensor is output every step;
//   - Identity, Reshape, ExpandDims, Squeeze (every dtype) and Const of int32, int64
//     and bool: the CPU's classes, which only view a buffer wherever it lives
//     (RegisterDeviceAgnosticArrayKernelsOn);
//   - ZerosLike, OnesLike (float32, bfloat16): a fill kernel;
//   - Cast among float32, bfloat16, int32, int64, uint8 and bool: float32 <-> bfloat16
//     on the GPU; any other pair by the CPU's Cast kernel on the host (RunOnHost),
//     downloading and uploading as needed;
//   - the resource-variable kernels VarHandleOp, ReadVariableOp, AssignVariableOp and
//     VarIsInitializedOp for float32 and bfloat16 variables (the CPU's classes, which
//     never touch a value's bytes: RegisterStateKernelsOn).
// Shape checks and errors mirror framework/kernels/cpu/array_kernels.cc.
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/array_util.h"
#include "framework/kernels/cpu/cpu_kernels.h"
#include "framework/kernels/cuda/cuda_kernels.h"
#include "framework/kernels/cuda/cuda_launchers.h"
#include "framework/kernels/cuda/gpu_context.h"
#include "framework/tensor/allocator.h"

namespace tandem {
namespace gpu {
namespace {

class ConstKernel : public GpuOpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(value_, GetAttr<Tensor>(node.attrs(), "value"));
    if (!KeptOnDevice(value_.dtype()) || !value_.on_host()) {
      return absl::UnimplementedError(
          absl::StrCat("the GPU kernel holds float32 or bfloat16 "
                       "values, not ",
                       DTypeName(value_.dtype())));
    }
    if (node.num_outputs() != 1 || node.output_dtype(0) != value_.dtype()) {
      return absl::InvalidArgumentError(
          absl::StrCat("value is ", DTypeName(value_.dtype()), ", not the output's dtype"));
    }
    return absl::OkStatus();
  }

  absl::Status ComputeGpu(OpKernelContext& ctx, GpuContext& gpu) override {
    absl::MutexLock lock(&mu_);
    if (!on_device_.IsInitialized() || on_device_.device_allocator() != gpu.allocator()) {
      TANDEM_ASSIGN_OR_RETURN(Tensor t, AllocateTemp(ctx, value_.dtype(), value_.shape()));
      if (value_.TotalBytes() > 0) {
        TANDEM_RETURN_IF_ERROR(ctx.Annotate(
            gpu.allocator()->CopyFromHost(value_.raw_data(), t.raw_data(), value_.TotalBytes())));
      }
      on_device_ = std::move(t);
    }
    ctx.set_output(0, on_device_);
    return absl::OkStatus();
  }

 private:
  Tensor value_;  // In host memory.
  absl::Mutex mu_;
  Tensor on_device_ ABSL_GUARDED_BY(mu_);  // value_'s copy, made by the first Compute.
};

// ZerosLike (kValue 0), OnesLike (kValue 1) of a float32 or bfloat16 tensor.
template <int kValue>
class FilledLikeKernel : public GpuOpKernel {
 public:
  absl::Status ComputeGpu(OpKernelContext& ctx, GpuContext& gpu) override {
    const Tensor& x = ctx.input(0);
    if (!KeptOnDevice(x.dtype())) {
      return ctx.Annotate(absl::UnimplementedError(
          absl::StrCat("the GPU kernel is for float32 and bfloat16, not ", DTypeName(x.dtype()))));
    }
    TANDEM_ASSIGN_OR_RETURN(Tensor * out, AllocateOutput(ctx, 0, x.shape()));
    const int64_t n = x.NumElements();
    if (n == 0) return absl::OkStatus();
    const float v = static_cast<float>(kValue);
    return CudaStatus(
        x.dtype() == DType::kFloat
            ? LaunchFill(out->data<float>(), n, v, gpu.stream())
            : LaunchFillBf16(reinterpret_cast<__nv_bfloat16*>(out->raw_data()), n, v, gpu.stream()),
        node().op());
  }
};

// ---- Cast ----

// float32 <-> bfloat16 on the GPU; every other pair (a host-memory dtype on either
// side) by the CPU's Cast kernel on the host (RunOnHost), so conversions are the CPU's.
class CastKernel : public GpuOpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(cpu_, KernelRegistry::Global()->Create(node, kDeviceCpu));
    return absl::OkStatus();
  }
  absl::Status ComputeGpu(OpKernelContext& ctx, GpuContext& gpu) override {
    const Tensor& in = ctx.input(0);
    const DType dst = ctx.output_dtype(0);
    if (in.dtype() == dst) {
      ctx.set_output(0, in);
      return absl::OkStatus();
    }
    if (!KeptOnDevice(in.dtype()) || !KeptOnDevice(dst) || in.on_host()) {
      return RunOnHost(*cpu_, ctx, gpu);
    }
    TANDEM_ASSIGN_OR_RETURN(Tensor * out, AllocateOutput(ctx, 0, in.shape()));
    const int64_t n = in.NumElements();
    cudaError_t e;
    if (in.dtype() == DType::kFloat) {
      e = LaunchFloatToBf16(in.data<float>(), reinterpret_cast<__nv_bfloat16*>(out->raw_data()), n,
                            gpu.stream());
    } else {
      e = LaunchBf16ToFloat(reinterpret_cast<const __nv_bfloat16*>(in.raw_data()),
                            out->data<float>(), n, gpu.stream());
    }
    return CudaStatus(e, "Cast");
  }

 private:
  std::unique_ptr<OpKernel> cpu_;
};

}  // namespace
}  // namespace gpu

void RegisterCudaArrayKernels(KernelRegistry* r) {
  for (DType dtype : {DType::kFloat, DType::kBFloat16}) {
    r->Register<gpu::ConstKernel>("Const", kDeviceGpu, dtype, "dtype");
    r->Register<gpu::FilledLikeKernel<0>>("ZerosLike", kDeviceGpu, dtype);
    r->Register<gpu::FilledLikeKernel<1>>("OnesLike", kDeviceGpu, dtype);
    RegisterStateKernelsOn(r, kDeviceGpu, dtype);
  }
  // Shapes next to a variable's initializer, and the kernels that only view a tensor.
  RegisterDeviceAgnosticArrayKernelsOn(r, kDeviceGpu);
  // Cast dispatches on its source dtype (attr SrcT); every destination is handled.
  for (DType src : {DType::kFloat, DType::kBFloat16, DType::kInt32, DType::kInt64, DType::kUInt8,
                    DType::kBool}) {
    r->Register<gpu::CastKernel>("Cast", kDeviceGpu, src, "SrcT");
  }
}

}  // namespace tandem

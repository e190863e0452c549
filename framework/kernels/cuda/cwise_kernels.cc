// framework/kernels/cuda/cwise_kernels.cc
//
// GPU kernels of the elementwise ops, mirroring the CPU kernels' names, dtypes, checks
// and formulas (cwise_binary.cc, cwise_unary.cc, nn_activation_kernels.cc):
//   - broadcasting binary ops AddV2, Sub, Mul, RealDiv, Maximum, Minimum,
//     SquaredDifference, Pow on float32 (numpy broadcasting, the CPU's BroadcastPlan
//     with its merged dimensions, up to kMaxBroadcastRank of them);
//   - unary ops Neg, Abs, Sign, Square, Sqrt, Rsqrt, Exp, Log, Reciprocal, Sigmoid,
//     Tanh, Relu6, Elu, Softplus on float32, and Relu on float32 and bfloat16;
//   - same-shape backward ops SigmoidGrad, TanhGrad, SqrtGrad, RsqrtGrad,
//     ReciprocalGrad, Relu6Grad, EluGrad, SoftplusGrad on float32, and ReluGrad on
//     float32 and bfloat16.
// Outputs are always new device buffers (no forwarding of inputs). The device code is
// in cwise_kernels.cu. RegisterCudaMathKernels also registers the reductions
// (reduction_kernels.cc).
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/cwise_common.h"
#include "framework/kernels/cpu/nn_kernel_util.h"
#include "framework/kernels/cuda/cuda_kernels.h"
#include "framework/kernels/cuda/cuda_launchers.h"
#include "framework/kernels/cuda/gpu_context.h"

namespace tandem {
namespace gpu {

// reduction_kernels.cc
void RegisterCudaReductionKernels(KernelRegistry* r);

namespace {

// Input i has `dtype` and, unless empty, is in GPU memory.
// y = f(x) on float32 or bfloat16 (`dtype`).
class UnaryKernel : public GpuOpKernel {
 public:
  UnaryKernel(UnaryOp op, DType dtype) : op_(op), dtype_(dtype) {}

  absl::Status ComputeGpu(OpKernelContext& ctx, GpuContext& gpu) override {
    TANDEM_RETURN_IF_ERROR(ExpectDeviceInput(ctx, 0, dtype_));
    const Tensor& x = ctx.input(0);
    TANDEM_ASSIGN_OR_RETURN(Tensor * y, AllocateOutput(ctx, 0, x.shape()));
    const int64_t n = x.NumElements();
    if (n == 0) return absl::OkStatus();
    cudaError_t e;
    if (dtype_ == DType::kFloat) {
      e = LaunchUnary(op_, x.data<float>(), y->data<float>(), n, gpu.stream());
    } else {
      e = LaunchUnaryBf16(op_, reinterpret_cast<const __nv_bfloat16*>(x.raw_data()),
                          reinterpret_cast<__nv_bfloat16*>(y->raw_data()), n, gpu.stream());
    }
    return CudaStatus(e, node().op());
  }

 private:
  const UnaryOp op_;
  const DType dtype_;
};

// out = f(input 0, input 1) on same-shape float32 or bfloat16 operands. `nn_style`:
// the activation gradients' message (nn_activation_kernels.cc), else cwise_binary.cc's.
class GradKernel : public GpuOpKernel {
 public:
  GradKernel(GradOp op, DType dtype, bool nn_style) : op_(op), dtype_(dtype), nn_(nn_style) {}

  absl::Status ComputeGpu(OpKernelContext& ctx, GpuContext& gpu) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (a.shape() != b.shape() || a.dtype() != b.dtype()) {
      if (nn_) {
        return ctx.Error(
            absl::StrCat("gradients and features shapes or dtypes differ: ", nn::InputShapes(ctx)));
      }
      return ctx.Error(absl::StrCat("shapes ", a.shape().DebugString(), " and ",
                                    b.shape().DebugString(), " must be equal"));
    }
    TANDEM_RETURN_IF_ERROR(ExpectDeviceInput(ctx, 0, dtype_));
    TANDEM_RETURN_IF_ERROR(ExpectDeviceInput(ctx, 1, dtype_));
    TANDEM_ASSIGN_OR_RETURN(Tensor * out, AllocateOutput(ctx, 0, a.shape()));
    const int64_t n = a.NumElements();
    if (n == 0) return absl::OkStatus();
    cudaError_t e;
    if (dtype_ == DType::kFloat) {
      e = LaunchGrad(op_, a.data<float>(), b.data<float>(), out->data<float>(), n, gpu.stream());
    } else {
      e = LaunchGradBf16(op_, reinterpret_cast<const __nv_bfloat16*>(a.raw_data()),
                         reinterpret_cast<const __nv_bfloat16*>(b.raw_data()),
                         reinterpret_cast<__nv_bfloat16*>(out->raw_data()), n, gpu.stream());
    }
    return CudaStatus(e, node().op());
  }

 private:
  const GradOp op_;
  const DType dtype_;
  const bool nn_;
};

// out = f(x, y) with broadcasting, float32.
class BinaryKernel : public GpuOpKernel {
 public:
  explicit BinaryKernel(BinaryOp op) : op_(op) {}

  absl::Status ComputeGpu(OpKernelContext& ctx, GpuContext& gpu) override {
    const Tensor& x = ctx.input(0);
    const Tensor& y = ctx.input(1);
    auto plan = cwise::MakeBroadcastPlan(x.shape(), y.shape());
    if (!plan.ok()) return ctx.Error(plan.status().message());
    TANDEM_RETURN_IF_ERROR(ExpectDeviceInput(ctx, 0, DType::kFloat));
    TANDEM_RETURN_IF_ERROR(ExpectDeviceInput(ctx, 1, DType::kFloat));
    const int nd = static_cast<int>(plan->dims.size());
    if (nd > kMaxBroadcastRank) {
      return ctx.Annotate(absl::UnimplementedError(absl::StrCat(
          "broadcasting ", x.shape().DebugString(), " with ", y.shape().DebugString(), " needs ",
          nd, " distinct dimensions; the GPU kernel handles up to ", kMaxBroadcastRank)));
    }
    BroadcastIndex index;
    index.rank = nd;
    for (int d = 0; d < nd; ++d) {
      index.dims[d] = plan->dims[d];
      index.x_strides[d] = plan->x_stride[d];
      index.y_strides[d] = plan->y_stride[d];
    }
    TANDEM_ASSIGN_OR_RETURN(Tensor * out, AllocateOutput(ctx, 0, plan->out_shape));
    const int64_t n = plan->out_shape.num_elements();
    if (n == 0) return absl::OkStatus();
    return CudaStatus(LaunchBinary(op_, index, x.data<float>(), y.data<float>(), out->data<float>(),
                                   n, gpu.stream()),
                      node().op());
  }

 private:
  const BinaryOp op_;
};

void RegisterUnary(KernelRegistry* r, const std::string& op, UnaryOp f, DType dtype) {
  r->Register(op, kDeviceGpu, dtype,
              [f, dtype] { return std::make_unique<UnaryKernel>(f, dtype); });
}

void RegisterGrad(KernelRegistry* r, const std::string& op, GradOp f, DType dtype, bool nn_style) {
  r->Register(op, kDeviceGpu, dtype,
              [f, dtype, nn_style] { return std::make_unique<GradKernel>(f, dtype, nn_style); });
}

void RegisterBinary(KernelRegistry* r, const std::string& op, BinaryOp f) {
  r->Register(op, kDeviceGpu, DType::kFloat, [f] { return std::make_unique<BinaryKernel>(f); });
}

}  // namespace
}  // namespace gpu

void RegisterCudaMathKernels(KernelRegistry* r) {
  using gpu::BinaryOp;
  using gpu::GradOp;
  using gpu::UnaryOp;
  constexpr DType kF32 = DType::kFloat;
  constexpr DType kBf16 = DType::kBFloat16;

  gpu::RegisterBinary(r, "AddV2", BinaryOp::kAdd);
  gpu::RegisterBinary(r, "Sub", BinaryOp::kSub);
  gpu::RegisterBinary(r, "Mul", BinaryOp::kMul);
  gpu::RegisterBinary(r, "RealDiv", BinaryOp::kRealDiv);
  gpu::RegisterBinary(r, "Maximum", BinaryOp::kMaximum);
  gpu::RegisterBinary(r, "Minimum", BinaryOp::kMinimum);
  gpu::RegisterBinary(r, "SquaredDifference", BinaryOp::kSquaredDifference);
  gpu::RegisterBinary(r, "Pow", BinaryOp::kPow);

  const std::pair<const char*, UnaryOp> unary[] = {
      {"Neg", UnaryOp::kNeg},
      {"Abs", UnaryOp::kAbs},
      {"Sign", UnaryOp::kSign},
      {"Square", UnaryOp::kSquare},
      {"Sqrt", UnaryOp::kSqrt},
      {"Rsqrt", UnaryOp::kRsqrt},
      {"Exp", UnaryOp::kExp},
      {"Log", UnaryOp::kLog},
      {"Reciprocal", UnaryOp::kReciprocal},
      {"Sigmoid", UnaryOp::kSigmoid},
      {"Tanh", UnaryOp::kTanh},
      {"Relu6", UnaryOp::kRelu6},
      {"Elu", UnaryOp::kElu},
      {"Softplus", UnaryOp::kSoftplus},
  };
  for (const auto& [op, f] : unary) gpu::RegisterUnary(r, op, f, kF32);
  gpu::RegisterUnary(r, "Relu", UnaryOp::kRelu, kF32);
  gpu::RegisterUnary(r, "Relu", UnaryOp::kRelu, kBf16);

  const std::pair<const char*, GradOp> cwise_grads[] = {
      {"SigmoidGrad", GradOp::kSigmoidGrad},
      {"TanhGrad", GradOp::kTanhGrad},
      {"SqrtGrad", GradOp::kSqrtGrad},
      {"RsqrtGrad", GradOp::kRsqrtGrad},
      {"ReciprocalGrad", GradOp::kReciprocalGrad},
  };
  for (const auto& [op, f] : cwise_grads) gpu::RegisterGrad(r, op, f, kF32, /*nn_style=*/false);
  const std::pair<const char*, GradOp> nn_grads[] = {
      {"Relu6Grad", GradOp::kRelu6Grad},
      {"EluGrad", GradOp::kEluGrad},
      {"SoftplusGrad", GradOp::kSoftplusGrad},
  };
  for (const auto& [op, f] : nn_grads) gpu::RegisterGrad(r, op, f, kF32, /*nn_style=*/true);
  gpu::RegisterGrad(r, "ReluGrad", GradOp::kReluGrad, kF32, /*nn_style=*/true);
  gpu::RegisterGrad(r, "ReluGrad", GradOp::kReluGrad, kBf16, /*nn_style=*/true);

  gpu::RegisterCudaReductionKernels(r);
}

}  // namespace tandem

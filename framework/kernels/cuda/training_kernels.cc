// framework/kernels/cuda/training_kernels.cc
//
// GPU kernels of the dense optimizers' ResourceApply* ops on float32 variables:
// GradientDescent, Momentum (use_nesterov), Adagrad, Adam (use_nesterov), RMSProp and
// CenteredRMSProp. As on the CPU (training_kernels.cc): the variables are resolved
// in this device's ResourceMgr, locked in address order, checked for dtype and shape,
// and taken for writing with Var::MutableValue (a copy on the GPU first when a read
// still shares the buffer). The hyper-parameters are float32 scalars in GPU memory:
// their device pointers go to the kernel, which reads them there, so the host never
// waits for the GPU. The update is queued on the GPU's stream while the variables are
// locked; stream order puts it before any later reader. Device code:
// training_kernels.cu.
#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/variable_util.h"
#include "framework/kernels/cuda/cuda_kernels.h"
#include "framework/kernels/cuda/cuda_launchers.h"
#include "framework/kernels/cuda/gpu_context.h"

namespace tandem {
namespace gpu {
namespace {

constexpr int kMaxVars = 4;
constexpr int kMaxHyperParameters = 8;

// Device pointers of one update: variable buffers (var first, then slots), the
// gradient and the scalar hyper-parameters in input order (grad excluded).
struct ApplyArgs {
  float* v[kMaxVars] = {};
  const float* grad = nullptr;
  const float* hp[kMaxHyperParameters] = {};
};

class ApplyKernel : public GpuOpKernel {
 public:
  // `names`: every input's name; inputs [0, num_vars) are handles, `grad` the gradient.
  ApplyKernel(std::vector<const char*> names, int num_vars, int grad)
      : names_(std::move(names)), num_vars_(num_vars), grad_(grad) {}
  absl::Status Init(const Node& node) override {
    nesterov_ = GetAttrOr<bool>(node.attrs(), "use_nesterov", false);
    return absl::OkStatus();
  }

  absl::Status ComputeGpu(OpKernelContext& ctx,
                          GpuContext& gpu) final ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (ctx.num_inputs() != static_cast<int>(names_.size())) {
      return ctx.Error(absl::StrCat("expects ", names_.size(), " inputs, got ", ctx.num_inputs()));
    }
    TANDEM_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<Var>> vars,
                            LookupDistinctVars(ctx, num_vars_, names_));
    ApplyArgs args;
    int h = 0;
    for (int i = num_vars_; i < ctx.num_inputs(); ++i) {
      const Tensor& t = ctx.input(i);
      if (t.dtype() != DType::kFloat) {
        return ctx.Error(absl::StrCat(names_[i], " must be float32, not ", DTypeName(t.dtype())));
      }
      if (i != grad_ && t.NumElements() != 1) {
        return ctx.Error(absl::StrCat(names_[i], " is not a scalar: ", t.shape().DebugString()));
      }
      if (t.on_host() && t.NumElements() > 0) {
        return ctx.Annotate(
            absl::InternalError(absl::StrCat(names_[i], " is in host memory, not the GPU's")));
      }
      if (i == grad_) {
        args.grad = t.data<float>();
      } else if (h < kMaxHyperParameters) {
        args.hp[h++] = t.data<float>();
      }
    }

    std::vector<Var*> order;
    for (const auto& v : vars) order.push_back(v.get());
    std::sort(order.begin(), order.end());
    for (Var* v : order) v->mu()->Lock();
    absl::Status status = UpdateLocked(ctx, gpu, vars, args);
    for (auto it = order.rbegin(); it != order.rend(); ++it) (*it)->mu()->Unlock();
    return status;
  }

 protected:
  // Queues the update of n elements.
  virtual cudaError_t Launch(const ApplyArgs& a, int64_t n, cudaStream_t stream) const = 0;
  bool nesterov() const { return nesterov_; }

 private:
  absl::Status UpdateLocked(OpKernelContext& ctx, GpuContext& gpu,
                            const std::vector<std::shared_ptr<Var>>& vars,
                            ApplyArgs& args) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (int i = 0; i < num_vars_; ++i) {
      if (!vars[i]->is_initialized()) return UninitializedError(ctx.input(i).resource_handle());
      const Tensor& value = vars[i]->value();
      if (value.dtype() != DType::kFloat) {
        return ctx.Error(absl::StrCat(names_[i], " ", ctx.input(i).resource_handle().name,
                                      " holds ", DTypeName(value.dtype()),
                                      "; only float32 is supported"));
      }
      if (i > 0 && value.shape() != vars[0]->value().shape()) {
        return ctx.Error(absl::StrCat("var and ", names_[i], " do not have the same shape",
                                      vars[0]->value().shape().DebugString(), " ",
                                      value.shape().DebugString()));
      }
      if (value.on_host() && value.NumElements() > 0) {
        return ctx.Annotate(
            absl::InternalError(absl::StrCat(names_[i], " ", ctx.input(i).resource_handle().name,
                                             " holds a value in host memory, not the GPU's")));
      }
    }
    const TensorShape& shape = vars[0]->value().shape();
    const Tensor& grad = ctx.input(grad_);
    if (grad.shape() != shape) {
      return ctx.Error(absl::StrCat("var and ", names_[grad_], " do not have the same shape",
                                    shape.DebugString(), " ", grad.shape().DebugString()));
    }
    const int64_t n = shape.num_elements();
    if (n == 0) return absl::OkStatus();
    for (int i = 0; i < num_vars_; ++i) args.v[i] = vars[i]->MutableValue()->data<float>();
    return CudaStatus(Launch(args, n, gpu.stream()), node().op());
  }

  const std::vector<const char*> names_;
  const int num_vars_;
  const int grad_;
  bool nesterov_ = false;
};

class ApplyGradientDescentKernel : public ApplyKernel {
 public:
  ApplyGradientDescentKernel() : ApplyKernel({"var", "alpha", "delta"}, 1, 2) {}

 protected:
  cudaError_t Launch(const ApplyArgs& a, int64_t n, cudaStream_t stream) const override {
    return LaunchApplyGradientDescent(a.v[0], a.hp[0], a.grad, n, stream);
  }
};

class ApplyMomentumKernel : public ApplyKernel {
 public:
  ApplyMomentumKernel() : ApplyKernel({"var", "accum", "lr", "grad", "momentum"}, 2, 3) {}

 protected:
  cudaError_t Launch(const ApplyArgs& a, int64_t n, cudaStream_t stream) const override {
    return LaunchApplyMomentum(a.v[0], a.v[1], a.hp[0], a.grad, a.hp[1], nesterov(), n, stream);
  }
};

class ApplyAdagradKernel : public ApplyKernel {
 public:
  ApplyAdagradKernel() : ApplyKernel({"var", "accum", "lr", "grad"}, 2, 3) {}

 protected:
  cudaError_t Launch(const ApplyArgs& a, int64_t n, cudaStream_t stream) const override {
    return LaunchApplyAdagrad(a.v[0], a.v[1], a.hp[0], a.grad, n, stream);
  }
};

class ApplyAdamKernel : public ApplyKernel {
 public:
  ApplyAdamKernel()
      : ApplyKernel({"var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2",
                     "epsilon", "grad"},
                    3, 9) {}

 protected:
  cudaError_t Launch(const ApplyArgs& a, int64_t n, cudaStream_t stream) const override {
    return LaunchApplyAdam(a.v[0], a.v[1], a.v[2], a.hp[0], a.hp[1], a.hp[2], a.hp[3], a.hp[4],
                           a.hp[5], a.grad, nesterov(), n, stream);
  }
};

class ApplyRMSPropKernel : public ApplyKernel {
 public:
  ApplyRMSPropKernel()
      : ApplyKernel({"var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"}, 3, 7) {}

 protected:
  cudaError_t Launch(const ApplyArgs& a, int64_t n, cudaStream_t stream) const override {
    return LaunchApplyRMSProp(a.v[0], a.v[1], a.v[2], a.hp[0], a.hp[1], a.hp[2], a.hp[3], a.grad, n,
                              stream);
  }
};

class ApplyCenteredRMSPropKernel : public ApplyKernel {
 public:
  ApplyCenteredRMSPropKernel()
      : ApplyKernel({"var", "mg", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"}, 4, 8) {}

 protected:
  cudaError_t Launch(const ApplyArgs& a, int64_t n, cudaStream_t stream) const override {
    return LaunchApplyCenteredRMSProp(a.v[0], a.v[1], a.v[2], a.v[3], a.hp[0], a.hp[1], a.hp[2],
                                      a.hp[3], a.grad, n, stream);
  }
};

}  // namespace
}  // namespace gpu

void RegisterCudaTrainingKernels(KernelRegistry* r) {
  r->Register<gpu::ApplyGradientDescentKernel>("ResourceApplyGradientDescent", kDeviceGpu,
                                               DType::kFloat);
  r->Register<gpu::ApplyMomentumKernel>("ResourceApplyMomentum", kDeviceGpu, DType::kFloat);
  r->Register<gpu::ApplyAdagradKernel>("ResourceApplyAdagrad", kDeviceGpu, DType::kFloat);
  r->Register<gpu::ApplyAdamKernel>("ResourceApplyAdam", kDeviceGpu, DType::kFloat);
  r->Register<gpu::ApplyRMSPropKernel>("ResourceApplyRMSProp", kDeviceGpu, DType::kFloat);
  r->Register<gpu::ApplyCenteredRMSPropKernel>("ResourceApplyCenteredRMSProp", kDeviceGpu,
                                               DType::kFloat);
}

}  // namespace tandem

#include "framework/runtime/runtime_kernels.h"

#include <mutex>

#include "framework/kernels/cpu/cpu_kernels.h"
#ifdef TANDEM_WITH_CUDA
#include "framework/kernels/cuda/cuda_kernels.h"
#endif
#include "framework/ops/standard_ops.h"

namespace tandem {
namespace {

// Base of _Arg and _Retval: both address a slot of the step's call frame by "index".
class FrameSlotKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    auto index = GetAttr<int64_t>(node.attrs(), "index");
    if (!index.ok()) return index.status();
    index_ = *index;
    return absl::OkStatus();
  }

 protected:
  int64_t index_ = 0;
};

class ArgKernel : public FrameSlotKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    const auto* args = ctx.step().args;
    if (args == nullptr || index_ < 0 || index_ >= static_cast<int64_t>(args->size())) {
      return ctx.Error("no argument value for this step");
    }
    ctx.set_output(0, (*args)[index_]);
    return absl::OkStatus();
  }
};

class RetvalKernel : public FrameSlotKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    auto* rets = ctx.step().retvals;
    if (rets == nullptr || index_ < 0 || index_ >= static_cast<int64_t>(rets->size())) {
      return ctx.Error("no return slot for this step");
    }
    (*rets)[index_] = ctx.release_input(0);
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterRuntimeKernels(KernelRegistry* r) {
  r->Register<ArgKernel>("_Arg", kDeviceCpu);
  r->Register<RetvalKernel>("_Retval", kDeviceCpu);
  RegisterSendRecvKernels(r);
}

void EnsureKernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    ops::EnsureStandardOps();
    KernelRegistry* r = KernelRegistry::Global();
    RegisterRuntimeKernels(r);
    RegisterCpuKernels(r);
#ifdef TANDEM_WITH_CUDA
    RegisterCudaKernels(r);
#endif
  });
}

}  // namespace tandem

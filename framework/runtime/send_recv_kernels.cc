// Kernels of _Send and _Recv (ops in framework/ops/runtime_ops.cc), on the CPU and on
// GPUs. A _Recv moves what it receives into its own device's memory: a float tensor
// from the host is copied into a GPU's memory, a tensor from a GPU's memory is copied
// to the host on the CPU (allocator.h: KeptOnDevice). Both build
// their rendezvous key once, in Init, from the node's attrs (frame and iteration 0:
// tandem has no control-flow frames), and use the step's rendezvous; a step without
// one (a graph run by DirectSession) fails with a clear error. _Recv is asynchronous:
// it holds no executor thread while its value is on the way.
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/runtime/rendezvous.h"
#include "framework/runtime/runtime_kernels.h"
#include "framework/tensor/allocator.h"

namespace tandem {
namespace {

absl::StatusOr<ParsedKey> KeyFromAttrs(const Node& node) {
  TANDEM_ASSIGN_OR_RETURN(std::string name, GetAttr<std::string>(node.attrs(), "tensor_name"));
  TANDEM_ASSIGN_OR_RETURN(std::string src, GetAttr<std::string>(node.attrs(), "send_device"));
  TANDEM_ASSIGN_OR_RETURN(int64_t inc, GetAttr<int64_t>(node.attrs(), "send_device_incarnation"));
  TANDEM_ASSIGN_OR_RETURN(std::string dst, GetAttr<std::string>(node.attrs(), "recv_device"));
  return ParseRendezvousKey(CreateRendezvousKey(src, static_cast<uint64_t>(inc), dst, name));
}

absl::Status NoRendezvous(const OpKernelContext& ctx) {
  return ctx.Error(
      "this step has no rendezvous: _Send/_Recv run only in partitions of a distributed "
      "step (or an executor given ExecutorArgs::rendezvous)");
}

// `value` in the memory where the receiving device's kernels expect it.
absl::StatusOr<Tensor> ToDeviceOf(const OpKernelContext& ctx, const Tensor& value) {
  DeviceAllocator* device = ctx.step().device_allocator;
  if (device == nullptr) return value.ToHost();
  if (!KeptOnDevice(value.dtype())) return value.ToHost();
  if (value.on_host()) return Tensor::CopyToDevice(value, device);
  if (value.device_allocator() == device) return value;
  TANDEM_ASSIGN_OR_RETURN(Tensor host, value.ToHost());  // From another GPU.
  return Tensor::CopyToDevice(host, device);
}

class SendKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(key_, KeyFromAttrs(node));
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    Rendezvous* r = ctx.step().rendezvous;
    if (r == nullptr) return NoRendezvous(ctx);
    absl::Status s = r->Send(key_, ctx.input(0), /*is_dead=*/false);
    return s.ok() ? s : ctx.Annotate(s);
  }

 private:
  ParsedKey key_;
};

class RecvKernel : public AsyncOpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(key_, KeyFromAttrs(node));
    return absl::OkStatus();
  }
  void ComputeAsync(OpKernelContext& ctx, DoneCallback done) override {
    Rendezvous* r = ctx.step().rendezvous;
    if (r == nullptr) {
      done(NoRendezvous(ctx));
      return;
    }
    r->RecvAsync(key_, [&ctx, done = std::move(done)](const absl::Status& s, const Tensor& value,
                                                      bool is_dead) {
      if (!s.ok()) {
        done(s);  // Aborts keep the failing partition's own message.
        return;
      }
      if (is_dead) {
        done(ctx.Error("received a dead tensor, which tandem's executor cannot run"));
        return;
      }
      if (value.dtype() != ctx.output_dtype(0)) {
        done(ctx.Error(absl::StrCat("received a ", DTypeName(value.dtype()), " tensor, expected ",
                                    DTypeName(ctx.output_dtype(0)))));
        return;
      }
      absl::StatusOr<Tensor> moved = ToDeviceOf(ctx, value);
      if (!moved.ok()) {
        done(ctx.Annotate(moved.status()));
        return;
      }
      ctx.set_output(0, *std::move(moved));
      done(absl::OkStatus());
    });
  }

 private:
  ParsedKey key_;
};

}  // namespace

void RegisterSendRecvKernels(KernelRegistry* r) {
  for (const DeviceType& device : {kDeviceCpu, kDeviceGpu}) {
    r->Register<SendKernel>("_Send", device);
    r->Register<RecvKernel>("_Recv", device, DType::kInvalid, "tensor_type");
  }
}

}  // namespace tandem

// CPU kernels of _Send and _Recv (ops in framework/ops/runtime_ops.cc). Both build
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
      ctx.set_output(0, value);
      done(absl::OkStatus());
    });
  }

 private:
  ParsedKey key_;
};

}  // namespace

void RegisterSendRecvKernels(KernelRegistry* r) {
  r->Register<SendKernel>("_Send", kDeviceCpu);
  r->Register<RecvKernel>("_Recv", kDeviceCpu, DType::kInvalid, "tensor_type");
}

}  // namespace tandem

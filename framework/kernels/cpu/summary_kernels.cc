// framework/kernels/cpu/summary_kernels.cc
//
// CPU kernel of ScalarSummary (framework/ops/summary_ops.h): the one element of its
// input (any numeric dtype) cast to a float32 scalar. An input without exactly one
// element is INVALID_ARGUMENT naming the node, the tag and the shape.
#include <string>

#include "absl/strings/str_cat.h"
#include "framework/kernels/cpu/cpu_kernels.h"

namespace tandem {
namespace {

class ScalarSummaryKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    tag_ = GetAttrOr<std::string>(node.attrs(), "tag", node.name());
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    if (in.NumElements() != 1) {
      return ctx.Error(absl::StrCat("tag '", tag_,
                                    "': a scalar summary needs a tensor with exactly one "
                                    "element, got shape ",
                                    in.shape().DebugString()));
    }
    if (DTypeSize(in.dtype()) == 0 || in.dtype() == DType::kBool) {
      return ctx.Error(
          absl::StrCat("tag '", tag_, "': cannot summarise a ", DTypeName(in.dtype()), " tensor"));
    }
    ctx.set_output(0, Tensor::Scalar(static_cast<float>(in.ValueAsDouble(0))));
    return absl::OkStatus();
  }

 private:
  std::string tag_;
};

}  // namespace

void RegisterCpuSummaryKernels(KernelRegistry* r) {
  r->Register<ScalarSummaryKernel>("ScalarSummary", kDeviceCpu);
}

}  // namespace tandem

// framework/kernels/cpu/nn_kernels.cc
//
// RegisterCpuNnKernels (every nn family) and the helpers of nn_kernel_util.h.
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/cpu_kernels.h"
#include "framework/kernels/cpu/nn_kernel_util.h"

namespace tandem {
namespace nn {

absl::StatusOr<WindowDim> ComputeWindowDim(int64_t in, int64_t k, int64_t stride, int64_t dilation,
                                           bool same) {
  WindowDim w;
  const int64_t eff = (k - 1) * dilation + 1;
  if (same) {
    w.out = (in + stride - 1) / stride;
    const int64_t total = std::max<int64_t>((w.out - 1) * stride + eff - in, 0);
    w.pad_before = total / 2;
    w.pad_after = total - w.pad_before;
  } else {
    if (in < eff) {
      return absl::InvalidArgumentError(absl::StrCat("window of effective size ", eff,
                                                     " is larger than the input dimension ", in,
                                                     " with VALID padding"));
    }
    w.out = (in - eff) / stride + 1;
  }
  return w;
}

namespace {

absl::StatusOr<std::vector<int64_t>> FourInts(const Node& node, const std::string& name) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> v,
                          GetAttr<std::vector<int64_t>>(node.attrs(), name));
  if (v.size() != 4 || v[0] != 1 || v[3] != 1 || v[1] < 1 || v[2] < 1) {
    return absl::InvalidArgumentError(absl::StrCat("attr '", name,
                                                   "' must be 4 positive ints [1, h, w, 1], got [",
                                                   absl::StrJoin(v, ","), "]"));
  }
  return v;
}

}  // namespace

absl::StatusOr<WindowAttrs> ParseWindowAttrs(const Node& node, const std::string& second,
                                             const std::string& prefix) {
  WindowAttrs a;
  TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> strides, FourInts(node, prefix + "strides"));
  TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> other, FourInts(node, second));
  a.stride_h = strides[1];
  a.stride_w = strides[2];
  a.second_h = other[1];
  a.second_w = other[2];
  TANDEM_ASSIGN_OR_RETURN(std::string padding,
                          GetAttr<std::string>(node.attrs(), prefix + "padding"));
  if (padding != "SAME" && padding != "VALID") {
    return absl::InvalidArgumentError(
        absl::StrCat("padding must be SAME or VALID, got '", padding, "'"));
  }
  a.same = padding == "SAME";
  std::string format = GetAttrOr<std::string>(node.attrs(), "data_format", "NHWC");
  if (format != "NHWC") {
    return absl::UnimplementedError(
        absl::StrCat("only data_format NHWC is supported, got '", format, "'"));
  }
  return a;
}

absl::StatusOr<std::string> KernelChoiceFromEnv(const char* name,
                                                std::initializer_list<const char*> allowed) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::string();
  for (const char* a : allowed) {
    if (std::string_view(v) == a) return std::string(v);
  }
  return absl::InvalidArgumentError(absl::StrCat(name, " is '", v, "'; it must be ",
                                                 absl::StrJoin(allowed, " or "), " (or unset)"));
}

std::string InputShapes(const OpKernelContext& ctx) {
  std::vector<std::string> shapes;
  for (int i = 0; i < ctx.num_inputs(); ++i) shapes.push_back(ctx.input(i).shape().DebugString());
  return absl::StrJoin(shapes, " x ");
}

}  // namespace nn

void RegisterCpuNnKernels(KernelRegistry* r) {
  nn::RegisterCpuMatMulKernels(r);
  nn::RegisterCpuActivationKernels(r);
  nn::RegisterCpuSoftmaxKernels(r);
  nn::RegisterCpuConvKernels(r);
  nn::RegisterCpuPoolKernels(r);
  nn::RegisterCpuBatchNormKernels(r);
  nn::RegisterCpuDropoutKernels(r);
}

}  // namespace tandem

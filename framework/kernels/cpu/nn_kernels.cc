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

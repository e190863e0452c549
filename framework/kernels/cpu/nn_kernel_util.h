// framework/kernels/cpu/nn_kernel_util.h
//
// Helpers shared by the CPU nn kernels: parallel.h's loops, the window geometry every
// device's kernels share (window_geometry.h), dtype checks, and the per-family
// registration functions that RegisterCpuNnKernels calls.
//
// Thread safety: pure functions.
#ifndef TANDEM_FRAMEWORK_KERNELS_CPU_NN_KERNEL_UTIL_H_
#define TANDEM_FRAMEWORK_KERNELS_CPU_NN_KERNEL_UTIL_H_

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "framework/core/random.h"
#include "framework/core/status.h"
#include "framework/graph/graph.h"
#include "framework/kernels/cpu/parallel.h"
#include "framework/kernels/kernel_registry.h"
#include "framework/kernels/op_kernel.h"
#include "framework/kernels/window_geometry.h"

namespace tandem::nn {

// The value of environment variable `name`, a kernel path choice: one of `allowed`, or
// "" where unset; INVALID_ARGUMENT naming the variable and the values it takes
// otherwise. Read at each call, so `train_bench --alternate` can switch it step by step.
absl::StatusOr<std::string> KernelChoiceFromEnv(const char* name,
                                                std::initializer_list<const char*> allowed);

// UNIMPLEMENTED naming the node unless input i is float32 (the only dtype of these
// kernels; inference already rejects non-floating inputs).
inline absl::Status ExpectFloatInput(const OpKernelContext& ctx, int i) {
  if (ctx.input(i).dtype() == DType::kFloat) return absl::OkStatus();
  return ctx.Annotate(absl::UnimplementedError(absl::StrCat(
      "the CPU kernel supports float32 only; input ", i, " is ", DTypeName(ctx.input(i).dtype()))));
}

// UNIMPLEMENTED naming the node unless input i is float32 or bfloat16 (the kernels on
// oneDNN and the loops templated on the element type).
inline absl::Status ExpectFloatOrBf16Input(const OpKernelContext& ctx, int i) {
  const DType d = ctx.input(i).dtype();
  if (d == DType::kFloat || d == DType::kBFloat16) return absl::OkStatus();
  return ctx.Annotate(absl::UnimplementedError(absl::StrCat(
      "the CPU kernel supports float32 and bfloat16 only; input ", i, " is ", DTypeName(d))));
}

// A bfloat16 or float32 element as float32 (the reductions over bfloat16 inputs).
inline float Load(float v) { return v; }
inline float Load(bfloat16 v) { return static_cast<float>(v); }

// A Dropout node's rate (in [0, 1), else INVALID_ARGUMENT) and the seeds of its Philox
// stream (seed and seed2; both zero: a random pair, as TensorFlow).
struct DropoutAttrs {
  float rate = 0;
  SeedPair seeds{0, 0};
};
absl::StatusOr<DropoutAttrs> ParseDropoutAttrs(const Node& node);

// Families (one file each).
void RegisterCpuMatMulKernels(KernelRegistry* r);
void RegisterCpuActivationKernels(KernelRegistry* r);
void RegisterCpuSoftmaxKernels(KernelRegistry* r);
void RegisterCpuConvKernels(KernelRegistry* r);
void RegisterCpuPoolKernels(KernelRegistry* r);
void RegisterCpuBatchNormKernels(KernelRegistry* r);
void RegisterCpuDropoutKernels(KernelRegistry* r);

}  // namespace tandem::nn

#endif  // TANDEM_FRAMEWORK_KERNELS_CPU_NN_KERNEL_UTIL_H_

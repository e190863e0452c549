// framework/kernels/cpu/fused_bias.h
//
// What the fused kernels (_FusedConv2D, _FusedMatMul: the base op, a bias over the
// output's last dimension and an optional ReLU in one oneDNN primitive) share beyond
// their base op: reading the fusion from the node, checking the bias input, the bias
// in the dtype the primitive computes in, and the output of an empty product.
//
// Thread safety: pure functions.
#ifndef TANDEM_FRAMEWORK_KERNELS_CPU_FUSED_BIAS_H_
#define TANDEM_FRAMEWORK_KERNELS_CPU_FUSED_BIAS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "framework/graph/graph.h"
#include "framework/kernels/op_kernel.h"
#include "framework/tensor/tensor.h"

namespace tandem::nn {

struct Fusion {
  bool bias = false;  // Input 2 is a bias (the node is a _Fused* op).
  bool relu = false;  // ReLU after the bias.
};

// The fusion of `node`: none for the base ops; for `fused_op`, a bias and the
// "activation" attr ("none" or "relu", anything else an error).
absl::StatusOr<Fusion> ParseFusion(const Node& node, absl::string_view fused_op);

// Checks input 2 is a vector of `channels` in input 0's dtype.
absl::Status CheckBias(const OpKernelContext& ctx, int64_t channels);

// The bias in `dtype`: itself, or widened to float32 when the kernel computes a
// bfloat16 product on float32 copies.
Tensor BiasAs(const Tensor& bias, DType dtype);

// Fills `out` ([..., C]) with act(bias) in every row: the fused op's value when the
// product is empty (a zero inner dimension).
void FillWithBias(const Tensor& bias, bool relu, Tensor* out);

}  // namespace tandem::nn

#endif  // TANDEM_FRAMEWORK_KERNELS_CPU_FUSED_BIAS_H_

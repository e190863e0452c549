// framework/kernels/cpu/fused_bias.cc
#include "framework/kernels/cpu/fused_bias.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/kernels/cpu/bf16_convert.h"
#include "framework/kernels/cpu/nn_kernel_util.h"
#include "framework/kernels/cpu/onednn_util.h"

namespace tandem::nn {

absl::StatusOr<Fusion> ParseFusion(const Node& node, absl::string_view fused_op) {
  Fusion f;
  if (node.op() != fused_op) return f;
  f.bias = true;
  const std::string activation = GetAttrOr<std::string>(node.attrs(), "activation", "none");
  if (activation != "none" && activation != "relu") {
    return absl::InvalidArgumentError(
        absl::StrCat("activation must be \"none\" or \"relu\", got \"", activation, "\""));
  }
  f.relu = activation == "relu";
  return f;
}

absl::Status CheckBias(const OpKernelContext& ctx, int64_t channels) {
  TANDEM_RETURN_IF_ERROR(ExpectFloatOrBf16Input(ctx, 2));
  const Tensor& bias = ctx.input(2);
  if (bias.dtype() == ctx.input(0).dtype() && bias.rank() == 1 && bias.dim(0) == channels) {
    return absl::OkStatus();
  }
  return ctx.Error(absl::StrCat("bias must be a ", DTypeName(ctx.input(0).dtype()), " vector of ",
                                channels, " (the output channels): ", InputShapes(ctx)));
}

Tensor BiasAs(const Tensor& bias, DType dtype) {
  return bias.dtype() == dtype ? bias : onednn::ToFloat(bias);
}

void FillWithBias(const Tensor& bias, bool relu, Tensor* out) {
  const int64_t c = bias.NumElements();
  if (c == 0 || out->NumElements() == 0) return;
  std::vector<float> row(c);
  for (int64_t j = 0; j < c; ++j) {
    const float b =
        bias.dtype() == DType::kFloat ? bias.data<float>()[j] : Load(bias.data<bfloat16>()[j]);
    row[j] = relu ? std::max(b, 0.0f) : b;
  }
  const int64_t rows = out->NumElements() / c;
  for (int64_t r = 0; r < rows; ++r) {
    if (out->dtype() == DType::kFloat) {
      std::copy(row.begin(), row.end(), out->data<float>() + r * c);
    } else {
      NarrowToBf16(row.data(), out->data<bfloat16>() + r * c, c);
    }
  }
}

}  // namespace tandem::nn

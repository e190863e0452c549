// framework/kernels/cpu/softmax_kernels.cc
//
// Softmax and LogSoftmax over the last dimension, the two softmax cross entropies and
// SigmoidCrossEntropyWithLogits, as row loops (classification rows are short: ten
// classes, so a oneDNN call would cost more than the arithmetic). Rows run in
// parallel when there are many.
#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/nn_kernel_util.h"

namespace tandem::nn {
namespace {

// Writes softmax (or log-softmax when `log`) of row x[0..c) to y; returns the row's
// log-sum-exp.
float SoftmaxRow(const float* x, int64_t c, bool log, float* y) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < c; ++j) max = std::max(max, x[j]);
  float sum = 0;
  for (int64_t j = 0; j < c; ++j) {
    y[j] = x[j] - max;
    sum += std::exp(y[j]);
  }
  const float log_sum = std::log(sum);
  if (log) {
    for (int64_t j = 0; j < c; ++j) y[j] -= log_sum;
  } else {
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < c; ++j) y[j] = std::exp(y[j]) * inv;
  }
  return max + log_sum;
}

// Rows per chunk: row loops do several passes with exp, so chunks can be smaller.
int64_t RowGrain(int64_t c) {
  return std::max<int64_t>(1, kParallelGrain / 8 / std::max<int64_t>(c, 1));
}

template <bool kLog>
class SoftmaxKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_RETURN_IF_ERROR(ExpectFloatInput(ctx, 0));
    if (ctx.input(0).rank() < 1) {
      return ctx.Error(absl::StrCat("logits must have rank >= 1: ", InputShapes(ctx)));
    }
    const TensorShape shape = ctx.input(0).shape();
    const int64_t c = shape.dim(shape.rank() - 1);
    const float* x = ctx.input(0).data<float>();
    float* y = ctx.forward_input_or_allocate_output(0, 0, shape)->data<float>();
    if (c == 0) return absl::OkStatus();
    OmpParallelFor(shape.num_elements() / c, RowGrain(c), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) SoftmaxRow(x + r * c, c, kLog, y + r * c);
    });
    return absl::OkStatus();
  }
};

// (features [batch, classes], labels [batch]) -> (loss [batch], backprop).
class SparseXentKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_RETURN_IF_ERROR(ExpectFloatInput(ctx, 0));
    switch (ctx.input(1).dtype()) {
      case DType::kInt32:
        return ComputeWithLabels<int32_t>(ctx);
      case DType::kInt64:
        return ComputeWithLabels<int64_t>(ctx);
      default:
        return ctx.Error(
            absl::StrCat("labels must be int32 or int64, got ", DTypeName(ctx.input(1).dtype())));
    }
  }

 private:
  template <typename Label>
  absl::Status ComputeWithLabels(OpKernelContext& ctx) {
    const Tensor& features = ctx.input(0);
    const Tensor& labels = ctx.input(1);
    if (features.rank() != 2 || labels.rank() != 1 || labels.dim(0) != features.dim(0)) {
      return ctx.Error(
          absl::StrCat("features must be [batch, classes] and labels [batch]: ", InputShapes(ctx)));
    }
    const int64_t batch = features.dim(0), c = features.dim(1);
    const Label* lp = labels.data<Label>();
    for (int64_t r = 0; r < batch; ++r) {
      if (lp[r] < 0 || lp[r] >= c) {
        return ctx.Error(absl::StrCat("received a label value of ", lp[r], " (at index ", r,
                                      ") which is outside the valid range of [0, ", c, ")"));
      }
    }
    if (c == 0 && batch > 0) return ctx.Error("logits have no classes");
    float* loss = ctx.allocate_output(0, TensorShape({batch}))->data<float>();
    const float* x = features.data<float>();
    float* back = ctx.allocate_output(1, features.shape())->data<float>();
    OmpParallelFor(batch, RowGrain(c), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const float lse = SoftmaxRow(x + r * c, c, /*log=*/false, back + r * c);
        const int64_t label = static_cast<int64_t>(lp[r]);
        loss[r] = lse - x[r * c + label];
        back[r * c + label] -= 1.0f;
      }
    });
    return absl::OkStatus();
  }
};

// (features, labels [batch, classes]) -> (loss [batch], backprop).
class XentKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_RETURN_IF_ERROR(ExpectFloatInput(ctx, 0));
    TANDEM_RETURN_IF_ERROR(ExpectFloatInput(ctx, 1));
    const Tensor& features = ctx.input(0);
    const Tensor& labels = ctx.input(1);
    if (features.rank() != 2 || features.shape() != labels.shape()) {
      return ctx.Error(
          absl::StrCat("features and labels must both be [batch, classes]: ", InputShapes(ctx)));
    }
    const int64_t batch = features.dim(0), c = features.dim(1);
    float* loss = ctx.allocate_output(0, TensorShape({batch}))->data<float>();
    const float* x = features.data<float>();
    const float* z = labels.data<float>();
    float* back = ctx.allocate_output(1, features.shape())->data<float>();
    OmpParallelFor(batch, RowGrain(c), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const float* xr = x + r * c;
        const float* zr = z + r * c;
        float* br = back + r * c;
        const float lse = SoftmaxRow(xr, c, /*log=*/false, br);
        float l = 0;
        for (int64_t j = 0; j < c; ++j) {
          l += zr[j] * (lse - xr[j]);
          br[j] -= zr[j];
        }
        loss[r] = l;
      }
    });
    return absl::OkStatus();
  }
};

// max(x, 0) - x * z + log(1 + exp(-|x|)).
class SigmoidXentKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_RETURN_IF_ERROR(ExpectFloatInput(ctx, 0));
    TANDEM_RETURN_IF_ERROR(ExpectFloatInput(ctx, 1));
    if (ctx.input(0).shape() != ctx.input(1).shape()) {
      return ctx.Error(
          absl::StrCat("logits and labels must have the same shape: ", InputShapes(ctx)));
    }
    const TensorShape shape = ctx.input(0).shape();
    const float* x = ctx.input(0).data<float>();
    const float* z = ctx.input(1).data<float>();
    float* y = ctx.forward_input_or_allocate_output(0, 0, shape)->data<float>();
    OmpParallelFor(shape.num_elements(), kParallelGrain / 8, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        y[i] = std::max(x[i], 0.0f) - x[i] * z[i] + std::log1p(std::exp(-std::fabs(x[i])));
      }
    });
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterCpuSoftmaxKernels(KernelRegistry* r) {
  r->Register<SoftmaxKernel<false>>("Softmax", kDeviceCpu);
  r->Register<SoftmaxKernel<true>>("LogSoftmax", kDeviceCpu);
  r->Register<SparseXentKernel>("SparseSoftmaxCrossEntropyWithLogits", kDeviceCpu);
  r->Register<XentKernel>("SoftmaxCrossEntropyWithLogits", kDeviceCpu);
  r->Register<SigmoidXentKernel>("SigmoidCrossEntropyWithLogits", kDeviceCpu);
}

}  // namespace tandem::nn

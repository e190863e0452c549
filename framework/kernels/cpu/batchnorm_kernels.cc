// framework/kernels/cpu/batchnorm_kernels.cc
//
// FusedBatchNorm and FusedBatchNormGrad over NHWC (or [N, C]) inputs as per-channel
// loops: statistics are summed in double over row chunks in parallel, then the
// normalisation is one fused multiply-add per element.
//
// Outputs of FusedBatchNorm: y, batch_mean, batch_variance (Bessel-corrected in
// training, as TensorFlow reports it), saved_mean and saved_inv_std
// (1/sqrt(variance + epsilon) of the variance used to normalise: the biased batch
// variance in training, the given one in inference). FusedBatchNormGrad takes
// (y_backprop, x, scale, saved_mean, saved_inv_std).
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/nn_kernel_util.h"

namespace tandem::nn {
namespace {

// Per-channel sums over rows of [rows, c] data: fn(row, acc) adds row `row`'s
// contributions into acc[0 .. width*c). Returns the totals (width*c doubles).
template <typename F>
std::vector<double> ChannelSums(int64_t rows, int64_t c, int width, const F& fn) {
  const int64_t chunks = std::clamp<int64_t>(rows * c / kParallelGrain, 1, omp_get_max_threads());
  std::vector<double> partial(chunks * width * c, 0.0);
  OmpParallelFor(chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t ch = cb; ch < ce; ++ch) {
      double* acc = partial.data() + ch * width * c;
      for (int64_t r = rows * ch / chunks; r < rows * (ch + 1) / chunks; ++r) fn(r, acc);
    }
  });
  std::vector<double> total(partial.begin(), partial.begin() + width * c);
  for (int64_t ch = 1; ch < chunks; ++ch) {
    for (int64_t j = 0; j < width * c; ++j) total[j] += partial[ch * width * c + j];
  }
  return total;
}

// y[r, j] = x[r, j] * a[j] + b[j].
void ScaleShift(const float* x, int64_t rows, int64_t c, const float* a, const float* b, float* y) {
  OmpParallelFor(rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(c, 1)),
                 [&](int64_t rb, int64_t re) {
                   for (int64_t r = rb; r < re; ++r) {
                     const float* xr = x + r * c;
                     float* yr = y + r * c;
                     for (int64_t j = 0; j < c; ++j) yr[j] = xr[j] * a[j] + b[j];
                   }
                 });
}

absl::Status CheckBatchNormShapes(const OpKernelContext& ctx, int x_index, int first_vector,
                                  int last_vector, bool allow_empty_stats) {
  const Tensor& x = ctx.input(x_index);
  if (x.rank() != 4 && x.rank() != 2) {
    return ctx.Error(absl::StrCat("x must have rank 4 (NHWC) or 2: ", InputShapes(ctx)));
  }
  const int64_t c = x.dim(x.rank() - 1);
  for (int i = first_vector; i <= last_vector; ++i) {
    const Tensor& v = ctx.input(i);
    const bool ok = v.rank() == 1 && (v.dim(0) == c || (allow_empty_stats && i >= 3));
    if (!ok) {
      return ctx.Error(absl::StrCat("input ", i, " must be a vector of ", c,
                                    " channel values: ", InputShapes(ctx)));
    }
  }
  return absl::OkStatus();
}

class FusedBatchNormKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(epsilon_, GetAttr<float>(node.attrs(), "epsilon"));
    TANDEM_ASSIGN_OR_RETURN(training_, GetAttr<bool>(node.attrs(), "is_training"));
    return absl::OkStatus();
  }

  absl::Status Compute(OpKernelContext& ctx) override {
    for (int i = 0; i < 5; ++i) TANDEM_RETURN_IF_ERROR(ExpectFloatInput(ctx, i));
    TANDEM_RETURN_IF_ERROR(CheckBatchNormShapes(ctx, 0, 1, 4, training_));
    const TensorShape shape = ctx.input(0).shape();
    const int64_t c = shape.dim(shape.rank() - 1);
    const int64_t rows = c == 0 ? 0 : shape.num_elements() / c;
    const float* scale = ctx.input(1).data<float>();
    const float* offset = ctx.input(2).data<float>();
    float* batch_mean = ctx.allocate_output(1, TensorShape({c}))->data<float>();
    float* batch_var = ctx.allocate_output(2, TensorShape({c}))->data<float>();
    float* saved_mean = ctx.allocate_output(3, TensorShape({c}))->data<float>();
    float* saved_inv_std = ctx.allocate_output(4, TensorShape({c}))->data<float>();
    const float* x = ctx.input(0).data<float>();
    if (training_) {
      std::vector<double> sums = ChannelSums(rows, c, 2, [&](int64_t r, double* acc) {
        const float* xr = x + r * c;
        for (int64_t j = 0; j < c; ++j) {
          acc[j] += xr[j];
          acc[c + j] += static_cast<double>(xr[j]) * xr[j];
        }
      });
      const double m = static_cast<double>(std::max<int64_t>(rows, 1));
      const double bessel = m / std::max(m - 1, 1.0);
      for (int64_t j = 0; j < c; ++j) {
        const double mean = sums[j] / m;
        const double var = std::max(sums[c + j] / m - mean * mean, 0.0);
        batch_mean[j] = saved_mean[j] = static_cast<float>(mean);
        batch_var[j] = static_cast<float>(var * bessel);
        saved_inv_std[j] = static_cast<float>(1.0 / std::sqrt(var + epsilon_));
      }
    } else {
      const float* mean = ctx.input(3).data<float>();
      const float* var = ctx.input(4).data<float>();
      for (int64_t j = 0; j < c; ++j) {
        batch_mean[j] = saved_mean[j] = mean[j];
        batch_var[j] = var[j];
        saved_inv_std[j] = 1.0f / std::sqrt(var[j] + epsilon_);
      }
    }
    std::vector<float> a(c), b(c);
    for (int64_t j = 0; j < c; ++j) {
      a[j] = scale[j] * saved_inv_std[j];
      b[j] = offset[j] - saved_mean[j] * a[j];
    }
    float* y = ctx.forward_input_or_allocate_output(0, 0, shape)->data<float>();
    ScaleShift(x, rows, c, a.data(), b.data(), y);
    return absl::OkStatus();
  }

 private:
  float epsilon_ = 1e-4f;
  bool training_ = true;
};

// FusedBatchNormGrad(y_backprop, x, scale, saved_mean, saved_inv_std) ->
// (x_backprop, scale_backprop, offset_backprop, [0], [0]).
class FusedBatchNormGradKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(training_, GetAttr<bool>(node.attrs(), "is_training"));
    return absl::OkStatus();
  }

  absl::Status Compute(OpKernelContext& ctx) override {
    for (int i = 0; i < 5; ++i) TANDEM_RETURN_IF_ERROR(ExpectFloatInput(ctx, i));
    TANDEM_RETURN_IF_ERROR(CheckBatchNormShapes(ctx, 1, 2, 4, false));
    if (ctx.input(0).shape() != ctx.input(1).shape()) {
      return ctx.Error(absl::StrCat("y_backprop and x shapes differ: ", InputShapes(ctx)));
    }
    const TensorShape shape = ctx.input(1).shape();
    const int64_t c = shape.dim(shape.rank() - 1);
    const int64_t rows = c == 0 ? 0 : shape.num_elements() / c;
    const float* dy = ctx.input(0).data<float>();
    const float* x = ctx.input(1).data<float>();
    const float* scale = ctx.input(2).data<float>();
    const float* mean = ctx.input(3).data<float>();
    const float* inv_std = ctx.input(4).data<float>();
    // sum(dy) and sum(dy * x) per channel.
    std::vector<double> sums = ChannelSums(rows, c, 2, [&](int64_t r, double* acc) {
      const float* dyr = dy + r * c;
      const float* xr = x + r * c;
      for (int64_t j = 0; j < c; ++j) {
        acc[j] += dyr[j];
        acc[c + j] += static_cast<double>(dyr[j]) * xr[j];
      }
    });
    float* d_scale = ctx.allocate_output(1, TensorShape({c}))->data<float>();
    float* d_offset = ctx.allocate_output(2, TensorShape({c}))->data<float>();
    ctx.allocate_output(3, TensorShape({0}));
    ctx.allocate_output(4, TensorShape({0}));
    // dx = k_dy * dy + k_x * x + k_1 per channel.
    std::vector<float> k_dy(c), k_x(c), k_1(c);
    const double m = static_cast<double>(std::max<int64_t>(rows, 1));
    for (int64_t j = 0; j < c; ++j) {
      const double sum_dy = sums[j];
      const double sum_dy_xhat = (sums[c + j] - mean[j] * sum_dy) * inv_std[j];
      d_offset[j] = static_cast<float>(sum_dy);
      d_scale[j] = static_cast<float>(sum_dy_xhat);
      const double k = static_cast<double>(scale[j]) * inv_std[j];
      k_dy[j] = static_cast<float>(k);
      if (training_) {
        const double kx = -k * inv_std[j] * sum_dy_xhat / m;
        k_x[j] = static_cast<float>(kx);
        k_1[j] = static_cast<float>(-kx * mean[j] - k * sum_dy / m);
      } else {
        k_x[j] = 0;
        k_1[j] = 0;
      }
    }
    float* dx = ctx.forward_input_or_allocate_output(0, 0, shape)->data<float>();
    OmpParallelFor(rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(c, 1)),
                   [&](int64_t rb, int64_t re) {
                     for (int64_t r = rb; r < re; ++r) {
                       const float* dyr = dy + r * c;
                       const float* xr = x + r * c;
                       float* dxr = dx + r * c;
                       for (int64_t j = 0; j < c; ++j) {
                         dxr[j] = k_dy[j] * dyr[j] + k_x[j] * xr[j] + k_1[j];
                       }
                     }
                   });
    return absl::OkStatus();
  }

 private:
  bool training_ = true;
};

}  // namespace

void RegisterCpuBatchNormKernels(KernelRegistry* r) {
  r->Register<FusedBatchNormKernel>("FusedBatchNorm", kDeviceCpu);
  r->Register<FusedBatchNormGradKernel>("FusedBatchNormGrad", kDeviceCpu);
}

}  // namespace tandem::nn

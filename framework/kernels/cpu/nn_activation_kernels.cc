// framework/kernels/cpu/nn_activation_kernels.cc
//
// Elementwise activations (Relu, Relu6, Elu, Softplus) and their backward ops, BiasAdd,
// BiasAddGrad and L2Loss as plain loops the compiler vectorises: for the tensor sizes
// of dense layers ([128,256]) a loop beats a oneDNN primitive call, and large tensors
// are split over the OpenMP threads. Outputs reuse an input's buffer when the kernel
// holds its only reference.
//
// Relu, ReluGrad, BiasAdd and BiasAddGrad also run on bfloat16 (the mixed-precision
// path): elements are widened to float32, computed, and rounded back on store;
// BiasAddGrad sums in float32. The other activations are float32 only.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/bf16_convert.h"
#include "framework/kernels/cpu/nn_kernel_util.h"

namespace tandem::nn {
namespace {

// Checks input i's dtype: float32, or bfloat16 when the kernel has a bf16 path.
absl::Status ExpectKernelDType(const OpKernelContext& ctx, int i, bool bf16) {
  return bf16 ? ExpectFloatOrBf16Input(ctx, i) : ExpectFloatInput(ctx, i);
}

// y = F(x), elementwise; bfloat16 too when kBf16.
template <typename F, bool kBf16 = false>
class UnaryKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_RETURN_IF_ERROR(ExpectKernelDType(ctx, 0, kBf16));
    if (ctx.input(0).dtype() == DType::kBFloat16) return Run<bfloat16>(ctx);
    return Run<float>(ctx);
  }

 private:
  template <typename T>
  absl::Status Run(OpKernelContext& ctx) {
    const T* x = ctx.input(0).data<T>();
    const TensorShape shape = ctx.input(0).shape();
    T* y = ctx.forward_input_or_allocate_output(0, 0, shape)->template data<T>();
    OmpParallelFor(shape.num_elements(), kParallelGrain, [&](int64_t b, int64_t e) {
      if constexpr (std::is_same_v<T, float>) {
        for (int64_t i = b; i < e; ++i) y[i] = F::Apply(x[i]);
      } else {
        float tile[kBf16Tile];
        for (int64_t i = b; i < e; i += kBf16Tile) {
          const int64_t m = std::min(kBf16Tile, e - i);
          WidenBf16(x + i, tile, m);
          for (int64_t j = 0; j < m; ++j) tile[j] = F::Apply(tile[j]);
          NarrowToBf16(tile, y + i, m);
        }
      }
    });
    return absl::OkStatus();
  }
};

// dx = F(g, v), elementwise, with v the forward op's input or output; bfloat16 too
// when kBf16.
template <typename F, bool kBf16 = false>
class BinaryGradKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_RETURN_IF_ERROR(ExpectKernelDType(ctx, 0, kBf16));
    TANDEM_RETURN_IF_ERROR(ExpectKernelDType(ctx, 1, kBf16));
    if (ctx.input(0).shape() != ctx.input(1).shape() ||
        ctx.input(0).dtype() != ctx.input(1).dtype()) {
      return ctx.Error(
          absl::StrCat("gradients and features shapes or dtypes differ: ", InputShapes(ctx)));
    }
    if (ctx.input(0).dtype() == DType::kBFloat16) return Run<bfloat16>(ctx);
    return Run<float>(ctx);
  }

 private:
  template <typename T>
  absl::Status Run(OpKernelContext& ctx) {
    const T* g = ctx.input(0).data<T>();
    const T* v = ctx.input(1).data<T>();
    const TensorShape shape = ctx.input(0).shape();
    T* dx = ctx.forward_input_or_allocate_output(0, 0, shape)->template data<T>();
    OmpParallelFor(shape.num_elements(), kParallelGrain, [&](int64_t b, int64_t e) {
      if constexpr (std::is_same_v<T, float>) {
        for (int64_t i = b; i < e; ++i) dx[i] = F::Apply(g[i], v[i]);
      } else {
        float gt[kBf16Tile], vt[kBf16Tile];
        for (int64_t i = b; i < e; i += kBf16Tile) {
          const int64_t m = std::min(kBf16Tile, e - i);
          WidenBf16(g + i, gt, m);
          WidenBf16(v + i, vt, m);
          for (int64_t j = 0; j < m; ++j) gt[j] = F::Apply(gt[j], vt[j]);
          NarrowToBf16(gt, dx + i, m);
        }
      }
    });
    return absl::OkStatus();
  }
};

struct ReluF {
  static float Apply(float x) { return x > 0.0f ? x : 0.0f; }
};
struct Relu6F {
  static float Apply(float x) { return std::min(std::max(x, 0.0f), 6.0f); }
};
struct EluF {
  static float Apply(float x) { return x < 0.0f ? std::expm1(x) : x; }
};
struct SoftplusF {
  // log(1 + e^x) without overflow.
  static float Apply(float x) { return std::max(x, 0.0f) + std::log1p(std::exp(-std::fabs(x))); }
};
struct ReluGradF {
  static float Apply(float g, float x) { return x > 0.0f ? g : 0.0f; }
};
struct Relu6GradF {
  static float Apply(float g, float x) { return (x > 0.0f && x < 6.0f) ? g : 0.0f; }
};
struct EluGradF {  // v is Elu's output: d/dx = y + 1 for x < 0.
  static float Apply(float g, float y) { return y < 0.0f ? g * (y + 1.0f) : g; }
};
struct SoftplusGradF {  // g * sigmoid(x).
  static float Apply(float g, float x) { return g / (1.0f + std::exp(-x)); }
};

// Validates value [..., C] and bias [C]; returns C.
absl::StatusOr<int64_t> BiasChannels(const OpKernelContext& ctx) {
  const Tensor& value = ctx.input(0);
  const Tensor& bias = ctx.input(1);
  if (value.rank() < 1 || bias.rank() != 1 || value.dim(value.rank() - 1) != bias.dim(0)) {
    return ctx.Error(absl::StrCat("bias must be a vector the size of value's last dimension: ",
                                  InputShapes(ctx)));
  }
  return bias.dim(0);
}

class BiasAddKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_RETURN_IF_ERROR(ExpectFloatOrBf16Input(ctx, 0));
    TANDEM_RETURN_IF_ERROR(ExpectFloatOrBf16Input(ctx, 1));
    if (ctx.input(0).dtype() != ctx.input(1).dtype()) {
      return ctx.Error(absl::StrCat("value and bias differ in dtype: ", InputShapes(ctx)));
    }
    if (ctx.input(0).dtype() == DType::kBFloat16) return Run<bfloat16>(ctx);
    return Run<float>(ctx);
  }

 private:
  template <typename T>
  absl::Status Run(OpKernelContext& ctx) {
    TANDEM_ASSIGN_OR_RETURN(const int64_t c, BiasChannels(ctx));
    const Tensor bias = ctx.input(1);
    const T* x = ctx.input(0).data<T>();
    const TensorShape shape = ctx.input(0).shape();
    T* y = ctx.forward_input_or_allocate_output(0, 0, shape)->template data<T>();
    if (c == 0) return absl::OkStatus();
    const int64_t rows = shape.num_elements() / c;
    if constexpr (std::is_same_v<T, float>) {
      const float* bp = bias.data<float>();
      OmpParallelFor(rows, std::max<int64_t>(1, kParallelGrain / c), [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          const float* xr = x + r * c;
          float* yr = y + r * c;
          for (int64_t j = 0; j < c; ++j) yr[j] = xr[j] + bp[j];
        }
      });
    } else {
      std::vector<float> bp(c);
      WidenBf16(bias.data<bfloat16>(), bp.data(), c);
      // Tiles of whole rows: one widen and one narrow per tile.
      const int64_t tile_rows = std::max<int64_t>(1, kBf16Tile / c);
      OmpParallelFor(rows, std::max<int64_t>(1, kParallelGrain / c), [&](int64_t b, int64_t e) {
        std::vector<float> tile(tile_rows * c);
        for (int64_t r = b; r < e; r += tile_rows) {
          const int64_t nr = std::min(tile_rows, e - r);
          WidenBf16(x + r * c, tile.data(), nr * c);
          for (int64_t k = 0; k < nr; ++k) {
            float* row = tile.data() + k * c;
            for (int64_t j = 0; j < c; ++j) row[j] += bp[j];
          }
          NarrowToBf16(tile.data(), y + r * c, nr * c);
        }
      });
    }
    return absl::OkStatus();
  }
};

// Sums rows [0, rows) of a [rows, c] matrix into `out` in float32, using per-chunk
// partial sums.
template <typename T>
void SumRows(const T* x, int64_t rows, int64_t c, float* out) {
  const int64_t chunks = std::clamp<int64_t>(rows * c / kParallelGrain, 1, omp_get_max_threads());
  std::vector<float> partial(chunks * c, 0.0f);
  OmpParallelFor(chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t ch = cb; ch < ce; ++ch) {
      float* acc = partial.data() + ch * c;
      const int64_t r0 = rows * ch / chunks, r1 = rows * (ch + 1) / chunks;
      if constexpr (std::is_same_v<T, bfloat16>) {
        AccumulateBf16Rows(x + r0 * c, r1 - r0, c, acc);
      } else {
        for (int64_t r = r0; r < r1; ++r) {
          const T* xr = x + r * c;
          for (int64_t j = 0; j < c; ++j) acc[j] += Load(xr[j]);
        }
      }
    }
  });
  std::copy_n(partial.data(), c, out);
  for (int64_t ch = 1; ch < chunks; ++ch) {
    for (int64_t j = 0; j < c; ++j) out[j] += partial[ch * c + j];
  }
}

class BiasAddGradKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_RETURN_IF_ERROR(ExpectFloatOrBf16Input(ctx, 0));
    const Tensor& g = ctx.input(0);
    if (g.rank() < 1)
      return ctx.Error(absl::StrCat("input must have rank >= 1: ", InputShapes(ctx)));
    const int64_t c = g.dim(g.rank() - 1);
    Tensor* out = ctx.allocate_output(0, TensorShape({c}));
    if (c == 0) return absl::OkStatus();
    const int64_t rows = g.NumElements() / c;
    if (g.dtype() == DType::kFloat) {
      SumRows(g.data<float>(), rows, c, out->data<float>());
      return absl::OkStatus();
    }
    std::vector<float> sum(c);
    SumRows(g.data<bfloat16>(), rows, c, sum.data());
    NarrowToBf16(sum.data(), out->data<bfloat16>(), c);
    return absl::OkStatus();
  }
};

class L2LossKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_RETURN_IF_ERROR(ExpectFloatInput(ctx, 0));
    const Tensor& t = ctx.input(0);
    const float* x = t.data<float>();
    const int64_t n = t.NumElements();
    const int64_t chunks = std::clamp<int64_t>(n / kParallelGrain, 1, omp_get_max_threads());
    std::vector<double> partial(chunks, 0.0);
    OmpParallelFor(chunks, 1, [&](int64_t cb, int64_t ce) {
      for (int64_t ch = cb; ch < ce; ++ch) {
        // Float lanes within blocks of 256 keep the loop vectorised; blocks add in double.
        double acc = 0;
        for (int64_t i = n * ch / chunks, end = n * (ch + 1) / chunks; i < end; i += 256) {
          float block = 0;
          for (int64_t j = i; j < std::min(end, i + 256); ++j) block += x[j] * x[j];
          acc += block;
        }
        partial[ch] = acc;
      }
    });
    double sum = 0;
    for (double p : partial) sum += p;
    ctx.allocate_output(0, TensorShape())->data<float>()[0] = static_cast<float>(sum / 2);
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterCpuActivationKernels(KernelRegistry* r) {
  r->Register<UnaryKernel<ReluF, /*kBf16=*/true>>("Relu", kDeviceCpu);
  r->Register<UnaryKernel<Relu6F>>("Relu6", kDeviceCpu);
  r->Register<UnaryKernel<EluF>>("Elu", kDeviceCpu);
  r->Register<UnaryKernel<SoftplusF>>("Softplus", kDeviceCpu);
  r->Register<BinaryGradKernel<ReluGradF, /*kBf16=*/true>>("ReluGrad", kDeviceCpu);
  r->Register<BinaryGradKernel<Relu6GradF>>("Relu6Grad", kDeviceCpu);
  r->Register<BinaryGradKernel<EluGradF>>("EluGrad", kDeviceCpu);
  r->Register<BinaryGradKernel<SoftplusGradF>>("SoftplusGrad", kDeviceCpu);
  r->Register<BiasAddKernel>("BiasAdd", kDeviceCpu);
  r->Register<BiasAddGradKernel>("BiasAddGrad", kDeviceCpu);
  r->Register<L2LossKernel>("L2Loss", kDeviceCpu);
}

}  // namespace tandem::nn

// framework/kernels/cpu/pool_max_kernels.cc
//
// MaxPool and MaxPoolGrad(orig_input, orig_output, grad) as loops over NHWC rows, each
// vectorised over channels. The gradient goes to the first maximum of each window in
// row-major window order, as in TensorFlow's CPU kernel; it is recomputed from
// orig_input, so no workspace is needed. Disjoint windows (stride >= window, the usual
// 2x2/2) write each input element once; a full 2x2 window takes a single fused pass.
// Overlapping windows accumulate. Images run in parallel. Both run on float32 and on
// bfloat16 (the mixed-precision path; comparisons in float32, values stored unchanged).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/nn_kernel_util.h"
#include "framework/kernels/cpu/pool_util.h"

namespace tandem::nn {
namespace {

// Runs fn(image) for every image of `s`, in parallel; `work` is the per-image cost in
// elements.
template <typename F>
void ForEachImage(const PoolShape& s, int64_t work, const F& fn) {
  ParallelFor(s.n, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(work, 1)),
              [&](int64_t b, int64_t e) {
                for (int64_t img = b; img < e; ++img) fn(img);
              });
}

class MaxPoolKernel : public PoolKernelBase {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_RETURN_IF_ERROR(ExpectFloatOrBf16Input(ctx, 0));
    if (ctx.input(0).dtype() == DType::kBFloat16) return Run<bfloat16>(ctx);
    return Run<float>(ctx);
  }

 private:
  template <typename T>
  absl::Status Run(OpKernelContext& ctx) {
    const Tensor& input = ctx.input(0);
    TANDEM_ASSIGN_OR_RETURN(PoolShape s, MakePoolShape(ctx, attrs_, input.shape()));
    Tensor* out = ctx.allocate_output(0, s.output_shape());
    if (out->NumElements() == 0) return absl::OkStatus();
    const int64_t c = s.c, image = s.h * s.w * c, pooled = s.oh * s.ow * c;
    const T* x = input.data<T>();
    T* y = out->template data<T>();
    const T lowest = Store<T>(-std::numeric_limits<float>::infinity());
    ForEachImage(s, image, [&](int64_t img) {
      const T* xi = x + img * image;
      for (int64_t oy = 0; oy < s.oh; ++oy) {
        for (int64_t ox = 0; ox < s.ow; ++ox) {
          int64_t y0, y1, x0, x1;
          s.Window(oy, ox, &y0, &y1, &x0, &x1);
          T* __restrict yo = y + img * pooled + (oy * s.ow + ox) * c;
          std::fill_n(yo, c, lowest);
          for (int64_t yy = y0; yy < y1; ++yy) {
            for (int64_t xx = x0; xx < x1; ++xx) {
              const T* __restrict row = xi + (yy * s.w + xx) * c;
              for (int64_t ch = 0; ch < c; ++ch) {
                const T m = yo[ch], v = row[ch];
                yo[ch] = Load(v) > Load(m) ? v : m;
              }
            }
          }
        }
      }
    });
    return absl::OkStatus();
  }
};

// The loops below keep every conditional a select between values already loaded, so
// that they vectorise over channels.

// A full 2x2 window (rows r0 r1 / r2 r3): dx of the first maximum is g, the rest 0.
template <typename T>
void Route2x2(const T* __restrict r0, const T* __restrict r1, const T* __restrict r2,
              const T* __restrict r3, const T* __restrict g, T* __restrict d0, T* __restrict d1,
              T* __restrict d2, T* __restrict d3, int64_t c) {
  for (int64_t ch = 0; ch < c; ++ch) {
    const float a = Load(r0[ch]), b = Load(r1[ch]), cc = Load(r2[ch]), d = Load(r3[ch]),
                gv = Load(g[ch]);
    const float ab = a > b ? a : b, cd = cc > d ? cc : d, m = ab > cd ? ab : cd;
    const float rest_a = a == m ? 0.0f : gv;  // Not yet routed after a.
    const float rest_b = b == m ? 0.0f : rest_a;
    d0[ch] = Store<T>(a == m ? gv : 0.0f);
    d1[ch] = Store<T>(b == m ? rest_a : 0.0f);
    d2[ch] = Store<T>(cc == m ? rest_b : 0.0f);
    d3[ch] = Store<T>(cc == m ? 0.0f : rest_b);
  }
}

// Routes the gradient of the window of (oy, ox) to its first maximum: written into dx
// when windows are disjoint (every element of the window is written), added when
// they overlap (dx zeroed first). `mv` and `rest` are scratch of c floats.
template <bool kAccumulate, typename T>
void RouteWindow(const PoolShape& s, const T* xi, const T* g, T* dxi, int64_t oy, int64_t ox,
                 float* __restrict mv, float* __restrict rest) {
  const int64_t c = s.c;
  int64_t y0, y1, x0, x1;
  s.Window(oy, ox, &y0, &y1, &x0, &x1);
  const T* __restrict go = g + (oy * s.ow + ox) * c;
  if (!kAccumulate && y1 - y0 == 2 && x1 - x0 == 2) {
    const int64_t b0 = (y0 * s.w + x0) * c, b2 = b0 + s.w * c;
    Route2x2(xi + b0, xi + b0 + c, xi + b2, xi + b2 + c, go, dxi + b0, dxi + b0 + c, dxi + b2,
             dxi + b2 + c, c);
    return;
  }
  std::fill_n(mv, c, -std::numeric_limits<float>::infinity());
  for (int64_t yy = y0; yy < y1; ++yy) {
    for (int64_t xx = x0; xx < x1; ++xx) {
      const T* __restrict row = xi + (yy * s.w + xx) * c;
      for (int64_t ch = 0; ch < c; ++ch) {
        const float m = mv[ch], v = Load(row[ch]);
        mv[ch] = v > m ? v : m;
      }
    }
  }
  for (int64_t ch = 0; ch < c; ++ch) rest[ch] = Load(go[ch]);
  for (int64_t yy = y0; yy < y1; ++yy) {
    for (int64_t xx = x0; xx < x1; ++xx) {
      const T* __restrict row = xi + (yy * s.w + xx) * c;
      T* __restrict d = dxi + (yy * s.w + xx) * c;
      for (int64_t ch = 0; ch < c; ++ch) {
        const float v = Load(row[ch]), m = mv[ch], r = rest[ch];
        const float here = v == m ? r : 0.0f;
        if constexpr (kAccumulate) {
          d[ch] = Store<T>(Load(d[ch]) + here);
        } else {
          d[ch] = Store<T>(here);
        }
        rest[ch] = v == m ? 0.0f : r;
      }
    }
  }
}

class MaxPoolGradKernel : public PoolKernelBase {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    for (int i = 0; i < 3; ++i) {
      TANDEM_RETURN_IF_ERROR(ExpectFloatOrBf16Input(ctx, i));
      if (ctx.input(i).dtype() != ctx.input(0).dtype()) {
        return ctx.Error(absl::StrCat("inputs differ in dtype: ", InputShapes(ctx)));
      }
    }
    if (ctx.input(0).dtype() == DType::kBFloat16) return Run<bfloat16>(ctx);
    return Run<float>(ctx);
  }

 private:
  template <typename T>
  absl::Status Run(OpKernelContext& ctx) {
    const Tensor& input = ctx.input(0);
    const Tensor& grad = ctx.input(2);
    TANDEM_ASSIGN_OR_RETURN(PoolShape s, MakePoolShape(ctx, attrs_, input.shape()));
    if (grad.shape() != s.output_shape() || ctx.input(1).shape() != s.output_shape()) {
      return ctx.Error(absl::StrCat("orig_output and grad must have the pooled shape ",
                                    s.output_shape().DebugString(), ": ", InputShapes(ctx)));
    }
    Tensor* out = ctx.allocate_output(0, input.shape());
    const int64_t c = s.c, image = s.h * s.w * c, pooled = s.oh * s.ow * c;
    const T* x = input.data<T>();
    const T* g = grad.data<T>();
    T* dx = out->template data<T>();
    const WindowAttrs& a = s.attrs;
    const bool disjoint = a.stride_h >= a.second_h && a.stride_w >= a.second_w;
    // Disjoint windows of stride == size cover every input element (TF geometry).
    const bool covers = a.stride_h == a.second_h && a.stride_w == a.second_w &&
                        s.oh * a.stride_h - s.dim_h.pad_before >= s.h &&
                        s.ow * a.stride_w - s.dim_w.pad_before >= s.w;
    ForEachImage(s, image + pooled * a.second_h * a.second_w, [&](int64_t img) {
      const T* xi = x + img * image;
      const T* gi = g + img * pooled;
      T* dxi = dx + img * image;
      if (!(disjoint && covers)) std::fill_n(dxi, image, Store<T>(0.0f));
      std::vector<float> scratch(2 * c);
      for (int64_t oy = 0; oy < s.oh; ++oy) {
        for (int64_t ox = 0; ox < s.ow; ++ox) {
          if (disjoint) {
            RouteWindow<false, T>(s, xi, gi, dxi, oy, ox, scratch.data(), scratch.data() + c);
          } else {
            RouteWindow<true, T>(s, xi, gi, dxi, oy, ox, scratch.data(), scratch.data() + c);
          }
        }
      }
    });
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterCpuMaxPoolKernels(KernelRegistry* r) {
  r->Register<MaxPoolKernel>("MaxPool", kDeviceCpu);
  r->Register<MaxPoolGradKernel>("MaxPoolGrad", kDeviceCpu);
}

}  // namespace tandem::nn

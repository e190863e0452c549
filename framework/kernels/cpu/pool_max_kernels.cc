// framework/kernels/cpu/pool_max_kernels.cc
//
// MaxPool and MaxPoolGrad(orig_input, orig_output, grad) as loops over NHWC rows, each
// vectorised over channels. The gradient goes to the first maximum of each window in
// row-major window order, as in TensorFlow's CPU kernel; it is recomputed from
// orig_input, so no workspace is needed. Disjoint windows (stride >= window, the usual
// 2x2/2) write each input element once; overlapping windows accumulate. Images run in
// parallel. Full 2x2 windows of stride 2 take the row kernels of pool_2x2.h, on
// float32 or directly on bfloat16; the gradient's general loop takes the 2x2 row on
// each full 2x2 window of another geometry. Other geometries on bfloat16 (the
// mixed-precision path) widen each image to float32, pool it with the same loops and
// narrow it back: max and routing only compare and copy, so the values are exact.
// MaxPoolArgmaxInto and MaxPoolGradByArgmaxInto keep each 2x2 window's choice as a
// byte (pool_util.h), for gradients routed without the input.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/bf16_convert.h"
#include "framework/kernels/cpu/nn_kernel_util.h"
#include "framework/kernels/cpu/pool_2x2.h"
#include "framework/kernels/cpu/pool_util.h"

namespace tandem::nn {
namespace {

// Runs fn(image) for every image of `s`, in parallel; `work` is the per-image cost in
// elements.
template <typename F>
void ForEachImage(const PoolGeometry& s, int64_t work, const F& fn) {
  OmpParallelFor(s.n, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(work, 1)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t img = b; img < e; ++img) fn(img);
                 });
}

// A float32 view of image `img` of a float32 or bfloat16 tensor: the tensor's own
// memory, or `scratch` holding the widened copy.
const float* ImageAsFloat(const Tensor& t, int64_t img, int64_t size, std::vector<float>* scratch) {
  if (t.dtype() == DType::kFloat) return t.data<float>() + img * size;
  scratch->resize(size);
  WidenBf16(t.data<bfloat16>() + img * size, scratch->data(), size);
  return scratch->data();
}

// Where image `img` of the output is computed in float32 (StoreImage then narrows a
// bfloat16 output from the scratch).
float* OutImage(Tensor* t, int64_t img, int64_t size, std::vector<float>* scratch) {
  if (t->dtype() == DType::kFloat) return t->data<float>() + img * size;
  scratch->resize(size);
  return scratch->data();
}
void StoreImage(const std::vector<float>& scratch, Tensor* t, int64_t img, int64_t size) {
  if (t->dtype() == DType::kBFloat16) {
    NarrowToBf16(scratch.data(), t->data<bfloat16>() + img * size, size);
  }
}

// Tensor t's data as T (float32, or bfloat16 as its 16-bit patterns).
template <typename T>
T* Data(const Tensor& t) {
  if constexpr (std::is_same_v<T, float>) {
    return const_cast<float*>(t.data<float>());
  } else {
    return reinterpret_cast<uint16_t*>(const_cast<bfloat16*>(t.data<bfloat16>()));
  }
}

// Full 2x2 windows of stride 2 (pool_2x2.h): row by row, float32 or bfloat16 directly;
// with `codes`, each window's argmax code too.
template <typename T>
void MaxPool2x2Rows(const PoolGeometry& s, const Tensor& input, Tensor* out, uint8_t* codes) {
  const int64_t c = s.c, row = s.w * c, image = s.h * row, pooled = s.oh * s.ow * c;
  const T* x = Data<T>(input);
  T* y = Data<T>(*out);
  ForEachImage(s, image, [&](int64_t img) {
    for (int64_t oy = 0; oy < s.oh; ++oy) {
      const T* r0 = x + img * image + 2 * oy * row;
      const int64_t at = img * pooled + oy * s.ow * c;
      if (codes != nullptr) {
        MaxPoolArgmax2x2Row(r0, r0 + row, y + at, codes + at, s.ow, c);
      } else {
        MaxPool2x2Row(r0, r0 + row, y + at, s.ow, c);
      }
    }
  });
}

void MaxPool2x2(const PoolGeometry& s, const Tensor& input, Tensor* out, uint8_t* codes) {
  if (input.dtype() == DType::kFloat) {
    MaxPool2x2Rows<float>(s, input, out, codes);
  } else {
    MaxPool2x2Rows<uint16_t>(s, input, out, codes);
  }
}

template <typename T>
void MaxPoolGrad2x2(const PoolGeometry& s, const Tensor& input, const Tensor& grad, Tensor* out) {
  const int64_t c = s.c, row = s.w * c, image = s.h * row, pooled = s.oh * s.ow * c;
  const T* x = Data<T>(input);
  const T* g = Data<T>(grad);
  T* dx = Data<T>(*out);
  // Rows and columns past the last window (odd sizes) get no gradient.
  const bool covers = 2 * s.oh == s.h && 2 * s.ow == s.w;
  ForEachImage(s, image + pooled, [&](int64_t img) {
    T* di = dx + img * image;
    if (!covers) std::fill_n(di, image, T{0});  // All-zero bits are 0.0 in both types.
    for (int64_t oy = 0; oy < s.oh; ++oy) {
      const int64_t at = img * image + 2 * oy * row;
      MaxPoolGrad2x2Row(x + at, x + at + row, g + img * pooled + oy * s.ow * c, dx + at,
                        dx + at + row, s.ow, c);
    }
  });
}

// Checks the inputs are float32 or bfloat16, all of one dtype.
absl::Status ExpectOneFloatDType(const OpKernelContext& ctx) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    TANDEM_RETURN_IF_ERROR(ExpectFloatOrBf16Input(ctx, i));
    if (ctx.input(i).dtype() != ctx.input(0).dtype()) {
      return ctx.Error(absl::StrCat("inputs differ in dtype: ", InputShapes(ctx)));
    }
  }
  return absl::OkStatus();
}

class MaxPoolKernel : public PoolKernelBase {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_RETURN_IF_ERROR(ExpectOneFloatDType(ctx));
    const Tensor& input = ctx.input(0);
    TANDEM_ASSIGN_OR_RETURN(PoolGeometry s, PoolGeometry::Make(ctx, attrs_, input.shape()));
    MaxPoolInto(s, input, ctx.allocate_output(0, s.output_shape()));
    return absl::OkStatus();
  }
};

// The loops below keep every conditional a select between values already loaded, so
// that they vectorise over channels.

// m[ch] = the maximum of rows [y0, y1) and columns [x0, x1) of image xi [h, w, c]: -inf
// first, so NaNs are skipped.
void WindowMax(const PoolGeometry& s, const float* xi, int64_t y0, int64_t y1, int64_t x0,
               int64_t x1, float* __restrict m) {
  std::fill_n(m, s.c, -std::numeric_limits<float>::infinity());
  for (int64_t yy = y0; yy < y1; ++yy) {
    for (int64_t xx = x0; xx < x1; ++xx) {
      const float* __restrict row = xi + (yy * s.w + xx) * s.c;
      for (int64_t ch = 0; ch < s.c; ++ch) {
        const float v = row[ch];
        m[ch] = v > m[ch] ? v : m[ch];
      }
    }
  }
}

// Routes the gradient of the window of (oy, ox) to its first maximum: written into dx
// when windows are disjoint (every element of the window is written), added when
// they overlap (dx zeroed first). `mv` and `rest` are scratch of c floats.
template <bool kAccumulate>
void RouteWindow(const PoolGeometry& s, const float* xi, const float* g, float* dxi, int64_t oy,
                 int64_t ox, float* __restrict mv, float* __restrict rest) {
  const int64_t c = s.c;
  int64_t y0, y1, x0, x1;
  s.Window(oy, ox, &y0, &y1, &x0, &x1);
  const float* __restrict go = g + (oy * s.ow + ox) * c;
  if (!kAccumulate && y1 - y0 == 2 && x1 - x0 == 2) {  // One window of a 2x2 row.
    const int64_t b0 = (y0 * s.w + x0) * c, b2 = b0 + s.w * c;
    MaxPoolGrad2x2Row(xi + b0, xi + b2, go, dxi + b0, dxi + b2, 1, c);
    return;
  }
  WindowMax(s, xi, y0, y1, x0, x1, mv);
  std::copy_n(go, c, rest);
  for (int64_t yy = y0; yy < y1; ++yy) {
    for (int64_t xx = x0; xx < x1; ++xx) {
      const float* __restrict row = xi + (yy * s.w + xx) * c;
      float* __restrict d = dxi + (yy * s.w + xx) * c;
      for (int64_t ch = 0; ch < c; ++ch) {
        const float v = row[ch], m = mv[ch], r = rest[ch];
        const float here = v == m ? r : 0.0f;
        if constexpr (kAccumulate) {
          d[ch] += here;
        } else {
          d[ch] = here;
        }
        rest[ch] = v == m ? 0.0f : r;
      }
    }
  }
}

class MaxPoolGradKernel : public PoolKernelBase {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_RETURN_IF_ERROR(ExpectOneFloatDType(ctx));
    const Tensor& input = ctx.input(0);
    const Tensor& grad = ctx.input(2);
    TANDEM_ASSIGN_OR_RETURN(PoolGeometry s, PoolGeometry::Make(ctx, attrs_, input.shape()));
    TANDEM_RETURN_IF_ERROR(ExpectPooledShape(ctx, s, {1, 2}));
    Tensor* out = ctx.allocate_output(0, input.shape());
    MaxPoolGradInto(s, input, grad, out);
    return absl::OkStatus();
  }
};

}  // namespace

namespace {

// Codes k[ch] of the window of rows [y0, y1), columns [x0, x1) of image xi, whose
// maxima are m: 2 * (y - y0) + (x - x0) of its first element, in row-major order, equal
// to the maximum; kNoArgmax where none is (every element NaN).
void WindowCodes(const PoolGeometry& s, const float* xi, int64_t y0, int64_t y1, int64_t x0,
                 int64_t x1, const float* __restrict m, uint8_t* __restrict k) {
  std::fill_n(k, s.c, kNoArgmax);
  for (int64_t yy = y1 - 1; yy >= y0; --yy) {  // Backwards: the first equal one stays.
    for (int64_t xx = x1 - 1; xx >= x0; --xx) {
      const float* __restrict v = xi + (yy * s.w + xx) * s.c;
      const uint8_t code = static_cast<uint8_t>(2 * (yy - y0) + (xx - x0));
      for (int64_t ch = 0; ch < s.c; ++ch) k[ch] = v[ch] == m[ch] ? code : k[ch];
    }
  }
}

// MaxPoolInto and, with `codes`, MaxPoolArgmaxInto.
void MaxPoolWithCodes(const PoolGeometry& s, const Tensor& input, Tensor* out, uint8_t* codes) {
  if (out->NumElements() == 0) return;
  if (IsFull2x2(s)) return MaxPool2x2(s, input, out, codes);
  const int64_t c = s.c, image = s.h * s.w * c, pooled = s.oh * s.ow * c;
  ForEachImage(s, image, [&](int64_t img) {
    thread_local std::vector<float> in_scratch, out_scratch;
    const float* xi = ImageAsFloat(input, img, image, &in_scratch);
    float* yi = OutImage(out, img, pooled, &out_scratch);
    for (int64_t oy = 0; oy < s.oh; ++oy) {
      for (int64_t ox = 0; ox < s.ow; ++ox) {
        int64_t y0, y1, x0, x1;
        s.Window(oy, ox, &y0, &y1, &x0, &x1);
        const int64_t at = (oy * s.ow + ox) * c;
        WindowMax(s, xi, y0, y1, x0, x1, yi + at);
        // No padding before (REQUIRES): y0, x0 are the window's origin.
        if (codes != nullptr) {
          WindowCodes(s, xi, y0, y1, x0, x1, yi + at, codes + img * pooled + at);
        }
      }
    }
    StoreImage(out_scratch, out, img, pooled);
  });
}

}  // namespace

void MaxPoolInto(const PoolGeometry& s, const Tensor& input, Tensor* out) {
  MaxPoolWithCodes(s, input, out, nullptr);
}

void MaxPoolGradInto(const PoolGeometry& s, const Tensor& input, const Tensor& grad, Tensor* out) {
  if (out->NumElements() == 0) return;
  if (IsFull2x2(s)) {
    if (input.dtype() == DType::kFloat) {
      MaxPoolGrad2x2<float>(s, input, grad, out);
    } else {
      MaxPoolGrad2x2<uint16_t>(s, input, grad, out);
    }
    return;
  }
  const int64_t c = s.c, image = s.h * s.w * c, pooled = s.oh * s.ow * c;
  const WindowAttrs& a = s.attrs;
  const bool disjoint = a.stride_h >= a.second_h && a.stride_w >= a.second_w;
  // Disjoint windows of stride == size cover every input element (TF geometry).
  const bool covers = a.stride_h == a.second_h && a.stride_w == a.second_w &&
                      s.oh * a.stride_h - s.dim_h.pad_before >= s.h &&
                      s.ow * a.stride_w - s.dim_w.pad_before >= s.w;
  ForEachImage(s, image + pooled * a.second_h * a.second_w, [&](int64_t img) {
    thread_local std::vector<float> x_scratch, g_scratch, dx_scratch;
    const float* xi = ImageAsFloat(input, img, image, &x_scratch);
    const float* gi = ImageAsFloat(grad, img, pooled, &g_scratch);
    float* dxi = OutImage(out, img, image, &dx_scratch);
    if (!(disjoint && covers)) std::fill_n(dxi, image, 0.0f);
    std::vector<float> scratch(2 * c);
    for (int64_t oy = 0; oy < s.oh; ++oy) {
      for (int64_t ox = 0; ox < s.ow; ++ox) {
        if (disjoint) {
          RouteWindow<false>(s, xi, gi, dxi, oy, ox, scratch.data(), scratch.data() + c);
        } else {
          RouteWindow<true>(s, xi, gi, dxi, oy, ox, scratch.data(), scratch.data() + c);
        }
      }
    }
    StoreImage(dx_scratch, out, img, image);
  });
}

bool PoolsByArgmax(const PoolGeometry& s) {
  const WindowAttrs& a = s.attrs;
  return a.second_h == 2 && a.second_w == 2 && a.stride_h == 2 && a.stride_w == 2 &&
         s.dim_h.pad_before == 0 && s.dim_w.pad_before == 0;
}

void MaxPoolArgmaxInto(const PoolGeometry& s, const Tensor& input, Tensor* out, Tensor* argmax) {
  MaxPoolWithCodes(s, input, out, argmax->data<uint8_t>());
}

namespace {

template <typename T>
void MaxPoolGradByArgmax(const PoolGeometry& s, const uint8_t* codes, const Tensor& grad,
                         Tensor* out) {
  const int64_t c = s.c, row = s.w * c, image = s.h * row, pooled = s.oh * s.ow * c;
  const T* g = Data<T>(grad);
  T* dx = Data<T>(*out);
  const bool full = IsFull2x2(s), covers = full && 2 * s.oh == s.h && 2 * s.ow == s.w;
  ForEachImage(s, image + pooled, [&](int64_t img) {
    T* di = dx + img * image;
    const uint8_t* ki = codes + img * pooled;
    const T* gi = g + img * pooled;
    if (!covers) std::fill_n(di, image, T{0});  // All-zero bits are 0.0 in both types.
    for (int64_t oy = 0; oy < s.oh; ++oy) {
      const int64_t at = oy * s.ow * c;
      if (full) {
        RouteByArgmax2x2Row(ki + at, gi + at, di + 2 * oy * row, di + (2 * oy + 1) * row, s.ow, c);
        continue;
      }
      for (int64_t ox = 0; ox < s.ow; ++ox) {  // Windows clipped at the end.
        for (int64_t ch = 0; ch < c; ++ch) {
          const int64_t i = at + ox * c + ch, yy = 2 * oy + ki[i] / 2, xx = 2 * ox + ki[i] % 2;
          if (ki[i] < kNoArgmax && yy < s.h && xx < s.w) di[(yy * s.w + xx) * c + ch] = gi[i];
        }
      }
    }
  });
}

}  // namespace

void MaxPoolGradByArgmaxInto(const PoolGeometry& s, const Tensor& argmax, const Tensor& grad,
                             Tensor* out) {
  if (out->NumElements() == 0) return;
  if (grad.dtype() == DType::kFloat) {
    MaxPoolGradByArgmax<float>(s, argmax.data<uint8_t>(), grad, out);
  } else {
    MaxPoolGradByArgmax<uint16_t>(s, argmax.data<uint8_t>(), grad, out);
  }
}

void RegisterCpuMaxPoolKernels(KernelRegistry* r) {
  r->Register<MaxPoolKernel>("MaxPool", kDeviceCpu);
  r->Register<MaxPoolGradKernel>("MaxPoolGrad", kDeviceCpu);
}

}  // namespace tandem::nn

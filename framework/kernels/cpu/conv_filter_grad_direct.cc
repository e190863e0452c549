// framework/kernels/cpu/conv_filter_grad_direct.cc: the one-input-channel filter
// gradient as a direct loop (see conv_filter_grad.h).
//
// Per image, the input is copied into a zero-padded float32 plane that covers every
// tap, and each output-gradient row is widened to float32 once. For every filter row i
// and output row y, the kw taps of a block of output channels stay in registers while
// x runs along the row: acc[j][ch] += plane[y + i][x + j] * dy[y][x][ch]. Images are
// split over the OpenMP team; each thread sums its images into its own float32 buffer
// and the buffers are added in thread order, so a given thread count always gives the
// same bits.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "framework/kernels/cpu/bf16_convert.h"
#include "framework/kernels/cpu/conv_filter_grad.h"

namespace tandem::nn {
namespace {

// The padded plane and the widened gradient row of one thread.
struct Scratch {
  int64_t pw = 0, o_pad = 0;  // plane row length, channels rounded up to 16
  std::vector<float> plane, dy_row;
};

// Copies image `b` of `x` (one channel) into the zero-padded plane: padded row r holds
// input row r - pad_top, padded column q input column q - pad_left.
template <typename T>
void FillPlane(const FilterGradGeometry& g, const T* x, int64_t b, Scratch* s) {
  std::fill(s->plane.begin(), s->plane.end(), 0.0f);
  const int64_t ph = static_cast<int64_t>(s->plane.size()) / s->pw;
  for (int64_t r = 0; r < ph; ++r) {
    const int64_t iy = r - g.pad_top;
    if (iy < 0 || iy >= g.h) continue;
    const T* src = x + (b * g.h + iy) * g.w;
    for (int64_t q = g.pad_left; q < std::min<int64_t>(s->pw, g.w + g.pad_left); ++q)
      s->plane[r * s->pw + q] = static_cast<float>(src[q - g.pad_left]);
  }
}

// Row y of image b's output gradient, as float32 [ow][o_pad] (the padding lanes zero).
template <typename T>
void WidenRow(const FilterGradGeometry& g, const T* dy, int64_t b, int64_t y, Scratch* s) {
  const T* src = dy + (b * g.oh + y) * g.ow * g.o;
  for (int64_t x = 0; x < g.ow; ++x) {
    float* dst = s->dy_row.data() + x * s->o_pad;
    if constexpr (std::is_same_v<T, float>) {
      std::memcpy(dst, src + x * g.o, g.o * sizeof(float));
    } else {
      WidenBf16(src + x * g.o, dst, g.o);
    }
  }
}

// acc[j * o_pad + ch] += sum over x < ow of prow[x + j] * drow[x * o_pad + ch], for
// j < KW and the 16 (kBlocks = 1) or 32 (2) channels at drow / acc.
template <int KW, int kBlocks>
__attribute__((target("avx512f"))) void TapsAvx512(const float* prow, const float* drow,
                                                   int64_t o_pad, int64_t ow, float* acc) {
  __m512 a[KW][kBlocks];
  for (int j = 0; j < KW; ++j)
    for (int k = 0; k < kBlocks; ++k) a[j][k] = _mm512_loadu_ps(acc + j * o_pad + 16 * k);
  for (int64_t x = 0; x < ow; ++x) {
    __m512 d[kBlocks];
    for (int k = 0; k < kBlocks; ++k) d[k] = _mm512_loadu_ps(drow + x * o_pad + 16 * k);
    for (int j = 0; j < KW; ++j) {
      const __m512 p = _mm512_set1_ps(prow[x + j]);
      for (int k = 0; k < kBlocks; ++k) a[j][k] = _mm512_fmadd_ps(p, d[k], a[j][k]);
    }
  }
  for (int j = 0; j < KW; ++j)
    for (int k = 0; k < kBlocks; ++k) _mm512_storeu_ps(acc + j * o_pad + 16 * k, a[j][k]);
}

template <int KW>
__attribute__((target("avx512f"))) void RowAvx512(const float* prow, const float* drow,
                                                  int64_t o_pad, int64_t ow, float* acc) {
  int64_t ch = 0;
  for (; ch + 32 <= o_pad; ch += 32) TapsAvx512<KW, 2>(prow, drow + ch, o_pad, ow, acc + ch);
  if (ch < o_pad) TapsAvx512<KW, 1>(prow, drow + ch, o_pad, ow, acc + ch);
}

using RowFn = void (*)(const float*, const float*, int64_t, int64_t, float*);

RowFn Avx512RowFor(int64_t kw) {
  switch (kw) {
    case 1:
      return RowAvx512<1>;
    case 2:
      return RowAvx512<2>;
    case 3:
      return RowAvx512<3>;
    case 4:
      return RowAvx512<4>;
    case 5:
      return RowAvx512<5>;
    case 6:
      return RowAvx512<6>;
    case 7:
      return RowAvx512<7>;
    default:
      return nullptr;
  }
}

// The same sums in plain loops, for CPUs without AVX-512 and kernels wider than 7.
__attribute__((target_clones("arch=x86-64-v3", "default"))) void RowPortable(
    const float* prow, const float* drow, int64_t o_pad, int64_t ow, int64_t kw, float* acc) {
  for (int64_t j = 0; j < kw; ++j) {
    float* a = acc + j * o_pad;
    for (int64_t x = 0; x < ow; ++x) {
      const float p = prow[x + j];
      const float* d = drow + x * o_pad;
      for (int64_t ch = 0; ch < o_pad; ++ch) a[ch] += p * d[ch];
    }
  }
}

template <typename T>
void AccumulateImages(const FilterGradGeometry& g, const T* x, const T* dy, int64_t b0, int64_t b1,
                      RowFn row, float* acc) {
  Scratch s;
  s.pw = g.ow + g.kw - 1;
  s.o_pad = (g.o + 15) / 16 * 16;
  s.plane.assign((g.oh + g.kh - 1) * s.pw, 0.0f);
  s.dy_row.assign(g.ow * s.o_pad, 0.0f);
  for (int64_t b = b0; b < b1; ++b) {
    FillPlane(g, x, b, &s);
    for (int64_t y = 0; y < g.oh; ++y) {
      WidenRow(g, dy, b, y, &s);
      for (int64_t i = 0; i < g.kh; ++i) {
        const float* prow = s.plane.data() + (y + i) * s.pw;
        float* a = acc + i * g.kw * s.o_pad;
        if (row != nullptr) {
          row(prow, s.dy_row.data(), s.o_pad, g.ow, a);
        } else {
          RowPortable(prow, s.dy_row.data(), s.o_pad, g.ow, g.kw, a);
        }
      }
    }
  }
}

}  // namespace

bool DirectFilterGradApplies(const FilterGradGeometry& g) {
  // The padded plane covers every tap of every output position whatever the padding.
  return g.c == 1 && g.stride_h == 1 && g.stride_w == 1 && g.dilation_h == 1 && g.dilation_w == 1;
}

bool DirectFilterGradIsVectorized(const FilterGradGeometry& g) {
  return __builtin_cpu_supports("avx512f") && Avx512RowFor(g.kw) != nullptr;
}

absl::Status FilterGradDirect(const FilterGradGeometry& g, const Tensor& input, const Tensor& grad,
                              Tensor* out) {
  const int64_t o_pad = (g.o + 15) / 16 * 16, taps = g.kh * g.kw;
  const RowFn row = DirectFilterGradIsVectorized(g) ? Avx512RowFor(g.kw) : nullptr;
  const int threads =
      static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(omp_get_max_threads(), g.n)));
  std::vector<float> partial(static_cast<size_t>(threads) * taps * o_pad, 0.0f);
  const bool bf16 = input.dtype() == DType::kBFloat16;
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    float* acc = partial.data() + t * taps * o_pad;
    if (bf16) {
      AccumulateImages(g, input.data<bfloat16>(), grad.data<bfloat16>(), g.n * t / nt,
                       g.n * (t + 1) / nt, row, acc);
    } else {
      AccumulateImages(g, input.data<float>(), grad.data<float>(), g.n * t / nt, g.n * (t + 1) / nt,
                       row, acc);
    }
  }
  // dW [kh, kw, 1, o] from the threads' [tap][o_pad] sums, added in thread order.
  std::vector<float> sum(taps * g.o, 0.0f);
  for (int t = 0; t < threads; ++t) {
    const float* acc = partial.data() + static_cast<int64_t>(t) * taps * o_pad;
    for (int64_t tap = 0; tap < taps; ++tap)
      for (int64_t ch = 0; ch < g.o; ++ch) sum[tap * g.o + ch] += acc[tap * o_pad + ch];
  }
  if (out->dtype() == DType::kBFloat16) {
    NarrowToBf16(sum.data(), out->data<bfloat16>(), taps * g.o);
  } else {
    std::memcpy(out->data<float>(), sum.data(), sum.size() * sizeof(float));
  }
  return absl::OkStatus();
}

}  // namespace tandem::nn

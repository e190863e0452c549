// framework/kernels/cpu/pool_2x2.cc
#include "framework/kernels/cpu/pool_2x2.h"

#include <immintrin.h>

#include <cstring>
#include <limits>
#include <type_traits>

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_* as the masked-off source, which
// -Wmaybe-uninitialized takes for an uninitialized read.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace tandem::nn {
namespace {

#define TANDEM_POOL_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define TANDEM_INLINE __attribute__((always_inline)) inline

TANDEM_INLINE float Wide(float v) { return v; }
TANDEM_INLINE float Wide(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

template <typename T>
constexpr T Zero() {
  return T{0};  // All-zero bits are +0.0 in both types.
}
template <typename T>
T NegativeInfinity() {
  if constexpr (sizeof(T) == 2) {
    return T{0xff80};
  } else {
    return -std::numeric_limits<float>::infinity();
  }
}

// Each window's maximum and, with kCodes, the code of its first maximum: the first
// element equal to the maximum, as RouteWindow routes.
template <typename T, bool kCodes>
TANDEM_INLINE void MaxRow(const T* __restrict r0, const T* __restrict r1, T* __restrict out,
                          uint8_t* __restrict code, int64_t ow, int64_t c) {
  const T start = NegativeInfinity<T>();
  for (int64_t ox = 0; ox < ow; ++ox) {
    const T* __restrict a = r0 + 2 * ox * c;
    const T* __restrict b = a + c;
    const T* __restrict cc = r1 + 2 * ox * c;
    const T* __restrict d = cc + c;
    T* __restrict o = out + ox * c;
    for (int64_t ch = 0; ch < c; ++ch) {
      T m = start;
      m = Wide(a[ch]) > Wide(m) ? a[ch] : m;
      m = Wide(b[ch]) > Wide(m) ? b[ch] : m;
      m = Wide(cc[ch]) > Wide(m) ? cc[ch] : m;
      m = Wide(d[ch]) > Wide(m) ? d[ch] : m;
      o[ch] = m;
      if constexpr (kCodes) {
        const float mw = Wide(m);
        code[ox * c + ch] = Wide(a[ch]) == mw    ? 0
                            : Wide(b[ch]) == mw  ? 1
                            : Wide(cc[ch]) == mw ? 2
                            : Wide(d[ch]) == mw  ? 3
                                                 : kNoArgmax;
      }
    }
  }
}

// One window's gradient over its c channels: elements a, b, cc, d (row-major) of x,
// incoming g, outputs o0..o3. Every conditional selects between loaded values, so the
// loop vectorises over channels.
template <typename T>
TANDEM_INLINE void RouteWindow(const T* __restrict pa, const T* __restrict pb,
                               const T* __restrict pc, const T* __restrict pd,
                               const T* __restrict g, T* __restrict o0, T* __restrict o1,
                               T* __restrict o2, T* __restrict o3, int64_t c) {
  const float start = -std::numeric_limits<float>::infinity();
  const T zero = Zero<T>();
  for (int64_t ch = 0; ch < c; ++ch) {
    const float a = Wide(pa[ch]), b = Wide(pb[ch]), cc = Wide(pc[ch]), d = Wide(pd[ch]);
    float m = a > start ? a : start;
    m = b > m ? b : m;
    m = cc > m ? cc : m;
    m = d > m ? d : m;
    // Routed to the first element equal to the maximum; none when all are NaN.
    const T gv = g[ch];
    const T after_a = a == m ? zero : gv;
    const T after_b = b == m ? zero : after_a;
    const T after_c = cc == m ? zero : after_b;
    o0[ch] = a == m ? gv : zero;
    o1[ch] = b == m ? after_a : zero;
    o2[ch] = cc == m ? after_b : zero;
    o3[ch] = d == m ? after_c : zero;
  }
}

template <typename T>
TANDEM_INLINE void RouteRow(const T* r0, const T* r1, const T* g, T* d0, T* d1, int64_t ow,
                            int64_t c) {
  for (int64_t ox = 0; ox < ow; ++ox) {
    const int64_t at = 2 * ox * c;
    RouteWindow(r0 + at, r0 + at + c, r1 + at, r1 + at + c, g + ox * c, d0 + at, d0 + at + c,
                d1 + at, d1 + at + c, c);
  }
}

// Each window's gradient g to the place its code names, zero elsewhere.
template <typename T>
TANDEM_INLINE void RouteByCodeRow(const uint8_t* __restrict code, const T* __restrict g,
                                  T* __restrict d0, T* __restrict d1, int64_t ow, int64_t c) {
  const T zero = Zero<T>();
  for (int64_t ox = 0; ox < ow; ++ox) {
    const uint8_t* __restrict k = code + ox * c;
    const T* __restrict gv = g + ox * c;
    T* __restrict o0 = d0 + 2 * ox * c;
    T* __restrict o1 = o0 + c;
    T* __restrict o2 = d1 + 2 * ox * c;
    T* __restrict o3 = o2 + c;
    for (int64_t ch = 0; ch < c; ++ch) {
      o0[ch] = k[ch] == 0 ? gv[ch] : zero;
      o1[ch] = k[ch] == 1 ? gv[ch] : zero;
      o2[ch] = k[ch] == 2 ? gv[ch] : zero;
      o3[ch] = k[ch] == 3 ? gv[ch] : zero;
    }
  }
}

// ---- AVX-512 rows: 16 float32 or 32 bfloat16 channels a vector (c a multiple of that).
// The same choices as the loops above, lane by lane: MAXPS(x, m) is `x > m ? x : m`
// (m where either is NaN), and the masks of `x == m` route as RouteWindow's selects.

#define TANDEM_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))
#define TANDEM_AVX512 TANDEM_AVX512_TARGET __attribute__((always_inline)) inline

// The 16 channels of a float32 vector, or 32 bfloat16 channels as two float32 halves,
// one window's four elements and their maximum.
struct Window16 {
  __m512 x[4], m;
};

TANDEM_AVX512 __mmask16 EqualMask(const Window16& w, int k) {
  return _mm512_cmp_ps_mask(w.x[k], w.m, _CMP_EQ_OQ);
}

TANDEM_AVX512 void TakeMax(Window16* w) {
  w->m = _mm512_max_ps(w->x[0], _mm512_set1_ps(-std::numeric_limits<float>::infinity()));
  for (int k = 1; k < 4; ++k) w->m = _mm512_max_ps(w->x[k], w->m);
}

// bfloat16 lanes [16 * half, 16 * half + 16) of v widened to float32.
TANDEM_AVX512 __m512 WidenHalf(__m512i v, int half) {
  const __m256i h = half == 0 ? _mm512_castsi512_si256(v) : _mm512_extracti64x4_epi64(v, 1);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// The four elements of window ox in rows r0, r1 (row-major window order), of an input
// or of a gradient being written.
template <typename P>
TANDEM_AVX512 void Corners(P r0, P r1, int64_t ox, int64_t c, P (&p)[4]) {
  const int64_t at = 2 * ox * c;
  p[0] = r0 + at;
  p[1] = r0 + at + c;
  p[2] = r1 + at;
  p[3] = r1 + at + c;
}

// Masks of the window's first maximum, per element: first[k] has the lanes where element
// k is the first (in row-major order) equal to the maximum.
template <typename Mask>
TANDEM_AVX512 void FirstMaxima(const Mask (&equal)[4], Mask (&first)[4]) {
  Mask taken = 0;
  for (int k = 0; k < 4; ++k) {
    first[k] = static_cast<Mask>(equal[k] & ~taken);
    taken = static_cast<Mask>(taken | equal[k]);
  }
}

// One vector of channels [ch, ch + 64 bytes) of window p with its maximum: float32 as
// one float32 window, bfloat16 as two (its lower and upper 16 lanes widened).
TANDEM_AVX512 void LoadWindows(const float* const* p, int64_t ch, Window16 (&w)[1]) {
  for (int k = 0; k < 4; ++k) w[0].x[k] = _mm512_loadu_ps(p[k] + ch);
  TakeMax(&w[0]);
}
TANDEM_AVX512 void LoadWindows(const uint16_t* const* p, int64_t ch, Window16 (&w)[2]) {
  __m512i v[4];
  for (int k = 0; k < 4; ++k) v[k] = _mm512_loadu_si512(p[k] + ch);
  for (int half = 0; half < 2; ++half) {
    for (int k = 0; k < 4; ++k) w[half].x[k] = WidenHalf(v[k], half);
    TakeMax(&w[half]);
  }
}

// Per element k of the windows, the lanes equal to the maximum.
TANDEM_AVX512 void EqualMasks(const Window16 (&w)[1], __mmask16 (&equal)[4]) {
  for (int k = 0; k < 4; ++k) equal[k] = EqualMask(w[0], k);
}
TANDEM_AVX512 void EqualMasks(const Window16 (&w)[2], __mmask32 (&equal)[4]) {
  for (int k = 0; k < 4; ++k) {
    equal[k] = static_cast<__mmask32>(EqualMask(w[0], k)) |
               static_cast<__mmask32>(EqualMask(w[1], k)) << 16;
  }
}

// A vector's lanes of T: 16 float32 (one float32 window) or 32 bfloat16 (two).
template <typename T>
struct Lanes {
  static constexpr int64_t kCount = 64 / sizeof(T);
  static constexpr int kWindows = sizeof(T) == 2 ? 2 : 1;
  using Mask = std::conditional_t<sizeof(T) == 2, __mmask32, __mmask16>;
};

// The maxima of windows w as T: float32 as they are; bfloat16 as the top 16 bits of
// each widened maximum, which are exact (the maximum is one of the inputs, or -inf).
TANDEM_AVX512 void StoreMax(const Window16 (&w)[1], float* out) { _mm512_storeu_ps(out, w[0].m); }
TANDEM_AVX512 void StoreMax(const Window16 (&w)[2], uint16_t* out) {
  __m256i halves[2];
  for (int half = 0; half < 2; ++half) {
    halves[half] = _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(w[half].m), 16));
  }
  _mm512_storeu_si512(out, _mm512_inserti64x4(_mm512_castsi256_si512(halves[0]), halves[1], 1));
}

// g's lanes where `mask` is set, zero elsewhere.
TANDEM_AVX512 void StoreMasked(__mmask16 mask, const float* g, float* out) {
  _mm512_storeu_ps(out, _mm512_maskz_mov_ps(mask, _mm512_loadu_ps(g)));
}
TANDEM_AVX512 void StoreMasked(__mmask32 mask, const uint16_t* g, uint16_t* out) {
  _mm512_storeu_si512(out, _mm512_maskz_mov_epi16(mask, _mm512_loadu_si512(g)));
}

// The codes of a vector's lanes from their exclusive first-maximum masks: k where
// first[k] has the lane, kNoArgmax where none has it.
TANDEM_AVX512 void StoreCodes(const __mmask16 (&first)[4], uint8_t* code) {
  __m128i v = _mm_set1_epi8(kNoArgmax);
  for (int k = 0; k < 4; ++k) v = _mm_mask_blend_epi8(first[k], v, _mm_set1_epi8(k));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(code), v);
}
TANDEM_AVX512 void StoreCodes(const __mmask32 (&first)[4], uint8_t* code) {
  __m256i v = _mm256_set1_epi8(kNoArgmax);
  for (int k = 0; k < 4; ++k) v = _mm256_mask_blend_epi8(first[k], v, _mm256_set1_epi8(k));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(code), v);
}

// Per k, the lanes whose code is k.
TANDEM_AVX512 void CodeMasks(const uint8_t* code, __mmask16 (&masks)[4]) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(code));
  for (int k = 0; k < 4; ++k) masks[k] = _mm_cmpeq_epi8_mask(v, _mm_set1_epi8(k));
}
TANDEM_AVX512 void CodeMasks(const uint8_t* code, __mmask32 (&masks)[4]) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(code));
  for (int k = 0; k < 4; ++k) masks[k] = _mm256_cmpeq_epi8_mask(v, _mm256_set1_epi8(k));
}

template <typename T, bool kCodes>
TANDEM_AVX512_TARGET void MaxRowAvx512(const T* r0, const T* r1, T* out, uint8_t* code, int64_t ow,
                                       int64_t c) {
  using L = Lanes<T>;
  for (int64_t ox = 0; ox < ow; ++ox) {
    const T* p[4];
    Corners(r0, r1, ox, c, p);
    for (int64_t ch = 0; ch < c; ch += L::kCount) {
      Window16 w[L::kWindows];
      LoadWindows(p, ch, w);
      StoreMax(w, out + ox * c + ch);
      if constexpr (kCodes) {
        typename L::Mask equal[4], first[4];
        EqualMasks(w, equal);
        FirstMaxima(equal, first);
        StoreCodes(first, code + ox * c + ch);
      }
    }
  }
}

template <typename T>
TANDEM_AVX512_TARGET void RouteRowAvx512(const T* r0, const T* r1, const T* g, T* d0, T* d1,
                                         int64_t ow, int64_t c) {
  using L = Lanes<T>;
  for (int64_t ox = 0; ox < ow; ++ox) {
    const T* p[4];
    Corners(r0, r1, ox, c, p);
    T* o[4];
    Corners(d0, d1, ox, c, o);
    for (int64_t ch = 0; ch < c; ch += L::kCount) {
      Window16 w[L::kWindows];
      LoadWindows(p, ch, w);
      typename L::Mask equal[4], first[4];
      EqualMasks(w, equal);
      FirstMaxima(equal, first);
      for (int k = 0; k < 4; ++k) StoreMasked(first[k], g + ox * c + ch, o[k] + ch);
    }
  }
}

template <typename T>
TANDEM_AVX512_TARGET void RouteByCodeRowAvx512(const uint8_t* code, const T* g, T* d0, T* d1,
                                               int64_t ow, int64_t c) {
  using L = Lanes<T>;
  for (int64_t ox = 0; ox < ow; ++ox) {
    T* o[4];
    Corners(d0, d1, ox, c, o);
    for (int64_t ch = 0; ch < c; ch += L::kCount) {
      typename L::Mask masks[4];
      CodeMasks(code + ox * c + ch, masks);
      for (int k = 0; k < 4; ++k) StoreMasked(masks[k], g + ox * c + ch, o[k] + ch);
    }
  }
}

// Whether the AVX-512 rows run: the CPU has AVX-512BW and VL, and c fills whole
// vectors of T.
template <typename T>
bool UseAvx512(int64_t c) {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl");
  return has && c % Lanes<T>::kCount == 0;
}

}  // namespace

bool IsFull2x2(const PoolGeometry& s) {
  const WindowAttrs& a = s.attrs;
  return a.second_h == 2 && a.second_w == 2 && a.stride_h == 2 && a.stride_w == 2 &&
         s.dim_h.pad_before == 0 && s.dim_w.pad_before == 0 && 2 * s.oh <= s.h && 2 * s.ow <= s.w;
}

TANDEM_POOL_CLONES void MaxPool2x2Row(const float* r0, const float* r1, float* out, int64_t ow,
                                      int64_t c) {
  if (UseAvx512<float>(c)) return MaxRowAvx512<float, false>(r0, r1, out, nullptr, ow, c);
  MaxRow<float, false>(r0, r1, out, nullptr, ow, c);
}
TANDEM_POOL_CLONES void MaxPool2x2Row(const uint16_t* r0, const uint16_t* r1, uint16_t* out,
                                      int64_t ow, int64_t c) {
  if (UseAvx512<uint16_t>(c)) return MaxRowAvx512<uint16_t, false>(r0, r1, out, nullptr, ow, c);
  MaxRow<uint16_t, false>(r0, r1, out, nullptr, ow, c);
}
TANDEM_POOL_CLONES void MaxPoolArgmax2x2Row(const float* r0, const float* r1, float* out,
                                            uint8_t* code, int64_t ow, int64_t c) {
  if (UseAvx512<float>(c)) return MaxRowAvx512<float, true>(r0, r1, out, code, ow, c);
  MaxRow<float, true>(r0, r1, out, code, ow, c);
}
TANDEM_POOL_CLONES void MaxPoolArgmax2x2Row(const uint16_t* r0, const uint16_t* r1, uint16_t* out,
                                            uint8_t* code, int64_t ow, int64_t c) {
  if (UseAvx512<uint16_t>(c)) return MaxRowAvx512<uint16_t, true>(r0, r1, out, code, ow, c);
  MaxRow<uint16_t, true>(r0, r1, out, code, ow, c);
}
TANDEM_POOL_CLONES void MaxPoolGrad2x2Row(const float* r0, const float* r1, const float* g,
                                          float* d0, float* d1, int64_t ow, int64_t c) {
  if (UseAvx512<float>(c)) return RouteRowAvx512(r0, r1, g, d0, d1, ow, c);
  RouteRow(r0, r1, g, d0, d1, ow, c);
}
TANDEM_POOL_CLONES void MaxPoolGrad2x2Row(const uint16_t* r0, const uint16_t* r1, const uint16_t* g,
                                          uint16_t* d0, uint16_t* d1, int64_t ow, int64_t c) {
  if (UseAvx512<uint16_t>(c)) return RouteRowAvx512(r0, r1, g, d0, d1, ow, c);
  RouteRow(r0, r1, g, d0, d1, ow, c);
}
TANDEM_POOL_CLONES void RouteByArgmax2x2Row(const uint8_t* code, const float* g, float* d0,
                                            float* d1, int64_t ow, int64_t c) {
  if (UseAvx512<float>(c)) return RouteByCodeRowAvx512(code, g, d0, d1, ow, c);
  RouteByCodeRow(code, g, d0, d1, ow, c);
}
TANDEM_POOL_CLONES void RouteByArgmax2x2Row(const uint8_t* code, const uint16_t* g, uint16_t* d0,
                                            uint16_t* d1, int64_t ow, int64_t c) {
  if (UseAvx512<uint16_t>(c)) return RouteByCodeRowAvx512(code, g, d0, d1, ow, c);
  RouteByCodeRow(code, g, d0, d1, ow, c);
}

}  // namespace tandem::nn

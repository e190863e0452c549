// framework/kernels/cpu/pool_2x2.cc
#include "framework/kernels/cpu/pool_2x2.h"

#include <cstring>
#include <limits>

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

template <typename T>
TANDEM_INLINE void MaxRow(const T* __restrict r0, const T* __restrict r1, T* __restrict out,
                          int64_t ow, int64_t c) {
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

}  // namespace

bool IsFull2x2(const PoolShape& s) {
  const WindowAttrs& a = s.attrs;
  return a.second_h == 2 && a.second_w == 2 && a.stride_h == 2 && a.stride_w == 2 &&
         s.dim_h.pad_before == 0 && s.dim_w.pad_before == 0 && 2 * s.oh <= s.h && 2 * s.ow <= s.w;
}

TANDEM_POOL_CLONES void MaxPool2x2Row(const float* r0, const float* r1, float* out, int64_t ow,
                                      int64_t c) {
  MaxRow(r0, r1, out, ow, c);
}
TANDEM_POOL_CLONES void MaxPool2x2Row(const uint16_t* r0, const uint16_t* r1, uint16_t* out,
                                      int64_t ow, int64_t c) {
  MaxRow(r0, r1, out, ow, c);
}
TANDEM_POOL_CLONES void MaxPoolGrad2x2Row(const float* r0, const float* r1, const float* g,
                                          float* d0, float* d1, int64_t ow, int64_t c) {
  RouteRow(r0, r1, g, d0, d1, ow, c);
}
TANDEM_POOL_CLONES void MaxPoolGrad2x2Row(const uint16_t* r0, const uint16_t* r1, const uint16_t* g,
                                          uint16_t* d0, uint16_t* d1, int64_t ow, int64_t c) {
  RouteRow(r0, r1, g, d0, d1, ow, c);
}

}  // namespace tandem::nn

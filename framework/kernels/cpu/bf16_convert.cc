// framework/kernels/cpu/bf16_convert.cc
#include "framework/kernels/cpu/bf16_convert.h"

#include <cstring>

namespace tandem::nn {

#define TANDEM_BF16_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

TANDEM_BF16_CLONES void WidenBf16(const bfloat16* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(src[i].bits) << 16;
    std::memcpy(&dst[i], &u, sizeof(u));
  }
}

TANDEM_BF16_CLONES void NarrowToBf16(const float* src, bfloat16* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &src[i], sizeof(u));
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    dst[i].bits = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? 0x7fc0u : rounded);
  }
}

TANDEM_BF16_CLONES void AccumulateBf16Rows(const bfloat16* x, int64_t rows, int64_t c,
                                           float* __restrict acc) {
  for (int64_t r = 0; r < rows; ++r) {
    const bfloat16* __restrict xr = x + r * c;
    for (int64_t j = 0; j < c; ++j) {
      const uint32_t u = static_cast<uint32_t>(xr[j].bits) << 16;
      float f;
      std::memcpy(&f, &u, sizeof(f));
      acc[j] += f;
    }
  }
}

}  // namespace tandem::nn

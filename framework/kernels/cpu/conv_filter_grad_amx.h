// framework/kernels/cpu/conv_filter_grad_amx.h: what the AMX filter-gradient paths
// share (conv_filter_grad.h says when each runs): the tile configuration, the
// process's permission to use the tiles, the pair interleave of AMX's VNNI layout, the
// calling thread's scratch, the position reduction (conv_filter_grad_amx.cc) as a sum
// over some of the images, and the sums' final write. Internal to
// conv_filter_grad_amx.cc, conv_filter_grad_amx_images.cc and
// conv_filter_grad_amx_unfolded.cc.
#ifndef TANDEM_FRAMEWORK_KERNELS_CPU_CONV_FILTER_GRAD_AMX_H_
#define TANDEM_FRAMEWORK_KERNELS_CPU_CONV_FILTER_GRAD_AMX_H_

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "framework/kernels/cpu/bf16_convert.h"
#include "framework/kernels/cpu/conv_filter_grad.h"

namespace tandem::nn::amx {

inline int64_t RoundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// Loads (stores) the block's MR x NR C tiles, tile 2r + s at c[r][s] with rows of
// `stride` bytes.
template <int MR, int NR>
__attribute__((target("amx-tile"))) inline void LoadCTiles(float* const (&c)[2][2],
                                                           int64_t stride) {
  _tile_loadd(0, c[0][0], stride);
  if constexpr (NR == 2) _tile_loadd(1, c[0][1], stride);
  if constexpr (MR == 2) _tile_loadd(2, c[1][0], stride);
  if constexpr (MR == 2 && NR == 2) _tile_loadd(3, c[1][1], stride);
}
template <int MR, int NR>
__attribute__((target("amx-tile"))) inline void StoreCTiles(float* const (&c)[2][2],
                                                            int64_t stride) {
  _tile_stored(0, c[0][0], stride);
  if constexpr (NR == 2) _tile_stored(1, c[0][1], stride);
  if constexpr (MR == 2) _tile_stored(2, c[1][0], stride);
  if constexpr (MR == 2 && NR == 2) _tile_stored(3, c[1][1], stride);
}

// Calls f(MR, NR) with std::integral_constants for a block of MR x NR C tiles: 2 rows of
// tiles where `two_rows`, else 1, and likewise columns (the AccumulateBlock templates).
template <typename F>
void WithBlockShape(bool two_rows, bool two_cols, const F& f) {
  using One = std::integral_constant<int, 1>;
  using Two = std::integral_constant<int, 2>;
  if (two_rows && two_cols) {
    f(Two{}, Two{});
  } else if (two_rows) {
    f(Two{}, One{});
  } else if (two_cols) {
    f(One{}, Two{});
  } else {
    f(One{}, One{});
  }
}

// Positions an image adds up in the position reduction: its output rows on the
// zero-padded plane, ow + kw - 1 positions each, rounded up to one tile's 32.
inline int64_t PositionsPerImage(const FilterGradGeometry& g) {
  return RoundUp(g.oh * (g.ow + g.kw - 1), 32);
}

// Rows a and b (n values each; null: zeros) interleaved into [16][2] per block of 16:
// block k at dst + k * block_stride, for n_pad (a multiple of 16) values.
__attribute__((target("avx512f,avx512bw"))) inline void InterleavePair(const uint16_t* a,
                                                                       const uint16_t* b, int64_t n,
                                                                       int64_t n_pad, uint16_t* dst,
                                                                       int64_t block_stride) {
  const __m512i first = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40,
                                         8, 39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  const __m512i second = _mm512_add_epi16(first, _mm512_set1_epi16(16));
  for (int64_t ch = 0; ch < n_pad; ch += 32) {
    const int64_t valid = std::min<int64_t>(32, n - ch);
    const __mmask32 m = valid >= 32 ? ~0u : valid <= 0 ? 0u : (1u << valid) - 1;
    const __m512i va = a != nullptr ? _mm512_maskz_loadu_epi16(m, a + ch) : _mm512_setzero_si512();
    const __m512i vb = b != nullptr ? _mm512_maskz_loadu_epi16(m, b + ch) : _mm512_setzero_si512();
    _mm512_storeu_si512(dst + ch / 16 * block_stride, _mm512_permutex2var_epi16(va, first, vb));
    if (n_pad - ch >= 32) {
      _mm512_storeu_si512(dst + (ch / 16 + 1) * block_stride,
                          _mm512_permutex2var_epi16(va, second, vb));
    }
  }
}

// The 64-byte tile configuration: palette 1, tiles 0-7 of 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t bytes_per_row[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

__attribute__((target("amx-tile"))) inline void LoadTileConfig() {
  static const TileConfig config;
  // GCC 12's _tile_loadconfig declares an 8-byte operand, which lets the compiler drop
  // stores to the rest of a local block; the whole block is the operand here.
  __asm__ volatile("ldtilecfg %0" ::"m"(config));
}

__attribute__((target("amx-tile"))) inline void ReleaseTiles() { _tile_release(); }

// Whether this CPU and kernel let the process use AMX bf16 tiles (asked once).
inline bool ProcessHasAmx() {
  static const bool has = [] {
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    const bool amx_bf16 = (edx >> 22) & 1, amx_tile = (edx >> 24) & 1;
    if (!amx_bf16 || !amx_tile) return false;
    // Linux hands out the tile data state only on request (ARCH_REQ_XCOMP_PERM for
    // XFEATURE_XTILEDATA, feature 18).
    constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
  }();
  return has;
}

// Grow-only scratch of the calling thread, reused step after step, 64-byte aligned.
struct AmxScratch {
  std::vector<uint16_t> input, grad;
  std::vector<float> acc;
  template <typename T>
  static T* Aligned(std::vector<T>* v, int64_t n) {
    v->resize(n + 64 / sizeof(T));
    return reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(v->data()) + 63) & ~uintptr_t{63});
  }
};

// Images [first, first + count) of `x` [n,h,w,c] and `dy` [n,oh,ow,o] (bfloat16 bits)
// summed along their output positions (conv_filter_grad_amx.cc) into `sum`, float32 in
// dW's layout [kh * kw * c][o], on the calling thread's OpenMP team.
void SumAlongPositions(const FilterGradGeometry& g, const uint16_t* x, const uint16_t* dy,
                       int64_t first, int64_t count, float* sum);

// Writes float32 sums in dW's layout into `out` (as many elements), float32 or rounded
// to bfloat16 once.
inline void WriteFilterGrad(const std::vector<float>& sum, Tensor* out) {
  const int64_t n = static_cast<int64_t>(sum.size());
  if (out->dtype() == DType::kBFloat16) {
    NarrowToBf16(sum.data(), out->data<bfloat16>(), n);
  } else {
    std::memcpy(out->data<float>(), sum.data(), n * sizeof(float));
  }
}

}  // namespace tandem::nn::amx

#endif  // TANDEM_FRAMEWORK_KERNELS_CPU_CONV_FILTER_GRAD_AMX_H_

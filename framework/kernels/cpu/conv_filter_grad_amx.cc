// framework/kernels/cpu/conv_filter_grad_amx.cc: the filter gradient of a bfloat16
// convolution with stride 1 and no dilation on AMX tiles (see conv_filter_grad.h).
//
// The reduction runs along output positions. Each image's input is copied into one
// zero-padded plane per channel, pw = ow + kw - 1 wide, so that tap (i, j) of output
// position p = y * pw + x reads plane[p + i * pw + j]: for every tap, 32 consecutive
// positions are 32 consecutive bf16 values of a plane, one row of an A tile (16
// channels, 32 positions). Columns x >= ow of that numbering are not output positions;
// the output gradient is zero there, so they add nothing (an infinite input value would
// add 0 * inf = NaN to its neighbours' taps, where the other paths add only its own
// products). The output gradient is interleaved in position pairs ([p / 2][o][2], AMX's
// VNNI layout for B tiles, 32 positions by 16 output channels).
//
// C tiles are 16 input channels of one tap by 16 output channels, in blocks of 2 x 2
// tiles kept in tile registers across a few images' positions. The blocks are split
// over the OpenMP team; each block is summed by one thread in image and position order,
// so the bits do not depend on the thread count.
#include <cpuid.h>
#include <immintrin.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "dnnl.hpp"
#include "framework/kernels/cpu/bf16_convert.h"
#include "framework/kernels/cpu/conv_filter_grad.h"

namespace tandem::nn {
namespace {

int64_t RoundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// The operands' layouts, in bf16 elements.
struct Layout {
  int64_t pw;     // plane row length: ow + kw - 1
  int64_t p;      // positions summed per image: oh * pw rounded up to 32
  int64_t plane;  // one channel's plane: every tap of every position, rounded up to 32
  int64_t c_pad, o_pad;
  int64_t image_x, image_dy;  // one image's planes and interleaved gradient
  Layout(const FilterGradGeometry& g)
      : pw(g.ow + g.kw - 1),
        p(RoundUp(g.oh * pw, 32)),
        plane(RoundUp(p + (g.kh - 1) * pw + g.kw - 1, 32)),
        c_pad(RoundUp(g.c, 16)),
        o_pad(RoundUp(g.o, 16)),
        image_x(c_pad * plane),
        image_dy(p * o_pad) {}
};

// Image b's input as zero-padded planes [c_pad][plane]: plane row r holds input row
// r - pad_top, column q input column q - pad_left.
void FillPlanes(const FilterGradGeometry& g, const Layout& l, const uint16_t* x, int64_t b,
                uint16_t* planes) {
  std::memset(planes, 0, l.image_x * sizeof(uint16_t));
  for (int64_t r = 0; r < g.oh + g.kh - 1; ++r) {
    const int64_t iy = r - g.pad_top;
    if (iy < 0 || iy >= g.h) continue;
    for (int64_t q = std::max<int64_t>(0, g.pad_left); q < std::min(l.pw, g.w + g.pad_left); ++q) {
      const uint16_t* src = x + ((b * g.h + iy) * g.w + q - g.pad_left) * g.c;
      uint16_t* dst = planes + r * l.pw + q;
      for (int64_t ch = 0; ch < g.c; ++ch) dst[ch * l.plane] = src[ch];
    }
  }
}

// Rows a and b of the output gradient (o channels each; null: zeros) interleaved into
// [o_pad][2] at dst.
__attribute__((target("avx512f,avx512bw"))) void InterleavePair(const uint16_t* a,
                                                                const uint16_t* b, int64_t o,
                                                                int64_t o_pad, uint16_t* dst) {
  const __m512i first = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40,
                                         8, 39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  const __m512i second = _mm512_add_epi16(first, _mm512_set1_epi16(16));
  for (int64_t ch = 0; ch < o_pad; ch += 32) {
    const int64_t valid = std::min<int64_t>(32, o - ch);
    const __mmask32 m = valid >= 32 ? ~0u : valid <= 0 ? 0u : (1u << valid) - 1;
    const __m512i va = a != nullptr ? _mm512_maskz_loadu_epi16(m, a + ch) : _mm512_setzero_si512();
    const __m512i vb = b != nullptr ? _mm512_maskz_loadu_epi16(m, b + ch) : _mm512_setzero_si512();
    _mm512_storeu_si512(dst + 2 * ch, _mm512_permutex2var_epi16(va, first, vb));
    if (o_pad - ch >= 32) {
      _mm512_storeu_si512(dst + 2 * ch + 32, _mm512_permutex2var_epi16(va, second, vb));
    }
  }
}

// Image b's output gradient as [p / 2][o_pad][2], zero where p is not an output
// position.
void InterleaveGrad(const FilterGradGeometry& g, const Layout& l, const uint16_t* dy, int64_t b,
                    uint16_t* dst) {
  const uint16_t* image = dy + b * g.oh * g.ow * g.o;
  auto row = [&](int64_t p) -> const uint16_t* {
    const int64_t y = p / l.pw, x = p % l.pw;
    return y < g.oh && x < g.ow ? image + (y * g.ow + x) * g.o : nullptr;
  };
  for (int64_t p = 0; p < l.p; p += 2)
    InterleavePair(row(p), row(p + 1), g.o, l.o_pad, dst + p * l.o_pad);
}

// The 64-byte tile configuration: palette 1, tiles 0-7 of 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t bytes_per_row[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

__attribute__((target("amx-tile"))) void LoadTileConfig() {
  static const TileConfig config;
  // GCC 12's _tile_loadconfig declares an 8-byte operand, which lets the compiler drop
  // stores to the rest of a local block; the whole block is the operand here.
  __asm__ volatile("ldtilecfg %0" ::"m"(config));
}

__attribute__((target("amx-tile"))) void ReleaseTiles() { _tile_release(); }

// Adds images [b0, b1)'s products into the MR x NR C tiles of M tiles mt.. and N tiles
// nt.. of acc [kh * kw][c_pad][o_pad]. Tiles 0-3: C; 4-5: A; 6-7: B.
template <int MR, int NR>
__attribute__((target("amx-tile,amx-bf16"))) void AccumulateBlock(
    const FilterGradGeometry& g, const Layout& l, const uint16_t* planes, const uint16_t* grad,
    int64_t b0, int64_t b1, int64_t mt, int64_t nt, float* acc) {
  const int64_t channel_blocks = l.c_pad / 16;
  const uint16_t* a[2];
  float* c[2][2];
  for (int r = 0; r < MR; ++r) {
    const int64_t tap = (mt + r) / channel_blocks, ch = (mt + r) % channel_blocks * 16;
    a[r] = planes + ch * l.plane + tap / g.kw * l.pw + tap % g.kw;
    for (int s = 0; s < NR; ++s) c[r][s] = acc + (tap * l.c_pad + ch) * l.o_pad + (nt + s) * 16;
  }
  const int64_t c_stride = l.o_pad * 4, a_stride = l.plane * 2, b_stride = l.o_pad * 4;
  _tile_loadd(0, c[0][0], c_stride);
  if constexpr (NR == 2) _tile_loadd(1, c[0][1], c_stride);
  if constexpr (MR == 2) _tile_loadd(2, c[1][0], c_stride);
  if constexpr (MR == 2 && NR == 2) _tile_loadd(3, c[1][1], c_stride);
  for (int64_t b = b0; b < b1; ++b) {
    const uint16_t* a0 = a[0] + b * l.image_x;
    const uint16_t* a1 = a[MR - 1] + b * l.image_x;
    const uint16_t* bb = grad + b * l.image_dy + nt * 32;
    for (int64_t p0 = 0; p0 < l.p; p0 += 32) {
      const uint16_t* bp = bb + p0 * l.o_pad;
      _tile_loadd(4, a0 + p0, a_stride);
      _tile_loadd(6, bp, b_stride);
      _tile_dpbf16ps(0, 4, 6);
      if constexpr (NR == 2) {
        _tile_loadd(7, bp + 32, b_stride);
        _tile_dpbf16ps(1, 4, 7);
      }
      if constexpr (MR == 2) {
        _tile_loadd(5, a1 + p0, a_stride);
        _tile_dpbf16ps(2, 5, 6);
        if constexpr (NR == 2) _tile_dpbf16ps(3, 5, 7);
      }
    }
  }
  _tile_stored(0, c[0][0], c_stride);
  if constexpr (NR == 2) _tile_stored(1, c[0][1], c_stride);
  if constexpr (MR == 2) _tile_stored(2, c[1][0], c_stride);
  if constexpr (MR == 2 && NR == 2) _tile_stored(3, c[1][1], c_stride);
}

// Whether this CPU and kernel let the process use AMX bf16 tiles (asked once).
bool ProcessHasAmx() {
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

// Images summed by every block before the next images: their planes and gradient stay
// in the core's caches across its blocks (fashion_cnn's second layer, 128 images, AMX
// Xeon, 2 threads: 7.6-8.1 ms at 8 images or 1, 13.4 with all 128, oneDNN's kernel 10.1
// ms in the same minutes).
constexpr int64_t kImagesPerPass = 8;

// Grow-only scratch of the calling thread, reused step after step.
struct AmxScratch {
  std::vector<uint16_t> planes, grad;
  std::vector<float> acc;
};

}  // namespace

bool AmxFilterGradApplies(const FilterGradGeometry& g) {
  return g.stride_h == 1 && g.stride_w == 1 && g.dilation_h == 1 && g.dilation_w == 1;
}

bool AmxFilterGradIsAvailable() {
  // oneDNN's ISA cap (ONEDNN_MAX_CPU_ISA) caps this path too.
  return dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx512_core_amx && ProcessHasAmx();
}

absl::Status FilterGradAmx(const FilterGradGeometry& g, const Tensor& input, const Tensor& grad,
                           Tensor* out) {
  if (input.dtype() != DType::kBFloat16 || grad.dtype() != DType::kBFloat16) {
    return absl::InternalError("the AMX filter gradient takes bfloat16 operands");
  }
  const Layout l(g);
  thread_local AmxScratch scratch;  // The team's threads see it through these pointers.
  scratch.planes.resize(g.n * l.image_x);
  scratch.grad.resize(g.n * l.image_dy);
  scratch.acc.assign(g.kh * g.kw * l.c_pad * l.o_pad, 0.0f);
  uint16_t* const planes = scratch.planes.data();
  uint16_t* const interleaved = scratch.grad.data();
  float* const acc = scratch.acc.data();
  const auto* x = reinterpret_cast<const uint16_t*>(input.data<bfloat16>());
  const auto* dy = reinterpret_cast<const uint16_t*>(grad.data<bfloat16>());
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < g.n; ++b) {
    FillPlanes(g, l, x, b, planes + b * l.image_x);
    InterleaveGrad(g, l, dy, b, interleaved + b * l.image_dy);
  }
  const int64_t m_tiles = g.kh * g.kw * l.c_pad / 16, n_tiles = l.o_pad / 16;
  const int64_t n_blocks = (n_tiles + 1) / 2, blocks = (m_tiles + 1) / 2 * n_blocks;
  const int threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), blocks));
#pragma omp parallel num_threads(threads)
  {
    LoadTileConfig();
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    for (int64_t b0 = 0; b0 < g.n; b0 += kImagesPerPass) {
      const int64_t b1 = std::min(g.n, b0 + kImagesPerPass);
      for (int64_t k = blocks * t / nt; k < blocks * (t + 1) / nt; ++k) {
        const int64_t mt = k / n_blocks * 2, ntile = k % n_blocks * 2;
        const bool two_m = mt + 1 < m_tiles, two_n = ntile + 1 < n_tiles;
        if (two_m && two_n) {
          AccumulateBlock<2, 2>(g, l, planes, interleaved, b0, b1, mt, ntile, acc);
        } else if (two_m) {
          AccumulateBlock<2, 1>(g, l, planes, interleaved, b0, b1, mt, ntile, acc);
        } else if (two_n) {
          AccumulateBlock<1, 2>(g, l, planes, interleaved, b0, b1, mt, ntile, acc);
        } else {
          AccumulateBlock<1, 1>(g, l, planes, interleaved, b0, b1, mt, ntile, acc);
        }
      }
    }
    ReleaseTiles();
  }
  // dW [kh, kw, c, o] from acc [kh * kw][c_pad][o_pad].
  const bool bf16_out = out->dtype() == DType::kBFloat16;
  for (int64_t tap = 0; tap < g.kh * g.kw; ++tap) {
    for (int64_t ch = 0; ch < g.c; ++ch) {
      const float* src = acc + (tap * l.c_pad + ch) * l.o_pad;
      const int64_t at = (tap * g.c + ch) * g.o;
      if (bf16_out) {
        NarrowToBf16(src, out->data<bfloat16>() + at, g.o);
      } else {
        std::memcpy(out->data<float>() + at, src, g.o * sizeof(float));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::nn

// framework/kernels/cpu/conv_filter_grad_amx.cc: the filter gradient of a bfloat16
// convolution with stride 1 and no dilation on AMX tiles, reduced along each image's
// output positions (see conv_filter_grad.h; conv_filter_grad_amx_images.cc reduces
// along the batch).
//
// dW[tap][ch][o] is computed transposed, C[o][ch] per tap, with the reduction along
// output positions. Positions are numbered on the zero-padded input plane, pw = ow +
// kw - 1 wide: output position (y, x) is p = y * pw + x, and tap (i, j) of it reads
// plane position p + i * pw + j. Columns x >= ow of that numbering are not output
// positions; the output gradient is zero there, so they add nothing (an infinite input
// value would add 0 * inf = NaN to its neighbours' taps, where the other paths add only
// its own products).
//  - A tiles (16 output channels by 32 positions) are rows of the output gradient laid
//    out per channel, [o_pad][p].
//  - B tiles (32 positions by 16 input channels, in AMX's pairs-of-rows VNNI layout) are
//    64 consecutive bytes per pair of positions: the input is stored twice, interleaved
//    in position pairs starting at even and at odd positions, per block of 16 channels,
//    so that every tap's tile is 1 KB of contiguous, aligned memory.
// C tiles are kept in tile registers across a few images' positions, in blocks of 2 x 2
// tiles (two 16-channel blocks of output channels by two tap and input-channel blocks).
// The blocks are split over the OpenMP team; each block is summed by one thread in image
// and position order, so the bits do not depend on the thread count.
#include "framework/kernels/cpu/conv_filter_grad_amx.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "dnnl.hpp"
#include "framework/kernels/cpu/bf16_convert.h"
#include "framework/kernels/cpu/conv_filter_grad.h"

namespace tandem::nn {
namespace {

using amx::AmxScratch;
using amx::InterleavePair;
using amx::RoundUp;

// The operands' layouts, in bf16 elements.
struct Layout {
  int64_t pw;     // padded plane row length: ow + kw - 1
  int64_t p;      // positions summed per image: oh * pw rounded up to 32
  int64_t pairs;  // position pairs stored per parity: every tap of every position
  int64_t c_pad, o_pad;
  int64_t image_x, image_dy;  // one image's two interleaved copies; its gradient
  explicit Layout(const FilterGradGeometry& g)
      : pw(g.ow + g.kw - 1),
        p(amx::PositionsPerImage(g)),
        pairs((p + (g.kh - 1) * pw + g.kw) / 2 + 1),
        c_pad(RoundUp(g.c, 16)),
        o_pad(RoundUp(g.o, 16)),
        image_x(2 * c_pad * pairs * 2),
        image_dy(o_pad * p) {}
  // The B tile of tap `shift` (= i * pw + j) for channel block cb, at position 0.
  int64_t TapOffset(int64_t shift, int64_t cb) const {
    const int64_t parity = shift & 1;
    return ((parity * c_pad / 16 + cb) * pairs + (shift - parity) / 2) * 32;
  }
};

// Image b's input as the two interleaved copies [parity][c_pad / 16][pairs][16][2]:
// pair m of parity e holds plane positions 2m + e and 2m + e + 1, where plane position
// q is input row q / pw - pad_top, column q % pw - pad_left (zero outside the input).
void InterleaveInput(const FilterGradGeometry& g, const Layout& l, const uint16_t* x, int64_t b,
                     uint16_t* dst) {
  auto pixel = [&](int64_t q) -> const uint16_t* {
    const int64_t iy = q / l.pw - g.pad_top, ix = q % l.pw - g.pad_left;
    if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) return nullptr;
    return x + ((b * g.h + iy) * g.w + ix) * g.c;
  };
  const int64_t block_stride = l.pairs * 32;
  for (int64_t parity = 0; parity < 2; ++parity) {
    uint16_t* copy = dst + parity * (l.c_pad / 16) * block_stride;
    for (int64_t m = 0; m < l.pairs; ++m) {
      const int64_t q = 2 * m + parity;
      InterleavePair(pixel(q), pixel(q + 1), g.c, l.c_pad, copy + m * 32, block_stride);
    }
  }
}

// Image b's output gradient per channel, [o_pad][p], zero where p is not an output
// position.
void TransposeGrad(const FilterGradGeometry& g, const Layout& l, const uint16_t* dy, int64_t b,
                   uint16_t* dst) {
  std::memset(dst, 0, l.image_dy * sizeof(uint16_t));
  for (int64_t y = 0; y < g.oh; ++y) {
    for (int64_t x = 0; x < g.ow; ++x) {
      const uint16_t* src = dy + ((b * g.oh + y) * g.ow + x) * g.o;
      uint16_t* d = dst + y * l.pw + x;
      for (int64_t o = 0; o < g.o; ++o) d[o * l.p] = src[o];
    }
  }
}

// Adds the products of the `images` images at input and grad into the MR x NR C tiles of
// output-channel tiles mt.. and tap x input-channel tiles nt.. (tile n: tap n / (c_pad / 16),
// channel block n % (c_pad / 16)) of acc [kh * kw][o_pad][c_pad]. Tiles 0-3: C; 4-5: A; 6-7: B.
template <int MR, int NR>
__attribute__((target("amx-tile,amx-bf16"))) void AccumulateBlock(
    const FilterGradGeometry& g, const Layout& l, const uint16_t* input, const uint16_t* grad,
    int64_t images, int64_t mt, int64_t nt, float* acc) {
  const int64_t channel_blocks = l.c_pad / 16;
  int64_t tap_offset[2];
  float* c[2][2];
  for (int s = 0; s < NR; ++s) {
    const int64_t tap = (nt + s) / channel_blocks, cb = (nt + s) % channel_blocks;
    tap_offset[s] = l.TapOffset(tap / g.kw * l.pw + tap % g.kw, cb);
    for (int r = 0; r < MR; ++r)
      c[r][s] = acc + (tap * l.o_pad + (mt + r) * 16) * l.c_pad + cb * 16;
  }
  const int64_t c_stride = l.c_pad * 4, a_stride = l.p * 2, b_stride = 64;
  amx::LoadCTiles<MR, NR>(c, c_stride);
  for (int64_t b = 0; b < images; ++b) {
    const uint16_t* a0 = grad + b * l.image_dy + mt * 16 * l.p;
    const uint16_t* a1 = a0 + (MR - 1) * 16 * l.p;
    const uint16_t* x0 = input + b * l.image_x + tap_offset[0];
    const uint16_t* x1 = input + b * l.image_x + tap_offset[NR - 1];
    for (int64_t p0 = 0; p0 < l.p; p0 += 32) {
      _tile_loadd(4, a0 + p0, a_stride);
      _tile_loadd(6, x0 + p0 * 16, b_stride);
      _tile_dpbf16ps(0, 4, 6);
      if constexpr (NR == 2) {
        _tile_loadd(7, x1 + p0 * 16, b_stride);
        _tile_dpbf16ps(1, 4, 7);
      }
      if constexpr (MR == 2) {
        _tile_loadd(5, a1 + p0, a_stride);
        _tile_dpbf16ps(2, 5, 6);
        if constexpr (NR == 2) _tile_dpbf16ps(3, 5, 7);
      }
    }
  }
  amx::StoreCTiles<MR, NR>(c, c_stride);
}

// Images laid out and summed by every block per pass: up to 8, and no more than fit in
// about 1 MB, so their operands stay in the cores' caches across the blocks and the
// scratch (two passes' worth, kept by the calling thread) stays bounded for large
// images (fashion_cnn's second layer, 78 KB an image, 128 images, on an AMX Xeon at 2
// threads: 8 images or 1 per pass took 0.55-0.6 of the time all 128 took; 4, 8 and 16
// measured alike).
int64_t ImagesPerPass(const Layout& l) {
  constexpr int64_t kPassBytes = 1 << 20;
  const int64_t image_bytes = (l.image_x + l.image_dy) * static_cast<int64_t>(sizeof(uint16_t));
  return std::clamp<int64_t>(kPassBytes / image_bytes, 1, 8);
}

}  // namespace

bool AmxFilterGradApplies(const FilterGradGeometry& g) {
  return g.stride_h == 1 && g.stride_w == 1 && g.dilation_h == 1 && g.dilation_w == 1;
}

bool AmxFilterGradIsAvailable() {
  // oneDNN's ISA cap (ONEDNN_MAX_CPU_ISA) caps this path too.
  return dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx512_core_amx && amx::ProcessHasAmx();
}

void amx::SumAlongPositions(const FilterGradGeometry& g, const uint16_t* x, const uint16_t* dy,
                            int64_t first, int64_t count, float* sum) {
  const Layout l(g);
  thread_local AmxScratch scratch;  // The team's threads see it through these pointers.
  // Two slots of `per_pass` images each: a pass lays out its images in one while the
  // slower threads may still read the previous pass's in the other.
  const int64_t per_pass = ImagesPerPass(l);
  const int64_t slot_x = per_pass * l.image_x, slot_dy = per_pass * l.image_dy;
  uint16_t* const xs = AmxScratch::Aligned(&scratch.input, 2 * slot_x);
  uint16_t* const dys = AmxScratch::Aligned(&scratch.grad, 2 * slot_dy);
  const int64_t taps = g.kh * g.kw;
  float* const acc = AmxScratch::Aligned(&scratch.acc, taps * l.o_pad * l.c_pad);
  std::fill_n(acc, taps * l.o_pad * l.c_pad, 0.0f);
  const int64_t m_tiles = l.o_pad / 16, n_tiles = taps * l.c_pad / 16;
  const int64_t n_blocks = (n_tiles + 1) / 2, blocks = (m_tiles + 1) / 2 * n_blocks;
  const int threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), blocks));
#pragma omp parallel num_threads(threads)
  {
    amx::LoadTileConfig();
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    for (int64_t b0 = first, pass = 0; b0 < first + count; b0 += per_pass, ++pass) {
      const int64_t images = std::min(per_pass, first + count - b0);
      uint16_t* const pass_x = xs + pass % 2 * slot_x;
      uint16_t* const pass_dy = dys + pass % 2 * slot_dy;
      // The pass's images split over the team. The barrier ending the loop orders these
      // writes after every thread's products of two passes back, which read this slot.
#pragma omp for schedule(static)
      for (int64_t i = 0; i < images; ++i) {
        InterleaveInput(g, l, x, b0 + i, pass_x + i * l.image_x);
        TransposeGrad(g, l, dy, b0 + i, pass_dy + i * l.image_dy);
      }
      for (int64_t k = blocks * t / nt; k < blocks * (t + 1) / nt; ++k) {
        const int64_t mt = k / n_blocks * 2, ntile = k % n_blocks * 2;
        const bool two_m = mt + 1 < m_tiles, two_n = ntile + 1 < n_tiles;
        amx::WithBlockShape(two_m, two_n, [&](auto mr, auto nr) {
          AccumulateBlock<mr(), nr()>(g, l, pass_x, pass_dy, images, mt, ntile, acc);
        });
      }
    }
    amx::ReleaseTiles();
  }
  // sum [kh * kw * c][o] from acc [kh * kw][o_pad][c_pad].
  for (int64_t tap = 0; tap < taps; ++tap) {
    for (int64_t ch = 0; ch < g.c; ++ch) {
      float* row = sum + (tap * g.c + ch) * g.o;
      for (int64_t o = 0; o < g.o; ++o) row[o] = acc[(tap * l.o_pad + o) * l.c_pad + ch];
    }
  }
}

absl::Status FilterGradAmx(const FilterGradGeometry& g, const Tensor& input, const Tensor& grad,
                           Tensor* out) {
  if (input.dtype() != DType::kBFloat16 || grad.dtype() != DType::kBFloat16) {
    return absl::InternalError("the AMX filter gradient takes bfloat16 operands");
  }
  const int64_t rows = g.kh * g.kw * g.c;
  std::vector<float> sum(rows * g.o);
  amx::SumAlongPositions(g, reinterpret_cast<const uint16_t*>(input.data<bfloat16>()),
                         reinterpret_cast<const uint16_t*>(grad.data<bfloat16>()), 0, g.n,
                         sum.data());
  amx::WriteFilterGrad(sum, out);
  return absl::OkStatus();
}

}  // namespace tandem::nn

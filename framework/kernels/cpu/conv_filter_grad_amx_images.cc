// framework/kernels/cpu/conv_filter_grad_amx_images.cc: the filter gradient of a
// bfloat16 convolution with stride 1 and no dilation on AMX tiles, reduced along the
// batch (see conv_filter_grad.h).
//
// C[ch][o] of tap (i, j), which is dW[i, j, ch, o] as dW is laid out, adds up the
// products of the input at plane position (y + i, x + j) and the output gradient at
// output position (y, x), 32 images at a time, one output position after another. The
// input positions are numbered on the zero-padded plane; only the oh x ow output
// positions are summed, so no padding column enters the products (the position
// reduction's do). The images past the last whole chunk of 32 are summed along
// positions (amx::SumAlongPositions) and added at the end.
//  - A tiles (16 input channels by 32 images) are one plane position of one chunk of
//    images, transposed from the input's channels-last rows.
//  - B tiles (32 images by 16 output channels, in AMX's pairs-of-rows VNNI layout) are
//    one output position's gradients of a chunk, images 2m and 2m + 1 interleaved in
//    row m.
// Each chunk is laid out by the OpenMP team into one of two scratch slots; then the
// blocks of 2 x 2 C tiles (two 16-channel blocks of input channels by two of output
// channels, of one tap) are split over the team and kept in tile registers across the
// chunk's positions. Each block is summed by one thread in chunk and position order, so
// the bits do not depend on the thread count.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "framework/kernels/cpu/bf16_convert.h"
#include "framework/kernels/cpu/conv_filter_grad.h"
#include "framework/kernels/cpu/conv_filter_grad_amx.h"

namespace tandem::nn {
namespace {

using amx::AmxScratch;
using amx::RoundUp;

constexpr int64_t kChunk = 32;  // images summed per tile product: one tile's K

// The operands of one chunk of 32 images, in bf16 elements. Input positions are numbered
// on the zero-padded plane, ph = oh + kh - 1 rows of pw = ow + kw - 1; tap (i, j) of
// output position (y, x) reads plane position (y + i) * pw + x + j.
struct ImagesLayout {
  int64_t ph, pw, c_pad, o_pad, chunk_x, chunk_dy;
  explicit ImagesLayout(const FilterGradGeometry& g)
      : ph(g.oh + g.kh - 1),
        pw(g.ow + g.kw - 1),
        c_pad(RoundUp(g.c, 16)),
        o_pad(RoundUp(g.o, 16)),
        chunk_x(ph * pw * c_pad * kChunk),
        chunk_dy(g.oh * g.ow * o_pad * kChunk) {}
  // A tiles [16 channels][32 images], 1 KB each, [plane position][c_pad / 16].
  int64_t XTile(int64_t q, int64_t cb) const { return (q * (c_pad / 16) + cb) * 512; }
  // B tiles [16 image pairs][16 output channels][2], 1 KB each, [output position][o_pad / 16].
  int64_t DyTile(int64_t p, int64_t ob) const { return (p * (o_pad / 16) + ob) * 512; }
};

// Transposes 16 rows of 16 32-bit values in place: r[i][k] becomes r[k][i]. Each stage
// swaps the off-diagonal s x s blocks of every 2s x 2s block (bit s of the row and
// column index trade places).
__attribute__((target("avx512f"))) void Transpose16x16(__m512i r[16]) {
  for (int s = 8; s >= 1; s /= 2) {
    alignas(64) int32_t low[16], high[16];
    for (int k = 0; k < 16; ++k) {
      low[k] = (k & s) != 0 ? 16 + (k ^ s) : k;  // row i keeps its columns without bit s
      high[k] = (k & s) != 0 ? 16 + k : k ^ s;   // row i + s keeps those with it
    }
    const __m512i lo = _mm512_load_si512(low), hi = _mm512_load_si512(high);
    for (int i = 0; i < 16; ++i) {
      if ((i & s) != 0) continue;
      const __m512i a = r[i], b = r[i + s];
      r[i] = _mm512_permutex2var_epi32(a, lo, b);
      r[i + s] = _mm512_permutex2var_epi32(a, hi, b);
    }
  }
}

// Up to 16 values from src + at (mask m) in the low half; zeros where src is null.
__attribute__((target("avx512f,avx512bw"))) inline __m512i Load16(const uint16_t* src, int64_t at,
                                                                  __mmask16 m) {
  if (src == nullptr) return _mm512_setzero_si512();
  return _mm512_maskz_loadu_epi16(static_cast<__mmask32>(m), src + at);
}

// Plane position q of the chunk of images b0.. (zeros outside the input) as A tiles: element (ch,
// b) at XTile(q, ch / 16) + ch % 16 * 32 + b. Per 16 channels, the images' rows are interleaved in
// pairs (16 rows of 16 pairs, 32-bit values) and the pairs transposed.
__attribute__((target("avx512f,avx512bw"))) void TransposeInputPosition(const FilterGradGeometry& g,
                                                                        const ImagesLayout& l,
                                                                        const uint16_t* x,
                                                                        int64_t b0, int64_t q,
                                                                        uint16_t* dst) {
  uint16_t* d = dst + l.XTile(q, 0);
  const int64_t iy = q / l.pw - g.pad_top, ix = q % l.pw - g.pad_left;
  if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) {
    std::memset(d, 0, l.c_pad * kChunk * sizeof(uint16_t));
    return;
  }
  const __m512i interleave =
      _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                       37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  auto row = [&](int64_t b) { return x + (((b0 + b) * g.h + iy) * g.w + ix) * g.c; };
  for (int64_t ch = 0; ch < l.c_pad; ch += 16) {
    const int64_t valid = std::min<int64_t>(16, g.c - ch);
    const __mmask16 m = valid >= 16 ? 0xffff : static_cast<__mmask16>((1u << valid) - 1);
    __m512i r[16];
    for (int64_t pair = 0; pair < 16; ++pair) {
      r[pair] = _mm512_permutex2var_epi16(Load16(row(2 * pair), ch, m), interleave,
                                          Load16(row(2 * pair + 1), ch, m));
    }
    Transpose16x16(r);
    for (int k = 0; k < 16; ++k) _mm512_storeu_si512(d + (ch + k) * kChunk, r[k]);
  }
}

// Output position p of the chunk's images as B tiles: the gradients of images 2m and
// 2m + 1 interleaved in row m.
void InterleaveGradPosition(const FilterGradGeometry& g, const ImagesLayout& l, const uint16_t* dy,
                            int64_t b0, int64_t p, uint16_t* dst) {
  auto row = [&](int64_t b) { return dy + ((b0 + b) * g.oh * g.ow + p) * g.o; };
  for (int64_t m = 0; m < kChunk / 2; ++m) {
    amx::InterleavePair(row(2 * m), row(2 * m + 1), g.o, l.o_pad, dst + l.DyTile(p, 0) + m * 32,
                        512);
  }
}

// Adds one chunk's products into the MR x NR C tiles of channel tiles cb.. and output
// tiles ob.. of tap `tap` in acc [kh * kw][c_pad][o_pad]. Tiles 0-3: C; 4-5: A; 6-7: B.
template <int MR, int NR>
__attribute__((target("amx-tile,amx-bf16"))) void AccumulateImagesBlock(
    const FilterGradGeometry& g, const ImagesLayout& l, const uint16_t* xs, const uint16_t* dys,
    int64_t tap, int64_t cb, int64_t ob, float* acc) {
  float* c[2][2];
  for (int r = 0; r < MR; ++r) {
    for (int s = 0; s < NR; ++s)
      c[r][s] = acc + (tap * l.c_pad + (cb + r) * 16) * l.o_pad + (ob + s) * 16;
  }
  const int64_t c_stride = l.o_pad * 4, stride = 64;
  const int64_t i = tap / g.kw, j = tap % g.kw;
  amx::LoadCTiles<MR, NR>(c, c_stride);
  for (int64_t y = 0; y < g.oh; ++y) {
    const uint16_t* a = xs + l.XTile((y + i) * l.pw + j, cb);
    const uint16_t* b = dys + l.DyTile(y * g.ow, ob);
    const int64_t a_step = l.c_pad * kChunk, b_step = l.o_pad * kChunk;
    for (int64_t x = 0; x < g.ow; ++x, a += a_step, b += b_step) {
      _tile_loadd(4, a, stride);
      _tile_loadd(6, b, stride);
      _tile_dpbf16ps(0, 4, 6);
      if constexpr (NR == 2) {
        _tile_loadd(7, b + 512, stride);
        _tile_dpbf16ps(1, 4, 7);
      }
      if constexpr (MR == 2) {
        _tile_loadd(5, a + 512, stride);
        _tile_dpbf16ps(2, 5, 6);
        if constexpr (NR == 2) _tile_dpbf16ps(3, 5, 7);
      }
    }
  }
  amx::StoreCTiles<MR, NR>(c, c_stride);
}

}  // namespace

bool AmxImagesReductionIsSmaller(const FilterGradGeometry& g) {
  const ImagesLayout images(g);
  const int64_t chunk_bytes = (images.chunk_x + images.chunk_dy) * 2;
  return g.n >= kChunk && g.oh * g.ow < amx::PositionsPerImage(g) && chunk_bytes <= (2 << 20);
}

absl::Status FilterGradAmxByImages(const FilterGradGeometry& g, const Tensor& input,
                                   const Tensor& grad, Tensor* out) {
  if (input.dtype() != DType::kBFloat16 || grad.dtype() != DType::kBFloat16) {
    return absl::InternalError("the AMX filter gradient takes bfloat16 operands");
  }
  const ImagesLayout l(g);
  const int64_t chunked = g.n / kChunk * kChunk;  // the rest by positions
  thread_local AmxScratch scratch;
  // Two chunk slots, as in FilterGradAmx: a chunk is laid out in one while the slower
  // threads may still read the previous chunk's in the other.
  uint16_t* const xs = AmxScratch::Aligned(&scratch.input, 2 * l.chunk_x);
  uint16_t* const dys = AmxScratch::Aligned(&scratch.grad, 2 * l.chunk_dy);
  const int64_t taps = g.kh * g.kw;
  float* const acc = AmxScratch::Aligned(&scratch.acc, taps * l.c_pad * l.o_pad);
  std::fill_n(acc, taps * l.c_pad * l.o_pad, 0.0f);
  const auto* x = reinterpret_cast<const uint16_t*>(input.data<bfloat16>());
  const auto* dy = reinterpret_cast<const uint16_t*>(grad.data<bfloat16>());
  const int64_t c_tiles = l.c_pad / 16, o_tiles = l.o_pad / 16;
  const int64_t c_blocks = (c_tiles + 1) / 2, o_blocks = (o_tiles + 1) / 2;
  const int64_t blocks = taps * c_blocks * o_blocks;
  const int64_t planes = l.ph * l.pw, positions = g.oh * g.ow;
  const int threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), blocks));
#pragma omp parallel num_threads(threads) if (chunked > 0)
  {
    amx::LoadTileConfig();
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    for (int64_t b0 = 0, chunk = 0; b0 < chunked; b0 += kChunk, ++chunk) {
      uint16_t* const chunk_x = xs + chunk % 2 * l.chunk_x;
      uint16_t* const chunk_dy = dys + chunk % 2 * l.chunk_dy;
#pragma omp for schedule(static)
      for (int64_t k = 0; k < planes + positions; ++k) {
        if (k < planes) {
          TransposeInputPosition(g, l, x, b0, k, chunk_x);
        } else {
          InterleaveGradPosition(g, l, dy, b0, k - planes, chunk_dy);
        }
      }
      for (int64_t k = blocks * t / nt; k < blocks * (t + 1) / nt; ++k) {
        const int64_t tap = k / (c_blocks * o_blocks);
        const int64_t cb = k / o_blocks % c_blocks * 2, ob = k % o_blocks * 2;
        const bool two_c = cb + 1 < c_tiles, two_o = ob + 1 < o_tiles;
        amx::WithBlockShape(two_c, two_o, [&](auto mr, auto nr) {
          AccumulateImagesBlock<mr(), nr()>(g, l, chunk_x, chunk_dy, tap, cb, ob, acc);
        });
      }
    }
    amx::ReleaseTiles();
  }
  // dW [kh, kw, c, o]: acc [kh * kw][c_pad][o_pad] plus the rest's sums.
  std::vector<float> sum(taps * g.c * g.o, 0.0f);
  if (chunked < g.n) amx::SumAlongPositions(g, x, dy, chunked, g.n - chunked, sum.data());
  for (int64_t tap = 0; tap < taps; ++tap) {
    for (int64_t ch = 0; ch < g.c; ++ch) {
      const float* row = acc + (tap * l.c_pad + ch) * l.o_pad;
      float* dst = sum.data() + (tap * g.c + ch) * g.o;
      for (int64_t o = 0; o < g.o; ++o) dst[o] = row[o] + dst[o];
    }
  }
  amx::WriteFilterGrad(sum, out);
  return absl::OkStatus();
}
}  // namespace tandem::nn

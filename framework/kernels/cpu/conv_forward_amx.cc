// framework/kernels/cpu/conv_forward_amx.cc: see the header.
#include "framework/kernels/cpu/conv_forward_amx.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/kernels/cpu/bf16_convert.h"
#include "framework/kernels/cpu/conv_filter_grad_amx.h"
#include "framework/kernels/cpu/parallel.h"
#include "framework/kernels/cpu/pool_2x2.h"

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_* as the masked-off source, which
// -Wmaybe-uninitialized takes for an uninitialized read.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace tandem::nn {
namespace {

using amx::RoundUp;

// One image's operands, in bfloat16 elements.
struct ForwardLayout {
  int64_t kwc;      // one plane row's taps: kw * c
  int64_t kwc_pad;  // rounded up to a pair
  int64_t taps;     // one output position's run of S: kh * kwc_pad
  int64_t rows;     // padded-plane rows the outputs read: oh + kh - 1
  int64_t ow_pad;   // output columns, rounded up to an A tile's 16 rows
  int64_t plane_w;  // padded-plane columns: ow_pad + kw - 1
  int64_t o_pad;    // output channels, rounded up to a tile's 16
  explicit ForwardLayout(const FilterGradGeometry& g)
      : kwc(g.kw * g.c),
        kwc_pad(RoundUp(kwc, 2)),
        taps(g.kh * kwc_pad),
        rows(g.oh + g.kh - 1),
        ow_pad(RoundUp(g.ow, 16)),
        plane_w(ow_pad + g.kw - 1),
        o_pad(RoundUp(g.o, 16)) {}
  int64_t column() const { return rows * kwc_pad; }  // S's elements per output column
  int64_t runs() const { return ow_pad * column(); }
};

// The tile configuration: tiles 0-1 C (16 positions x 16 float32 channels), 2 A (16
// positions x taps), 3-4 B (taps / 2 pair rows x 16 channels x 2).
struct alignas(64) ForwardTileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

__attribute__((target("amx-tile"))) void LoadForwardTileConfig(int64_t taps) {
  ForwardTileConfig config;
  for (int t : {0, 1, 3, 4}) config.bytes_per_row[t] = 64;
  config.rows[0] = config.rows[1] = 16;
  config.bytes_per_row[2] = static_cast<uint16_t>(taps * 2);
  config.rows[2] = 16;
  config.rows[3] = config.rows[4] = static_cast<uint8_t>(taps / 2);
  // As amx::LoadTileConfig: the whole block is the operand (GCC 12's intrinsic
  // declares 8 bytes).
  __asm__ volatile("ldtilecfg %0" ::"m"(config));
}

// The filter [kh][kw][c][o] as B tiles [o_pad / 16][taps / 2][16][2]: tap
// i * kwc_pad + j * c + ch of a position's run, zero at the padding tap and at channels
// from o on.
std::vector<uint16_t> FilterTiles(const FilterGradGeometry& g, const ForwardLayout& l,
                                  const uint16_t* w) {
  std::vector<uint16_t> b(l.o_pad / 16 * l.taps * 16, 0);
  for (int64_t i = 0; i < g.kh; ++i) {
    for (int64_t jc = 0; jc < l.kwc; ++jc) {
      const int64_t t = i * l.kwc_pad + jc;
      const uint16_t* src = w + (i * l.kwc + jc) * g.o;
      for (int64_t oc = 0; oc < g.o; ++oc) {
        b[(oc / 16) * l.taps * 16 + (t / 2) * 32 + (oc % 16) * 2 + t % 2] = src[oc];
      }
    }
  }
  return b;
}

// Image b's zero-padded input plane at `plane` [rows][plane_w][c], and its runs at `s`
// [ow_pad][rows][kwc_pad]: s[x][r] holds plane row r from column x on (kw * c values)
// and a zero where kwc is odd.
__attribute__((target("avx512f,avx512bw"))) void LayOutImage(const FilterGradGeometry& g,
                                                             const ForwardLayout& l,
                                                             const uint16_t* x, int64_t b,
                                                             uint16_t* plane, uint16_t* s) {
  std::memset(plane, 0, l.rows * l.plane_w * g.c * sizeof(uint16_t));
  const int64_t x0 = std::max<int64_t>(0, g.pad_left);
  const int64_t x1 = std::min(l.plane_w, g.w + g.pad_left);
  for (int64_t r = 0; r < l.rows && x0 < x1; ++r) {
    const int64_t iy = r - g.pad_top;
    if (iy < 0 || iy >= g.h) continue;
    std::memcpy(plane + (r * l.plane_w + x0) * g.c,
                x + ((b * g.h + iy) * g.w + x0 - g.pad_left) * g.c,
                (x1 - x0) * g.c * sizeof(uint16_t));
  }
  const __mmask32 load = l.kwc >= 32 ? ~0u : (1u << l.kwc) - 1;
  const __mmask32 store = l.kwc_pad >= 32 ? ~0u : (1u << l.kwc_pad) - 1;
  for (int64_t xo = 0; xo < l.ow_pad; ++xo) {
    for (int64_t r = 0; r < l.rows; ++r) {
      const __m512i v = _mm512_maskz_loadu_epi16(load, plane + (r * l.plane_w + xo) * g.c);
      _mm512_mask_storeu_epi16(s + (xo * l.rows + r) * l.kwc_pad, store, v);
    }
  }
}

// Writes `count` positions of the C block `c` [16][32] (channels og * 16 .. of the
// pair of tiles) plus bias, through the ReLU where asked, rounded to bfloat16 (nearest
// even, NaNs kept; VCVTNE2PS2BF16 flushes denormals, as the kernels' threads do anyway),
// into rows of `out` (o channels each) from `dst`.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void WriteBlock(
    const float* c, int64_t count, const float* bias, bool relu, int64_t channels, int64_t o,
    uint16_t* dst) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512 b0 = _mm512_loadu_ps(bias), b1 = _mm512_loadu_ps(bias + 16);
  const __mmask32 mask = channels >= 32 ? ~0u : (1u << channels) - 1;
  for (int64_t p = 0; p < count; ++p, dst += o) {
    __m512 v0 = _mm512_add_ps(_mm512_load_ps(c + p * 32), b0);
    __m512 v1 = _mm512_add_ps(_mm512_load_ps(c + p * 32 + 16), b1);
    if (relu) {  // max(0, v): a NaN stays NaN
      v0 = _mm512_max_ps(zero, v0);
      v1 = _mm512_max_ps(zero, v1);
    }
    _mm512_mask_storeu_epi16(dst, mask, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(v1, v0)));
  }
}

// One image's output: for each pair of 16-channel groups, every row's blocks of 16
// positions, one A tile and a product per group each.
__attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16"))) void
ConvolveImage(const FilterGradGeometry& g, const ForwardLayout& l, const uint16_t* s,
              const uint16_t* b, const float* bias, bool relu, float* c, uint16_t* out) {
  const int64_t groups = l.o_pad / 16, a_stride = l.column() * sizeof(uint16_t);
  for (int64_t og = 0; og < groups; og += 2) {
    const bool two = og + 1 < groups;
    _tile_loadd(3, b + og * l.taps * 16, 64);
    if (two) _tile_loadd(4, b + (og + 1) * l.taps * 16, 64);
    const int64_t channels = std::min<int64_t>(g.o - og * 16, 32);
    for (int64_t y = 0; y < g.oh; ++y) {
      for (int64_t x0 = 0; x0 < g.ow; x0 += 16) {
        _tile_zero(0);
        _tile_loadd(2, s + (x0 * l.rows + y) * l.kwc_pad, a_stride);
        _tile_dpbf16ps(0, 2, 3);
        _tile_stored(0, c, 32 * sizeof(float));
        if (two) {
          _tile_zero(1);
          _tile_dpbf16ps(1, 2, 4);
          _tile_stored(1, c + 16, 32 * sizeof(float));
        }
        WriteBlock(c, std::min<int64_t>(16, g.ow - x0), bias + og * 16, relu, channels, g.o,
                   out + (y * g.ow + x0) * g.o + og * 16);
      }
    }
  }
}

// A thread's scratch: the padded plane, the runs, one C block and, where the output is
// not kept, one image of it; grow-only.
struct ForwardScratch {
  std::vector<uint16_t> plane, runs, image;
  std::vector<float> c;
};

}  // namespace

bool AmxForwardConvApplies(const FilterGradGeometry& g) {
  return g.stride_h == 1 && g.stride_w == 1 && g.dilation_h == 1 && g.dilation_w == 1 &&
         ForwardLayout(g).taps <= kMaxAmxForwardTaps;
}

absl::StatusOr<bool> ForwardConvByAmx(const FilterGradGeometry& g) {
  TANDEM_ASSIGN_OR_RETURN(const std::string choice,
                          KernelChoiceFromEnv("TANDEM_CONV_FORWARD", {"onednn", "amx"}));
  return choice != "onednn" && AmxForwardConvApplies(g) && AmxForwardConvIsAvailable();
}

bool AmxForwardConvIsAvailable() {
  return AmxFilterGradIsAvailable() && __builtin_cpu_supports("avx512bf16");
}

absl::Status ConvForwardAmx(const FilterGradGeometry& g, const Tensor& input, const Tensor& filter,
                            const Tensor* bias, bool relu, Tensor* out, Tensor* pooled,
                            Tensor* argmax) {
  const ForwardLayout l(g);
  const auto* x = reinterpret_cast<const uint16_t*>(input.raw_data());
  const std::vector<uint16_t> b =
      FilterTiles(g, l, reinterpret_cast<const uint16_t*>(filter.raw_data()));
  std::vector<float> bias_f(l.o_pad + 16, 0.0f);  // read 32 channels at a time
  if (bias != nullptr) WidenBf16(bias->data<bfloat16>(), bias_f.data(), g.o);
  auto* y = out == nullptr ? nullptr : reinterpret_cast<uint16_t*>(out->raw_data());
  auto* pool = pooled == nullptr ? nullptr : reinterpret_cast<uint16_t*>(pooled->raw_data());
  const int64_t ph = pooled == nullptr ? 0 : pooled->dim(1),
                pw = pooled == nullptr ? 0 : pooled->dim(2);
  uint8_t* codes = argmax == nullptr ? nullptr : argmax->data<uint8_t>();
  const int64_t row = g.ow * g.o, image = g.oh * row;
  OmpParallelFor(g.n, 1, [&](int64_t begin, int64_t end) {
    thread_local ForwardScratch scratch;
    uint16_t* plane = amx::AmxScratch::Aligned(&scratch.plane, l.rows * l.plane_w * g.c + 32);
    uint16_t* runs = amx::AmxScratch::Aligned(&scratch.runs, l.runs() + 32);
    float* c = amx::AmxScratch::Aligned(&scratch.c, 16 * 32);
    // Where the output is not kept, each image's goes to the thread's scratch.
    uint16_t* own = y == nullptr ? amx::AmxScratch::Aligned(&scratch.image, image) : nullptr;
    LoadForwardTileConfig(l.taps);
    for (int64_t i = begin; i < end; ++i) {
      LayOutImage(g, l, x, i, plane, runs);
      uint16_t* yi = y != nullptr ? y + i * image : own;
      ConvolveImage(g, l, runs, b.data(), bias_f.data(), relu, c, yi);
      // The image's pool while its output is in cache.
      for (int64_t py = 0; py < ph; ++py) {
        const uint16_t* r0 = yi + 2 * py * row;
        const int64_t at = (i * ph + py) * pw * g.o;
        if (codes != nullptr) {
          MaxPoolArgmax2x2Row(r0, r0 + row, pool + at, codes + at, pw, g.o);
        } else {
          MaxPool2x2Row(r0, r0 + row, pool + at, pw, g.o);
        }
      }
    }
    amx::ReleaseTiles();
  });
  return absl::OkStatus();
}

}  // namespace tandem::nn

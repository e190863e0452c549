// framework/kernels/cpu/conv_filter_grad_amx_unfolded.cc: the filter gradient of a
// bfloat16 convolution with few input channels (an image model's first layer), stride 1
// and no dilation, on AMX tiles with the input unfolded into its taps (see
// conv_filter_grad.h).
//
// With c input channels, dW seen as C[n][o] with n = (i * kw + j) * c + ch (dW's own
// layout) has only kh * kw * c rows: the other AMX paths would pad c to 16 per tap.
// Here each image's input is unfolded instead: row n of T is channel ch's zero-padded
// input plane (pw = ow + kw - 1 positions a row) shifted by tap (i, j), so T[n][p] is
// the input that tap (i, j) of plane position p reads, and
//   C[n][o] = sum over images and plane positions p of T[n][p] * dY[p][o],
// with dY zero at the plane's padding columns (x >= ow), as in conv_filter_grad_amx.cc
// (so an infinite input would add NaN to its neighbours' taps there too).
//  - A tiles (16 rows n by 32 positions) are read from T with a row stride of one
//    image's positions; each row of T is one copy of a plane.
//  - B tiles (32 positions by 16 output channels, AMX's pairs-of-rows VNNI layout) are
//    the image's output gradient with positions 2m and 2m + 1 interleaved in row m.
// Such a layer's whole gradient is a few C tiles, so the images are split instead: into
// min(n, 16) fixed groups, each summed by one thread into its own C tiles image by
// image, and the groups added in order, so the bits do not depend on the thread count.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/kernels/cpu/bf16_convert.h"
#include "framework/kernels/cpu/conv_filter_grad.h"
#include "framework/kernels/cpu/conv_filter_grad_amx.h"
#include "framework/kernels/cpu/pool_2x2.h"

namespace tandem::nn {
namespace {

using amx::RoundUp;

constexpr int64_t kMaxGroups = 16;

// One image's operands, in bf16 elements.
struct UnfoldedLayout {
  int64_t pw;     // plane row length
  int64_t p;      // plane positions summed: oh rows, rounded up to 32
  int64_t ph;     // plane rows holding input: oh + kh - 1
  int64_t plane;  // one channel's plane: every position a tap of p reads
  int64_t planes, rows, rows_pad, o_pad;
  explicit UnfoldedLayout(const FilterGradGeometry& g)
      : pw(g.ow + g.kw - 1),
        p(amx::PositionsPerImage(g)),
        ph(g.oh + g.kh - 1),
        plane(p + (g.kh - 1) * pw + g.kw - 1),
        planes(g.c * plane),
        rows(g.kh * g.kw * g.c),
        rows_pad(RoundUp(rows, 16)),
        o_pad(RoundUp(g.o, 16)) {}
  // A thread's planes, T [rows_pad][p] and interleaved gradient, 64-byte aligned each.
  int64_t PerThread() const { return RoundUp(planes, 32) + rows_pad * p + o_pad * p; }
};

// Image b's input as T [rows_pad][p] (rows from `rows` on stay zero), through the
// zero-padded per-channel planes at `planes` [c][plane].
void Unfold(const FilterGradGeometry& g, const UnfoldedLayout& l, const uint16_t* x, int64_t b,
            uint16_t* planes, uint16_t* t) {
  std::memset(planes, 0, l.planes * sizeof(uint16_t));
  for (int64_t r = 0; r < l.ph; ++r) {
    const int64_t iy = r - g.pad_top;
    if (iy < 0 || iy >= g.h) continue;
    const int64_t s0 = std::max<int64_t>(0, g.pad_left);
    const int64_t s1 = std::min(l.pw, g.w + g.pad_left);
    for (int64_t s = s0; s < s1; ++s) {
      const uint16_t* src = x + ((b * g.h + iy) * g.w + s - g.pad_left) * g.c;
      for (int64_t ch = 0; ch < g.c; ++ch) planes[ch * l.plane + r * l.pw + s] = src[ch];
    }
  }
  for (int64_t i = 0; i < g.kh; ++i) {
    for (int64_t j = 0; j < g.kw; ++j) {
      for (int64_t ch = 0; ch < g.c; ++ch) {
        const int64_t n = (i * g.kw + j) * g.c + ch;
        std::memcpy(t + n * l.p, planes + ch * l.plane + i * l.pw + j, l.p * sizeof(uint16_t));
      }
    }
  }
}

// One image's output gradient `dy` [oh][ow][o] as B tiles [o_pad / 16][p / 2][16][2],
// zero at the plane's padding columns and beyond its last row.
void InterleaveGrad(const FilterGradGeometry& g, const UnfoldedLayout& l, const uint16_t* dy,
                    uint16_t* d) {
  auto row = [&](int64_t q) -> const uint16_t* {
    const int64_t y = q / l.pw, x = q % l.pw;
    return y < g.oh && x < g.ow ? dy + (y * g.ow + x) * g.o : nullptr;
  };
  for (int64_t m = 0; m < l.p / 2; ++m) {
    amx::InterleavePair(row(2 * m), row(2 * m + 1), g.o, l.o_pad, d + m * 32, l.p / 2 * 32);
  }
}

// Adds one image's products into the MR x NR C tiles of row tiles rt.. and output tiles
// ot.. of acc [rows_pad][o_pad]. Tiles 0-3: C; 4-5: A; 6-7: B.
template <int MR, int NR>
__attribute__((target("amx-tile,amx-bf16"))) void AccumulateUnfoldedBlock(const UnfoldedLayout& l,
                                                                          const uint16_t* t,
                                                                          const uint16_t* d,
                                                                          int64_t rt, int64_t ot,
                                                                          float* acc) {
  const int64_t c_stride = l.o_pad * 4, a_stride = l.p * 2, b_stride = 64;
  float* const base = acc + rt * 16 * l.o_pad + ot * 16;
  float* const c[2][2] = {{base, base + 16}, {base + 16 * l.o_pad, base + 16 * l.o_pad + 16}};
  amx::LoadCTiles<MR, NR>(c, c_stride);
  const uint16_t* a = t + rt * 16 * l.p;
  const uint16_t* bt = d + ot * (l.p / 2) * 32;
  for (int64_t k = 0; k < l.p; k += 32) {
    _tile_loadd(4, a + k, a_stride);
    _tile_loadd(6, bt + k * 16, b_stride);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (NR == 2) {
      _tile_loadd(7, bt + (l.p / 2) * 32 + k * 16, b_stride);
      _tile_dpbf16ps(1, 4, 7);
    }
    if constexpr (MR == 2) {
      _tile_loadd(5, a + 16 * l.p + k, a_stride);
      _tile_dpbf16ps(2, 5, 6);
      if constexpr (NR == 2) _tile_dpbf16ps(3, 5, 7);
    }
  }
  amx::StoreCTiles<MR, NR>(c, c_stride);
}

// Adds one image's products into acc, block of up to 2 x 2 tiles by block.
void AccumulateImage(const UnfoldedLayout& l, const uint16_t* t, const uint16_t* d, float* acc) {
  const int64_t row_tiles = l.rows_pad / 16, o_tiles = l.o_pad / 16;
  for (int64_t rt = 0; rt < row_tiles; rt += 2) {
    for (int64_t ot = 0; ot < o_tiles; ot += 2) {
      amx::WithBlockShape(rt + 1 < row_tiles, ot + 1 < o_tiles, [&](auto mr, auto nr) {
        AccumulateUnfoldedBlock<mr(), nr()>(l, t, d, rt, ot, acc);
      });
    }
  }
}

}  // namespace

bool AmxUnfoldedFilterGradApplies(const FilterGradGeometry& g) {
  if (!AmxFilterGradApplies(g) || g.kh * g.kw * g.c > kMaxAmxUnfoldedRows) return false;
  constexpr int64_t kMaxThreadBytes = 4 << 20;  // one image's unfolded operands
  return UnfoldedLayout(g).PerThread() * static_cast<int64_t>(sizeof(uint16_t)) <= kMaxThreadBytes;
}

namespace {

// Image b's output gradient as rows [oh][ow][o] of bfloat16 bits: the tensor's own, or
// one routed from a 2x2 max pool's gradient into the calling thread's scratch, valid
// until its next call: to each window's first maximum of the pool's input (pool_2x2.h),
// which is the convolution's output, or to the place its argmax code names.
class GradImages {
 public:
  GradImages(const FilterGradGeometry& g, const Tensor& grad) : g_(g), dy_(Bits(grad)) {}
  // `pool_input`: the pool's input (bfloat16) or its argmax codes (uint8).
  GradImages(const FilterGradGeometry& g, const Tensor& pool_input, const Tensor& pool_grad)
      : g_(g), pooled_(Bits(pool_grad)), ph_(pool_grad.dim(1)), pw_(pool_grad.dim(2)) {
    if (pool_input.dtype() == DType::kUInt8) {
      codes_ = pool_input.data<uint8_t>();
    } else {
      a_ = Bits(pool_input);
    }
  }

  const uint16_t* Image(int64_t b) const {
    const int64_t image = g_.oh * g_.ow * g_.o;
    if (pooled_ == nullptr) return dy_ + b * image;
    thread_local std::vector<uint16_t> routed;
    routed.resize(image);
    // Rows and columns past the last window (odd sizes) get no gradient.
    if (2 * ph_ != g_.oh || 2 * pw_ != g_.ow) std::fill(routed.begin(), routed.end(), 0);
    const int64_t row = g_.ow * g_.o, pooled_row = pw_ * g_.o;
    const uint16_t* pg = pooled_ + b * ph_ * pooled_row;
    for (int64_t py = 0; py < ph_; ++py) {
      uint16_t* d0 = routed.data() + 2 * py * row;
      if (codes_ != nullptr) {
        RouteByArgmax2x2Row(codes_ + (b * ph_ + py) * pooled_row, pg + py * pooled_row, d0,
                            d0 + row, pw_, g_.o);
      } else {
        const uint16_t* r0 = a_ + b * image + 2 * py * row;
        MaxPoolGrad2x2Row(r0, r0 + row, pg + py * pooled_row, d0, d0 + row, pw_, g_.o);
      }
    }
    return routed.data();
  }

 private:
  static const uint16_t* Bits(const Tensor& t) {
    return reinterpret_cast<const uint16_t*>(t.data<bfloat16>());
  }
  const FilterGradGeometry& g_;
  const uint16_t* dy_ = nullptr;
  const uint16_t *a_ = nullptr, *pooled_ = nullptr;
  const uint8_t* codes_ = nullptr;
  int64_t ph_ = 0, pw_ = 0;
};

absl::Status UnfoldedFilterGrad(const FilterGradGeometry& g, const Tensor& input,
                                const GradImages& grads, Tensor* out) {
  const UnfoldedLayout l(g);
  const int64_t groups = std::min(g.n, kMaxGroups);
  const int threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), groups));
  thread_local amx::AmxScratch scratch;
  // Per thread: the planes, T and the interleaved gradient; per group: its C tiles.
  const int64_t per_thread = l.PerThread();
  uint16_t* const buffers = amx::AmxScratch::Aligned(&scratch.input, threads * per_thread);
  const int64_t acc_size = l.rows_pad * l.o_pad;
  float* const acc = amx::AmxScratch::Aligned(&scratch.acc, groups * acc_size);
  std::fill_n(acc, groups * acc_size, 0.0f);
  const auto* x = reinterpret_cast<const uint16_t*>(input.data<bfloat16>());
#pragma omp parallel num_threads(threads)
  {
    amx::LoadTileConfig();
    uint16_t* const planes = buffers + omp_get_thread_num() * per_thread;
    uint16_t* const t = planes + RoundUp(l.planes, 32);
    uint16_t* const d = t + l.rows_pad * l.p;
    // Rows of T past `rows` are never written by Unfold.
    std::memset(t + l.rows * l.p, 0, (l.rows_pad - l.rows) * l.p * sizeof(uint16_t));
#pragma omp for schedule(static)
    for (int64_t group = 0; group < groups; ++group) {
      for (int64_t b = g.n * group / groups; b < g.n * (group + 1) / groups; ++b) {
        Unfold(g, l, x, b, planes, t);
        InterleaveGrad(g, l, grads.Image(b), d);
        AccumulateImage(l, t, d, acc + group * acc_size);
      }
    }
    amx::ReleaseTiles();
  }
  // dW [kh, kw, c, o] is C [rows][o]: the groups' sums added in group order.
  std::vector<float> sum(l.rows * g.o, 0.0f);
  for (int64_t n = 0; n < l.rows; ++n) {
    float* row = sum.data() + n * g.o;
    for (int64_t group = 0; group < groups; ++group) {
      const float* src = acc + group * acc_size + n * l.o_pad;
      for (int64_t o = 0; o < g.o; ++o) row[o] += src[o];
    }
  }
  amx::WriteFilterGrad(sum, out);
  return absl::OkStatus();
}

// The checks both entries make.
absl::Status CheckUnfolded(const FilterGradGeometry& g, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts) {
    if (t->dtype() != DType::kBFloat16) {
      return absl::InternalError("the AMX filter gradient takes bfloat16 operands");
    }
  }
  if (!AmxUnfoldedFilterGradApplies(g)) {
    return absl::InternalError(
        absl::StrCat("the unfolded AMX filter gradient takes at most ", kMaxAmxUnfoldedRows,
                     " taps x input channels and 4 MiB of operands an image"));
  }
  return absl::OkStatus();
}

// The checks of both entries that route a pool's gradient; `pool_input` [n,oh,ow,o] or
// the codes [n,oh/2,ow/2,o].
absl::Status CheckPooled(const FilterGradGeometry& g, const Tensor& input, const Tensor& pool_input,
                         const Tensor& pool_grad) {
  TANDEM_RETURN_IF_ERROR(CheckUnfolded(g, {&input, &pool_grad}));
  const TensorShape pooled({g.n, g.oh / 2, g.ow / 2, g.o});
  const bool codes = pool_input.dtype() == DType::kUInt8;
  if (!codes) TANDEM_RETURN_IF_ERROR(CheckUnfolded(g, {&pool_input}));
  if (pool_input.shape() != (codes ? pooled : TensorShape({g.n, g.oh, g.ow, g.o})) ||
      pool_grad.shape() != pooled) {
    return absl::InternalError(
        absl::StrCat("a 2x2 max pool of stride 2 over the output gradient's shape takes ",
                     TensorShape({g.n, g.oh, g.ow, g.o}).DebugString(), " to ",
                     pooled.DebugString(), ", not ", pool_grad.shape().DebugString(),
                     codes ? " with codes " : " from ", pool_input.shape().DebugString()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status FilterGradAmxUnfolded(const FilterGradGeometry& g, const Tensor& input,
                                   const Tensor& grad, Tensor* out) {
  TANDEM_RETURN_IF_ERROR(CheckUnfolded(g, {&input, &grad}));
  return UnfoldedFilterGrad(g, input, GradImages(g, grad), out);
}

absl::Status FilterGradAmxUnfoldedOfMaxPool(const FilterGradGeometry& g, const Tensor& input,
                                            const Tensor& pool_input, const Tensor& pool_grad,
                                            Tensor* out) {
  if (pool_input.dtype() == DType::kUInt8) {
    return absl::InternalError("the pool's input must be the convolution's output, not codes");
  }
  TANDEM_RETURN_IF_ERROR(CheckPooled(g, input, pool_input, pool_grad));
  return UnfoldedFilterGrad(g, input, GradImages(g, pool_input, pool_grad), out);
}

absl::Status FilterGradAmxUnfoldedOfMaxPoolArgmax(const FilterGradGeometry& g, const Tensor& input,
                                                  const Tensor& argmax, const Tensor& pool_grad,
                                                  Tensor* out) {
  if (argmax.dtype() != DType::kUInt8) {
    return absl::InternalError("the pool's argmax codes must be uint8");
  }
  TANDEM_RETURN_IF_ERROR(CheckPooled(g, input, argmax, pool_grad));
  return UnfoldedFilterGrad(g, input, GradImages(g, argmax, pool_grad), out);
}

}  // namespace tandem::nn

// framework/kernels/cpu/conv_filter_grad_unfold.cc: the filter gradient as a matrix
// product over unfolded input patches (see conv_filter_grad.h).
//
// With P the input unfolded into one row per output position (b, y, x) of its
// kh x kw x c patch, dW viewed as [kh*kw*c, o] is P^T . dY, dY viewed as [positions, o]
// (its NHWC layout as is). The positions are taken a chunk of images at a time, so
// that a chunk of P stays in the L2 cache between being written and read: each chunk
// is unfolded by the OpenMP team, then one oneDNN matmul adds dY_chunk^T . P_chunk
// into dW^T [o, kh*kw*c] in float32 (a sum post-op). On AMX the matmul runs on
// oneDNN's brgemm kernels, where its backward-weights convolution uses an older one.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/bf16_convert.h"
#include "framework/kernels/cpu/conv_filter_grad.h"
#include "framework/kernels/cpu/onednn_util.h"
#include "framework/kernels/cpu/parallel.h"

namespace tandem::nn {
namespace {

using dnnl::memory;

// Output positions per chunk: about 2,000 rows of P (3 MB for a 5x5x32 bfloat16 patch).
constexpr int64_t kRowsPerChunk = 2048;

struct UnfoldMatmulEntry {
  memory::desc dy_md, p_md, acc_md;  // dY_chunk^T [o, rows], P [rows, k2], dW^T [o, k2]
  dnnl::matmul prim;
};

UnfoldMatmulEntry MakeEntry(int64_t rows, int64_t k2, int64_t o, memory::data_type dt) {
  UnfoldMatmulEntry e;
  e.dy_md = onednn::StridedDesc({o, rows}, {1, o}, dt);
  e.p_md = onednn::StridedDesc({rows, k2}, {k2, 1}, dt);
  e.acc_md = onednn::StridedDesc({o, k2}, {k2, 1}, memory::data_type::f32);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::post_ops sum;
  sum.append_sum(1.0f);
  attr.set_post_ops(sum);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(e.dy_md, e.p_md, e.acc_md), attr,
                                  onednn::CpuEngine());
  e.prim = dnnl::matmul(pd);
  return e;
}

// Rows [r0, r1) of the chunk starting at image b0: row r is output position
// (b0 + r / (oh*ow), y, x), its patch in (i, j, ch) order, zero outside the input.
// T is the element's storage (uint16_t for bfloat16 bits, float).
template <typename T>
void Unfold(const FilterGradGeometry& g, const T* x, int64_t b0, int64_t r0, int64_t r1, T* p) {
  const int64_t per_image = g.oh * g.ow, k2 = g.kh * g.kw * g.c;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = b0 + r / per_image, y = (r % per_image) / g.ow, xo = r % g.ow;
    T* row = p + r * k2;
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t iy = y * g.stride_h + i * g.dilation_h - g.pad_top;
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t ix = xo * g.stride_w + j * g.dilation_w - g.pad_left;
        T* dst = row + (i * g.kw + j) * g.c;
        if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) {
          std::memset(dst, 0, g.c * sizeof(T));
        } else {
          std::memcpy(dst, x + ((b * g.h + iy) * g.w + ix) * g.c, g.c * sizeof(T));
        }
      }
    }
  }
}

template <typename T>
absl::Status Run(const OpKernelContext& ctx, const FilterGradGeometry& g, const T* x, const T* dy,
                 memory::data_type dt, Tensor* out) {
  const int64_t per_image = g.oh * g.ow, k2 = g.kh * g.kw * g.c;
  const int64_t images = std::max<int64_t>(1, std::min<int64_t>(g.n, kRowsPerChunk / per_image));
  std::vector<T> p(images * per_image * k2);
  std::vector<float> acc(g.o * k2, 0.0f);  // dW^T
  for (int64_t b0 = 0; b0 < g.n; b0 += images) {
    const int64_t rows = std::min(images, g.n - b0) * per_image;
    const std::string key = absl::StrCat("conv_filter_grad_unfold:", static_cast<int>(dt), ",",
                                         rows, ",", k2, ",", g.o);
    TANDEM_ASSIGN_OR_RETURN(auto e, onednn::Cached<UnfoldMatmulEntry>(
                                        ctx, key, [&] { return MakeEntry(rows, k2, g.o, dt); }));
    OmpParallelFor(rows, 16, [&](int64_t r0, int64_t r1) { Unfold(g, x, b0, r0, r1, p.data()); });
    TANDEM_RETURN_IF_ERROR(onednn::Guard(ctx, [&]() {
      onednn::ExecuteCached(e->prim, {{DNNL_ARG_SRC, e->dy_md, dy + b0 * per_image * g.o},
                                      {DNNL_ARG_WEIGHTS, e->p_md, p.data()},
                                      {DNNL_ARG_DST, e->acc_md, acc.data()}});
      return absl::OkStatus();
    }));
  }
  // dW [kh, kw, c, o] = (dW^T)^T.
  std::vector<float> dw(k2 * g.o);
  for (int64_t k = 0; k < k2; ++k)
    for (int64_t oc = 0; oc < g.o; ++oc) dw[k * g.o + oc] = acc[oc * k2 + k];
  if (out->dtype() == DType::kBFloat16) {
    NarrowToBf16(dw.data(), out->data<bfloat16>(), k2 * g.o);
  } else {
    std::memcpy(out->data<float>(), dw.data(), dw.size() * sizeof(float));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status FilterGradByUnfoldMatmul(const OpKernelContext& ctx, const FilterGradGeometry& g,
                                      const Tensor& input, const Tensor& grad, Tensor* out) {
  if (input.dtype() == DType::kBFloat16) {
    return Run(ctx, g, reinterpret_cast<const uint16_t*>(input.raw_data()),
               reinterpret_cast<const uint16_t*>(grad.raw_data()), memory::data_type::bf16, out);
  }
  return Run(ctx, g, input.data<float>(), grad.data<float>(), memory::data_type::f32, out);
}

}  // namespace tandem::nn

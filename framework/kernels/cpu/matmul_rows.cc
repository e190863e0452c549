// framework/kernels/cpu/matmul_rows.cc: see the header.
#include "framework/kernels/cpu/matmul_rows.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/onednn_util.h"

namespace tandem::nn {

using dnnl::memory;

// The product of one block's rows, with its weights in the layout oneDNN chose, and
// the reorders that lay out a (transposed into rows) and b (into that layout) once.
// With bfloat16 operands the inner dimension is padded with zeros to a multiple of
// kBf16InnerMultiple: oneDNN 2.6's AMX brgemm runs a product whose k leaves a tail
// far slower. On the AMX Xeon, fashion_cnn's dense gradient at batch 100 (k = 100) in
// 32-row blocks took 4.8 ms bare against 2.0 ms for k = 128; in steps alternating
// the two, the fused Adam update took 3.5-3.6 ms padded against 4.5-4.8 ms not, and
// the step ran 7-10% faster. Zero terms add nothing to a float32 sum.
struct MatMulRowBlocks::Primitive {
  dnnl::matmul prim;
  memory::desc a_md, b_md, c_md;                 // one block: a [r, k_pad], b [k_pad, n], c [r, n]
  memory::desc user_a_md, rows_a_md, user_b_md;  // as given; a as rows [m, k] in [m, k_pad]
  memory::desc plain_b_md, padded_b_md;          // b as [k, n] rows of [k_pad, n]
  std::optional<dnnl::reorder> a_to_rows, b_to_plain, b_to_weights;
};

namespace {
constexpr int64_t kBf16InnerMultiple = 32;  // one AMX tile row of bfloat16
}  // namespace

absl::StatusOr<MatMulRowBlocks> MatMulRowBlocks::Create(const OpKernelContext& ctx, const Tensor& a,
                                                        bool transpose_a, const Tensor& b,
                                                        bool transpose_b, int64_t rows) {
  MatMulRowBlocks blocks;
  const bool widen = a.dtype() == DType::kBFloat16 && !onednn::HasBf16Kernels();
  const Tensor wide_a = widen ? onednn::ToFloat(a) : a;
  const Tensor wide_b = widen ? onednn::ToFloat(b) : b;
  blocks.m_ = a.dim(transpose_a ? 1 : 0);
  blocks.k_ = a.dim(transpose_a ? 0 : 1);
  blocks.n_ = b.dim(transpose_b ? 0 : 1);
  blocks.rows_ = std::min(rows, std::max<int64_t>(blocks.m_, 1));
  blocks.ctx_ = &ctx;
  blocks.a_element_bytes_ = static_cast<int64_t>(DTypeSize(wide_a.dtype()));
  const int64_t m = blocks.m_, k = blocks.k_, n = blocks.n_;
  if (m == 0) return blocks;
  const memory::data_type dt = onednn::DataType(wide_a.dtype());
  const int64_t k_pad = dt == memory::data_type::bf16
                            ? (k + kBf16InnerMultiple - 1) / kBf16InnerMultiple * kBf16InnerMultiple
                            : k;
  blocks.k_ = k_pad;
  auto make = [&](int64_t r) {
    const std::string key = absl::StrCat("matmul_rows:", r, ",", m, ",", k, ",", n, ",",
                                         transpose_a, transpose_b, ",", static_cast<int>(dt));
    return onednn::Cached<Primitive>(ctx, key, [=]() {
      Primitive p;
      p.a_md = onednn::StridedDesc({r, k_pad}, {k_pad, 1}, dt);
      p.c_md = onednn::StridedDesc({r, n}, {n, 1}, memory::data_type::f32);
      const dnnl::matmul::primitive_desc pd(
          dnnl::matmul::desc(p.a_md, onednn::TagDesc({k_pad, n}, memory::format_tag::any, dt),
                             p.c_md),
          onednn::Attr(), onednn::CpuEngine());
      p.prim = dnnl::matmul(pd);
      p.b_md = pd.weights_desc();
      p.user_a_md =
          onednn::StridedDesc({m, k}, transpose_a ? memory::dims{1, m} : memory::dims{k, 1}, dt);
      p.rows_a_md = onednn::StridedDesc({m, k}, {k_pad, 1}, dt);
      p.user_b_md =
          onednn::StridedDesc({k, n}, transpose_b ? memory::dims{1, k} : memory::dims{n, 1}, dt);
      p.plain_b_md = onednn::StridedDesc({k, n}, {n, 1}, dt);
      p.padded_b_md = onednn::StridedDesc({k_pad, n}, {n, 1}, dt);
      p.a_to_rows = onednn::ReorderIfNeeded(p.user_a_md, p.rows_a_md);
      if (k_pad == k) {
        p.b_to_weights = onednn::ReorderIfNeeded(p.user_b_md, p.b_md);
      } else {
        p.b_to_plain = onednn::ReorderIfNeeded(p.user_b_md, p.plain_b_md);
        p.b_to_weights = onednn::ReorderIfNeeded(p.padded_b_md, p.b_md);
      }
      return p;
    });
  };
  TANDEM_ASSIGN_OR_RETURN(blocks.full_, make(blocks.rows_));
  const int64_t last = m - (blocks.blocks() - 1) * blocks.rows_;
  if (last == blocks.rows_) {
    blocks.last_ = blocks.full_;
  } else {
    TANDEM_ASSIGN_OR_RETURN(blocks.last_, make(last));
  }
  // Both operands laid out once: a as rows, b as each primitive's weights.
  auto laid_out = [](const std::optional<dnnl::reorder>& reorder, const memory::desc& from,
                     const Tensor& t, const memory::desc& to) {
    Tensor scratch;
    return onednn::InLayout(reorder, from, t.raw_data(), to, &scratch) == t.raw_data() ? t
                                                                                       : scratch;
  };
  // b [k, n] in the top rows of a zeroed [k_pad, n], where k is padded (the same for
  // both primitives).
  auto padded_b = [&](const Primitive& p) {
    Tensor out = onednn::ScratchFor(p.padded_b_md);
    const size_t top = p.plain_b_md.get_size();  // the padding rows below it are zero
    std::memset(static_cast<char*>(out.raw_data()) + top, 0, out.TotalBytes() - top);
    if (!p.b_to_plain) {
      std::memcpy(out.raw_data(), wide_b.raw_data(), p.plain_b_md.get_size());
    } else {
      onednn::ExecuteCached(*p.b_to_plain, {{DNNL_ARG_FROM, p.user_b_md, wide_b.raw_data()},
                                            {DNNL_ARG_TO, p.plain_b_md, out.raw_data()}});
    }
    return out;
  };
  TANDEM_RETURN_IF_ERROR(onednn::Guard(ctx, [&]() {
    const Primitive& f = *blocks.full_;
    const Primitive& l = *blocks.last_;
    if (k_pad == k) {
      blocks.a_ = laid_out(f.a_to_rows, f.user_a_md, wide_a, f.rows_a_md);
    } else {
      blocks.a_ = onednn::ScratchFor(onednn::StridedDesc({m, k_pad}, {k_pad, 1}, dt));
      std::memset(blocks.a_.raw_data(), 0, blocks.a_.TotalBytes());
      onednn::ExecuteCached(*f.a_to_rows,  // rows of k_pad: a reorder even without a transpose
                            {{DNNL_ARG_FROM, f.user_a_md, wide_a.raw_data()},
                             {DNNL_ARG_TO, f.rows_a_md, blocks.a_.raw_data()}});
    }
    const Tensor b = k_pad == k ? wide_b : padded_b(f);
    const memory::desc& b_md = k_pad == k ? f.user_b_md : f.padded_b_md;
    blocks.b_ = laid_out(f.b_to_weights, b_md, b, f.b_md);
    blocks.b_last_ = &l == &f ? blocks.b_ : laid_out(l.b_to_weights, b_md, b, l.b_md);
    return absl::OkStatus();
  }));
  return blocks;
}

absl::Status MatMulRowBlocks::Run(int64_t i, float* out) const {
  const bool last = i + 1 == blocks();
  const Primitive& p = last ? *last_ : *full_;
  const auto* a = static_cast<const char*>(a_.raw_data()) + i * rows_ * k_ * a_element_bytes_;
  return onednn::Guard(*ctx_, [&]() {
    onednn::ExecuteCached(p.prim, {{DNNL_ARG_SRC, p.a_md, a},
                                   {DNNL_ARG_WEIGHTS, p.b_md, (last ? b_last_ : b_).raw_data()},
                                   {DNNL_ARG_DST, p.c_md, out}});
    return absl::OkStatus();
  });
}

}  // namespace tandem::nn

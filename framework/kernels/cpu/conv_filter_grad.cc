// framework/kernels/cpu/conv_filter_grad.cc: see the header.
#include "framework/kernels/cpu/conv_filter_grad.h"

#include <cstdlib>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/onednn_util.h"

namespace tandem::nn {
namespace {

using dnnl::memory;
using Tag = dnnl::memory::format_tag;

// The padding after the last row (column) that makes the forward convolution's output
// kh (kw) long: kh = h + pad_top + pad_bottom - oh + 1.
int64_t PadAfter(int64_t in, int64_t k, int64_t out, int64_t pad_before) {
  return k - 1 + out - in - pad_before;
}

// The forward convolution of one geometry and its three reorders: the input and the
// output gradient into the primitive's src and weights layouts, its dst into HWIO.
struct ForwardConvEntry {
  memory::desc x_md, dy_md, out_md;         // The user's buffers, in the conv's dims.
  memory::desc src_md, weights_md, dst_md;  // The primitive's layouts.
  std::optional<dnnl::reorder> x_to_src, dy_to_weights, dst_to_out;
  dnnl::convolution_forward prim;
};

ForwardConvEntry MakeForwardConvEntry(const FilterGradGeometry& g, memory::data_type dt,
                                      memory::data_type out_dt) {
  ForwardConvEntry e;
  // src [c, n, h, w] is X [n, h, w, c]; weights [o, n, oh, ow] is dY [n, oh, ow, o];
  // dst [c, o, kh, kw] is dW [kh, kw, c, o].
  e.x_md = onednn::StridedDesc({g.c, g.n, g.h, g.w}, {1, g.h * g.w * g.c, g.w * g.c, g.c}, dt);
  e.dy_md =
      onednn::StridedDesc({g.o, g.n, g.oh, g.ow}, {1, g.oh * g.ow * g.o, g.ow * g.o, g.o}, dt);
  e.out_md =
      onednn::StridedDesc({g.c, g.o, g.kh, g.kw}, {g.o, 1, g.kw * g.c * g.o, g.c * g.o}, out_dt);
  dnnl::convolution_forward::desc d(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
      onednn::TagDesc({g.c, g.n, g.h, g.w}, Tag::any, dt),
      onednn::TagDesc({g.o, g.n, g.oh, g.ow}, Tag::any, dt),
      onednn::TagDesc({g.c, g.o, g.kh, g.kw}, Tag::any, out_dt), {1, 1}, {0, 0},
      {g.pad_top, g.pad_left},
      {PadAfter(g.h, g.kh, g.oh, g.pad_top), PadAfter(g.w, g.kw, g.ow, g.pad_left)});
  dnnl::convolution_forward::primitive_desc pd(d, onednn::Attr(), onednn::CpuEngine());
  e.prim = dnnl::convolution_forward(pd);
  e.src_md = pd.src_desc();
  e.weights_md = pd.weights_desc();
  e.dst_md = pd.dst_desc();
  e.x_to_src = onednn::ReorderIfNeeded(e.x_md, e.src_md);
  e.dy_to_weights = onednn::ReorderIfNeeded(e.dy_md, e.weights_md);
  e.dst_to_out = onednn::ReorderIfNeeded(e.dst_md, e.out_md);
  return e;
}

}  // namespace

absl::StatusOr<FilterGradPath> FilterGradPathFor(const FilterGradGeometry& g, DType dtype) {
  const bool forward_applies = g.stride_h == 1 && g.stride_w == 1 && g.dilation_h == 1 &&
                               g.dilation_w == 1 && PadAfter(g.h, g.kh, g.oh, g.pad_top) >= 0 &&
                               PadAfter(g.w, g.kw, g.ow, g.pad_left) >= 0;
  const char* v = std::getenv("TANDEM_CONV_FILTER_GRAD");
  const std::string choice = v == nullptr ? "" : v;
  const bool direct_applies = DirectFilterGradApplies(g);
  const bool bf16 = dtype == DType::kBFloat16;
  const bool amx_applies = bf16 && AmxFilterGradApplies(g) && AmxFilterGradIsAvailable();
  // The AMX form for g: unfolded under 16 input channels, else by images where that
  // runs fewer products.
  const FilterGradPath amx_path = g.c < 16 && AmxUnfoldedFilterGradApplies(g)
                                      ? FilterGradPath::kAmxUnfolded
                                  : AmxImagesReductionIsSmaller(g) ? FilterGradPath::kAmxImages
                                                                   : FilterGradPath::kAmxPositions;
  if (choice.empty()) {
    // Measured on an AMX Xeon (Fashion-MNIST CNN, 2 threads, mean of 20 traced steps).
    // bfloat16: the 1-channel input layer's gradient took 1.06-1.16 ms direct, 1.7-1.9
    // ms as a forward convolution and 2.3 ms in oneDNN's backward-weights kernel
    // (direct 1.08-1.21 against oneDNN 2.36-2.77 ms in steps alternating the two); the
    // 32-channel layer's took 7.0 ms forward against 5.5 ms in oneDNN. float32: the
    // 1-channel layer's took 1.1 ms in oneDNN against 1.7 ms direct, and the forward
    // convolution was slower on AVX2. The 32-channel layer's (128 images, steps alternating
    // the two) took 4.0-4.9 ms on AMX tiles against 7.1-8.3 ms in oneDNN's kernel, and
    // reduced along the batch 3.4-4.1 against 4.7-5.8 ms along positions. The
    // 1-channel layer's on AMX tiles, unfolded: 1.1-1.3 against 1.8-2.0 ms direct.
    if (amx_applies && (g.c >= 16 || amx_path == FilterGradPath::kAmxUnfolded)) return amx_path;
    if (bf16 && direct_applies && DirectFilterGradIsVectorized(g)) return FilterGradPath::kDirect;
    const bool forward_wins = bf16 && g.c == 1;
    return forward_applies && forward_wins ? FilterGradPath::kForwardConv
                                           : FilterGradPath::kOneDnnBackward;
  }
  if (choice == "onednn") return FilterGradPath::kOneDnnBackward;
  if (choice == "forward") {
    return forward_applies ? FilterGradPath::kForwardConv : FilterGradPath::kOneDnnBackward;
  }
  if (choice == "direct") {
    return direct_applies ? FilterGradPath::kDirect : FilterGradPath::kOneDnnBackward;
  }
  if (choice == "amx_unfolded") {
    return amx_applies && AmxUnfoldedFilterGradApplies(g) ? FilterGradPath::kAmxUnfolded
                                                          : FilterGradPath::kOneDnnBackward;
  }
  if (choice == "amx" || choice == "amx_positions" || choice == "amx_images") {
    if (!amx_applies) return FilterGradPath::kOneDnnBackward;
    if (choice == "amx") return amx_path;
    return choice == "amx_images" ? FilterGradPath::kAmxImages : FilterGradPath::kAmxPositions;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("TANDEM_CONV_FILTER_GRAD must be onednn, forward, direct, amx, amx_positions, "
                   "amx_images or amx_unfolded, got '",
                   choice, "'"));
}

absl::Status FilterGradByForwardConv(const OpKernelContext& ctx, const FilterGradGeometry& g,
                                     const Tensor& input, const Tensor& grad, Tensor* out) {
  const memory::data_type dt = onednn::DataType(input.dtype());
  const memory::data_type out_dt = onednn::DataType(out->dtype());
  const std::string key =
      absl::StrCat("conv_filter_grad_forward:", static_cast<int>(dt), ",", static_cast<int>(out_dt),
                   ",", g.n, ",", g.h, ",", g.w, ",", g.c, ",", g.kh, ",", g.kw, ",", g.o, ",",
                   g.oh, ",", g.ow, ",", g.pad_top, ",", g.pad_left);
  TANDEM_ASSIGN_OR_RETURN(auto e, onednn::Cached<ForwardConvEntry>(ctx, key, [&] {
                            return MakeForwardConvEntry(g, dt, out_dt);
                          }));
  return onednn::Guard(ctx, [&]() {
    Tensor src_copy, weights_copy, dst_copy;
    const void* src =
        onednn::InLayout(e->x_to_src, e->x_md, input.raw_data(), e->src_md, &src_copy);
    const void* weights =
        onednn::InLayout(e->dy_to_weights, e->dy_md, grad.raw_data(), e->weights_md, &weights_copy);
    void* dst = out->raw_data();
    if (e->dst_to_out) {
      dst_copy = onednn::ScratchFor(e->dst_md);
      dst = dst_copy.raw_data();
    }
    onednn::ExecuteCached(e->prim, {{DNNL_ARG_SRC, e->src_md, src},
                                    {DNNL_ARG_WEIGHTS, e->weights_md, weights},
                                    {DNNL_ARG_DST, e->dst_md, dst}});
    if (e->dst_to_out) {
      onednn::ExecuteCached(*e->dst_to_out, {{DNNL_ARG_FROM, e->dst_md, dst},
                                             {DNNL_ARG_TO, e->out_md, out->raw_data()}});
    }
    return absl::OkStatus();
  });
}

}  // namespace tandem::nn

// framework/kernels/cpu/conv_filter_grad.h
//
// The filter gradient of a 2-D convolution (Conv2DBackpropFilter) computed as a forward
// convolution. With stride 1 and no dilation,
//   dW[i, j, ch, o] = sum over images b and positions (y, x) of
//                     X[b, y + i - pad_top, x + j - pad_left, ch] * dY[b, y, x, o],
// which is a forward convolution whose batch is the input channels ch, whose input
// channels are the images b, whose kernel is dY (oh x ow, from b to o) and whose kh x kw
// output is dW. On AMX, oneDNN 2.6 runs forward convolutions on its brgemm kernels
// (brgconv) and backward-weights ones on an older AMX kernel, which is slow for a
// layer with one input channel. The operands are reordered into the primitive's
// layouts and the result back into HWIO, each by one cached reorder.
//
// With one input channel (an image model's first layer), stride 1 and no dilation, a
// direct loop (conv_filter_grad_direct.cc) keeps a filter row's taps for 16 or 32
// output channels in AVX-512 registers while it runs along each row of the output
// gradient; oneDNN's kernels parallelise such a layer poorly (its whole output is
// kh x kw x o, its reduction n x oh x ow long).
//
// With bfloat16 operands, stride 1 and no dilation on a CPU with AMX, the AMX paths
// run the reduction on tiles, with each tap's operands laid out so that every tile is
// 1 KB of contiguous memory: along each image's output positions on zero-padded input
// planes (conv_filter_grad_amx.cc), or along the batch, 32 images at a time
// (conv_filter_grad_amx_images.cc); oneDNN 2.6's AMX backward-weights kernel keeps the
// tiles far from their peak on such layers.
//
// Which path runs is FilterGradPathFor's choice, or the environment's:
//   TANDEM_CONV_FILTER_GRAD=onednn|forward|direct|amx|amx_positions|amx_images|amx_unfolded
//   (unset: FilterGradPathFor's default; amx: the AMX path's default reduction)
#ifndef TANDEM_FRAMEWORK_KERNELS_CPU_CONV_FILTER_GRAD_H_
#define TANDEM_FRAMEWORK_KERNELS_CPU_CONV_FILTER_GRAD_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "framework/kernels/op_kernel.h"
#include "framework/tensor/tensor.h"

namespace tandem::nn {

// One convolution's geometry: input [n,h,w,c], filter [kh,kw,c,o], output [n,oh,ow,o].
struct FilterGradGeometry {
  int64_t n, h, w, c, kh, kw, o, oh, ow;
  int64_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1, pad_top = 0, pad_left = 0;
};

enum class FilterGradPath {
  kOneDnnBackward,
  kForwardConv,
  kDirect,
  kAmxPositions,
  kAmxImages,
  kAmxUnfolded
};

// The path for a filter gradient with operands of `dtype` (as the primitives see them:
// bfloat16 only where oneDNN has bf16 kernels). kForwardConv needs stride 1 and no
// dilation, kDirect also one input channel, the kAmx* paths stride 1, no dilation,
// bfloat16 operands and AMX (kAmxUnfolded also few taps x channels). By default, for
// bfloat16 operands where the process has AMX: kAmxUnfolded under 16 input channels
// where it applies, and with 16 or more kAmxImages where AmxImagesReductionIsSmaller,
// else kAmxPositions. Without AMX, a 1-channel input takes kDirect where it has its
// AVX-512 loop (kw <= 7), else kForwardConv. Each measured faster than oneDNN's
// backward kernel there; float32 operands stay on oneDNN's kernel, which measured
// faster. TANDEM_CONV_FILTER_GRAD, when set, picks the path wherever it applies
// (oneDNN's elsewhere; amx: the AMX form the default picks); an unknown value is an
// error.
absl::StatusOr<FilterGradPath> FilterGradPathFor(const FilterGradGeometry& g, DType dtype);

// Writes the filter gradient of `input` [n,h,w,c] and `grad` [n,oh,ow,o] (one dtype,
// float32 or bfloat16) into `out` [kh,kw,c,o] (float32, or bfloat16 rounded once from
// float32 sums) by the forward convolution above. REQUIRES: stride 1, no dilation.
absl::Status FilterGradByForwardConv(const OpKernelContext& ctx, const FilterGradGeometry& g,
                                     const Tensor& input, const Tensor& grad, Tensor* out);

// Whether kDirect applies to `g`: one input channel, stride 1, no dilation.
bool DirectFilterGradApplies(const FilterGradGeometry& g);
// Whether kDirect runs its AVX-512 loop for `g` here (else plain loops).
bool DirectFilterGradIsVectorized(const FilterGradGeometry& g);

// The kDirect path: the same contract as FilterGradByForwardConv, float32 sums on the
// calling thread's OpenMP team. REQUIRES: DirectFilterGradApplies(g).
absl::Status FilterGradDirect(const FilterGradGeometry& g, const Tensor& input, const Tensor& grad,
                              Tensor* out);

// Whether kAmx applies to `g` (stride 1, no dilation) and whether this process can run
// it: AMX bf16 tiles granted by the kernel, and oneDNN's ISA (ONEDNN_MAX_CPU_ISA caps
// it) avx512_core_amx.
bool AmxFilterGradApplies(const FilterGradGeometry& g);
bool AmxFilterGradIsAvailable();

// The two AMX paths: the same contract as FilterGradByForwardConv for bfloat16
// operands, float32 sums on the calling thread's OpenMP team, equal bits at any thread
// count. REQUIRES: AmxFilterGradApplies(g) and AmxFilterGradIsAvailable().
//  - kAmxPositions (FilterGradAmx) reduces along each image's output positions, 32 at a
//    time, on the zero-padded input plane: its products include the plane's padding
//    columns (ow + kw - 1 positions a row for ow), and each image's positions are
//    rounded up to 32.
//  - kAmxImages (FilterGradAmxByImages) reduces along the batch, 32 images at a time,
//    one output position after another: no padding columns. The images past the last
//    whole chunk of 32 are summed along positions.
absl::Status FilterGradAmx(const FilterGradGeometry& g, const Tensor& input, const Tensor& grad,
                           Tensor* out);
absl::Status FilterGradAmxByImages(const FilterGradGeometry& g, const Tensor& input,
                                   const Tensor& grad, Tensor* out);
// kAmxUnfolded (FilterGradAmxUnfolded), for layers of at most kMaxAmxUnfoldedRows taps
// x input channels (kh * kw * c) whose unfolded image fits in 4 MiB, reduces along positions like
// kAmxPositions, with each image's input unfolded into one row per tap and channel: no channel
// padding to 16 per tap, and the images split over the team in fixed groups.
inline constexpr int64_t kMaxAmxUnfoldedRows = 64;
bool AmxUnfoldedFilterGradApplies(const FilterGradGeometry& g);
absl::Status FilterGradAmxUnfolded(const FilterGradGeometry& g, const Tensor& input,
                                   const Tensor& grad, Tensor* out);
// kAmxUnfolded where the output gradient is MaxPoolGrad(pool_input, pool_grad) of a 2x2
// max pool of stride 2 over the convolution's output (pool_input [n,oh,ow,o], pool_grad
// [n,oh/2,ow/2,o]): each image's gradient routed into the thread's scratch as it is
// needed, never written whole; equal bit for bit to FilterGradAmxUnfolded of the routed
// gradient. REQUIRES: as FilterGradAmxUnfolded, all operands bfloat16.
absl::Status FilterGradAmxUnfoldedOfMaxPool(const FilterGradGeometry& g, const Tensor& input,
                                            const Tensor& pool_input, const Tensor& pool_grad,
                                            Tensor* out);
// The same with the pool's argmax codes (uint8 [n,oh/2,ow/2,o], MaxPoolArgmaxInto) in
// place of its input: each image's gradient routed by them.
absl::Status FilterGradAmxUnfoldedOfMaxPoolArgmax(const FilterGradGeometry& g, const Tensor& input,
                                                  const Tensor& argmax, const Tensor& pool_grad,
                                                  Tensor* out);
// Whether kAmxImages runs fewer products than kAmxPositions for `g` (at least 32
// images, and padding columns or rounding in kAmxPositions), with a chunk's operands
// (32 images' input planes and output gradients) within 2 MiB.
bool AmxImagesReductionIsSmaller(const FilterGradGeometry& g);

}  // namespace tandem::nn

#endif  // TANDEM_FRAMEWORK_KERNELS_CPU_CONV_FILTER_GRAD_H_

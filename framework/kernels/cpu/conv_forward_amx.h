// framework/kernels/cpu/conv_forward_amx.h
//
// The forward convolution of a layer with few input channels (an image model's first
// layer: 5x5 on one channel, 3x3 on RGB) in bfloat16, on AMX tiles, with _FusedConv2D's
// bias and ReLU applied as each block of outputs leaves the tiles. oneDNN 2.6 runs such a
// layer on its older AMX kernel (jit:avx512_core_amx_bf16), which pads the one input
// channel to a whole tile row; fashion_cnn's first layer took 0.8 ms a step there for
// 0.13 GFLOP.
//
// With stride 1 and no dilation, output (y, x) of image b reads rows y .. y + kh - 1 of
// the zero-padded input plane, kw * c contiguous values in each. Each image is laid out
// once as S[x][r][k], with row r of the padded plane starting at column x (kw * c values,
// padded with one zero to an even count), so that every output position's kh * kw * c
// taps are one contiguous run of S: an A tile of 16 output positions along a row is 16
// such runs, one row stride apart. The filter is the B tile (pairs of taps interleaved,
// 16 output channels a tile), and the C tiles hold 16 positions x 16 channels, written
// out as NHWC rows.
//
// Applies where kh * RoundUp(kw * c, 2) <= 32 (one A tile), stride 1, no dilation, on a
// CPU and process with AMX (AmxForwardConvIsAvailable). Which path runs is the
// environment's: TANDEM_CONV_FORWARD=onednn|amx (unset or amx: this kernel where it
// applies); an unknown value is an error.
#ifndef TANDEM_FRAMEWORK_KERNELS_CPU_CONV_FORWARD_AMX_H_
#define TANDEM_FRAMEWORK_KERNELS_CPU_CONV_FORWARD_AMX_H_

#include "absl/status/statusor.h"
#include "framework/kernels/cpu/conv_filter_grad.h"
#include "framework/tensor/tensor.h"

namespace tandem::nn {

// Taps of one output position this kernel takes in one A tile.
inline constexpr int64_t kMaxAmxForwardTaps = 32;

// Whether the AMX forward applies to `g` (stride 1, no dilation, few taps x channels).
bool AmxForwardConvApplies(const FilterGradGeometry& g);

// Whether this process can run it: AMX tiles (AmxFilterGradIsAvailable) and
// AVX512-BF16 for the output's rounding (every CPU with AMX has it).
bool AmxForwardConvIsAvailable();

// Whether a bfloat16 forward convolution of `g` runs on this kernel here: it applies,
// the process has AMX, and TANDEM_CONV_FORWARD does not say onednn. Unknown values of
// TANDEM_CONV_FORWARD are an error.
absl::StatusOr<bool> ForwardConvByAmx(const FilterGradGeometry& g);

// out [n,oh,ow,o] = relu?(conv(input [n,h,w,c], filter [kh,kw,c,o]) + bias [o]), all
// bfloat16, float32 sums rounded once; bias may be null and relu false. With `pooled`
// [n,oh/2,ow/2,o], also its 2x2 max pool of stride 2 (pool_2x2.h), each image pooled
// while its output is in cache; then `out` may be null (each image only in a thread's
// scratch), and `argmax` (uint8, pooled's shape), where given, gets each window's code
// (MaxPoolArgmax2x2Row). On the calling thread's OpenMP team, images split over its
// threads. REQUIRES: AmxForwardConvApplies(g) and AmxForwardConvIsAvailable().
absl::Status ConvForwardAmx(const FilterGradGeometry& g, const Tensor& input, const Tensor& filter,
                            const Tensor* bias, bool relu, Tensor* out, Tensor* pooled = nullptr,
                            Tensor* argmax = nullptr);

}  // namespace tandem::nn

#endif  // TANDEM_FRAMEWORK_KERNELS_CPU_CONV_FORWARD_AMX_H_

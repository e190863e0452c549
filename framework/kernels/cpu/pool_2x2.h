// framework/kernels/cpu/pool_2x2.h
//
// Max pooling and its gradient over the common 2x2 windows with stride 2 where every
// window lies inside the input, one output row at a time, on float32 or directly on
// bfloat16 bits. A maximum is one of its inputs and a routed gradient is the incoming
// value or zero, so bfloat16 needs no widening of whole images and no rounding: the
// loops compare widened lanes and copy the 16-bit values. Same choices as the general
// loops in pool_max_kernels.cc (first maximum in row-major window order; -inf start,
// so NaNs are skipped). Where the channels fill whole AVX-512 vectors (16 float32 or
// 32 bfloat16) and the CPU has AVX-512BW and VL, rows run on intrinsics that make the same
// choices lane by lane; other rows run loops compiled for AVX-512, AVX2 and the
// baseline (target_clones). fashion_cnn's bf16 step, AMX Xeon VM, `perf`: the rows'
// share of the step's samples went from 3.1% to 2.6% (gradient) and 1.3% to 1.1%
// (pool); they read the convolution's output from beyond the L2 cache, which bounds them.
// The argmax rows make the same choice and write it as one byte a window, so that the
// gradient can be routed later without the pool's input: an eighth of a bfloat16
// input's bytes, a sixteenth of a float32 one's.
//
// Thread safety: pure functions.
#ifndef TANDEM_FRAMEWORK_KERNELS_CPU_POOL_2X2_H_
#define TANDEM_FRAMEWORK_KERNELS_CPU_POOL_2X2_H_

#include <cstdint>

#include "framework/kernels/cpu/pool_util.h"

namespace tandem::nn {

// Whether `s` is 2x2 windows of stride 2, all inside the input (no padding used).
bool IsFull2x2(const PoolGeometry& s);

// out[ox, ch] = max of the window over input rows r0, r1 (each [w, c]), for ox < ow.
void MaxPool2x2Row(const float* r0, const float* r1, float* out, int64_t ow, int64_t c);
void MaxPool2x2Row(const uint16_t* r0, const uint16_t* r1, uint16_t* out, int64_t ow, int64_t c);

// Writes the gradient of one output row: g[ox, ch] goes to the window's first maximum
// in x rows r0, r1; the window's other elements of d0, d1 get zero.
void MaxPoolGrad2x2Row(const float* r0, const float* r1, const float* g, float* d0, float* d1,
                       int64_t ow, int64_t c);
void MaxPoolGrad2x2Row(const uint16_t* r0, const uint16_t* r1, const uint16_t* g, uint16_t* d0,
                       uint16_t* d1, int64_t ow, int64_t c);

// A window's first maximum as a code (pool_util.h's argmax): 2 * dy + dx of its place,
// or kNoArgmax where every element is NaN (MaxPoolGrad2x2Row routes such a window's
// gradient nowhere).
inline constexpr uint8_t kNoArgmax = 4;

// MaxPool2x2Row, and code[ox, ch] the code of the window's first maximum.
void MaxPoolArgmax2x2Row(const float* r0, const float* r1, float* out, uint8_t* code, int64_t ow,
                         int64_t c);
void MaxPoolArgmax2x2Row(const uint16_t* r0, const uint16_t* r1, uint16_t* out, uint8_t* code,
                         int64_t ow, int64_t c);

// MaxPoolGrad2x2Row with the codes in place of the input rows: g[ox, ch] goes to the
// place code[ox, ch] names in rows d0, d1, and the window's other elements get zero.
void RouteByArgmax2x2Row(const uint8_t* code, const float* g, float* d0, float* d1, int64_t ow,
                         int64_t c);
void RouteByArgmax2x2Row(const uint8_t* code, const uint16_t* g, uint16_t* d0, uint16_t* d1,
                         int64_t ow, int64_t c);

}  // namespace tandem::nn

#endif  // TANDEM_FRAMEWORK_KERNELS_CPU_POOL_2X2_H_

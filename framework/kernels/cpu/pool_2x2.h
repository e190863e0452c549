// framework/kernels/cpu/pool_2x2.h
//
// Max pooling and its gradient over the common 2x2 windows with stride 2 where every
// window lies inside the input, one output row at a time, on float32 or directly on
// bfloat16 bits. A maximum is one of its inputs and a routed gradient is the incoming
// value or zero, so bfloat16 needs no widening of whole images and no rounding: the
// loops compare widened lanes and copy the 16-bit values. Same choices as the general
// loops in pool_max_kernels.cc (first maximum in row-major window order; -inf start,
// so NaNs are skipped). Where the channels fill whole AVX-512 vectors (16 float32 or
// 32 bfloat16) and the CPU has AVX-512BW, rows run on intrinsics that make the same
// choices lane by lane; other rows run loops compiled for AVX-512, AVX2 and the
// baseline (target_clones). fashion_cnn's bf16 step, AMX Xeon VM, `perf`: the rows'
// share of the step's samples went from 3.1% to 2.6% (gradient) and 1.3% to 1.1%
// (pool); they read the convolution's output from beyond the L2 cache, which bounds them.
//
// Thread safety: pure functions.
#ifndef TANDEM_FRAMEWORK_KERNELS_CPU_POOL_2X2_H_
#define TANDEM_FRAMEWORK_KERNELS_CPU_POOL_2X2_H_

#include <cstdint>

#include "framework/kernels/cpu/pool_util.h"

namespace tandem::nn {

// Whether `s` is 2x2 windows of stride 2, all inside the input (no padding used).
bool IsFull2x2(const PoolShape& s);

// out[ox, ch] = max of the window over input rows r0, r1 (each [w, c]), for ox < ow.
void MaxPool2x2Row(const float* r0, const float* r1, float* out, int64_t ow, int64_t c);
void MaxPool2x2Row(const uint16_t* r0, const uint16_t* r1, uint16_t* out, int64_t ow, int64_t c);

// Writes the gradient of one output row: g[ox, ch] goes to the window's first maximum
// in x rows r0, r1; the window's other elements of d0, d1 get zero.
void MaxPoolGrad2x2Row(const float* r0, const float* r1, const float* g, float* d0, float* d1,
                       int64_t ow, int64_t c);
void MaxPoolGrad2x2Row(const uint16_t* r0, const uint16_t* r1, const uint16_t* g, uint16_t* d0,
                       uint16_t* d1, int64_t ow, int64_t c);

}  // namespace tandem::nn

#endif  // TANDEM_FRAMEWORK_KERNELS_CPU_POOL_2X2_H_

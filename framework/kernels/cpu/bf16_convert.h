// framework/kernels/cpu/bf16_convert.h
//
// Bulk conversion between bfloat16 and float32 for the CPU kernels (Cast and the
// bfloat16 paths of the elementwise, bias and pooling kernels). Narrowing rounds to
// nearest even and keeps NaNs NaN, as bfloat16(float) does. The functions are
// compiled for x86-64-v4 (AVX-512), v3 (AVX2) and the baseline and dispatch at load
// time (GCC target_clones), so the kernels library itself stays at its portable
// baseline.
//
// Thread safety: pure functions.
#ifndef TANDEM_FRAMEWORK_KERNELS_CPU_BF16_CONVERT_H_
#define TANDEM_FRAMEWORK_KERNELS_CPU_BF16_CONVERT_H_

#include <cstdint>

#include "framework/tensor/dtype.h"

namespace tandem::nn {

void WidenBf16(const bfloat16* src, float* dst, int64_t n);
void NarrowToBf16(const float* src, bfloat16* dst, int64_t n);
// acc[j] += x[r * c + j] for r in [0, rows), j in [0, c), in float32, row by row (the
// column sums of BiasAddGrad on bfloat16).
void AccumulateBf16Rows(const bfloat16* x, int64_t rows, int64_t c, float* acc);

// Elements per tile of the bfloat16 loops that widen, compute in float32 and narrow.
inline constexpr int64_t kBf16Tile = 1024;

}  // namespace tandem::nn

#endif  // TANDEM_FRAMEWORK_KERNELS_CPU_BF16_CONVERT_H_

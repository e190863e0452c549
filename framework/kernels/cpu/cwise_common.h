// framework/kernels/cpu/cwise_common.h
//
// Internal helpers of the CPU math kernels (elementwise and reductions); not for use
// outside framework/kernels/cpu.
//
//  - BroadcastPlan: numpy broadcasting of two shapes, with runs of dimensions that
//    broadcast the same way merged, so that every case becomes "rows" of contiguous
//    (or scalar-repeated) operands: same shape, scalar and [N,C]+[C] are one row loop
//    or a loop of long rows; only odd layouts pay for index arithmetic per row.
//  - RunBinary / RunUnary: the loops, written so that -O3 vectorises them, split over
//    the step's intra-op pool (PoolParallelFor, parallel.h).
//
// Thread safety: stateless functions.
#ifndef TANDEM_FRAMEWORK_KERNELS_CPU_CWISE_COMMON_H_
#define TANDEM_FRAMEWORK_KERNELS_CPU_CWISE_COMMON_H_

#include <algorithm>
#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/parallel.h"
#include "framework/kernels/kernel_registry.h"
#include "framework/kernels/op_kernel.h"

namespace tandem::cwise {

// Broadcasting of x and y, dimensions of the output merged where they broadcast alike.
// dims[i] is a merged output dimension; x_stride[i]/y_stride[i] are the operands'
// element strides in it (0 where the operand is broadcast). Size-1 output dims are
// dropped, so dims is empty for a single-element output.
struct BroadcastPlan {
  TensorShape out_shape;
  Dims dims;
  Dims x_stride;
  Dims y_stride;
  bool x_is_out = false;  // x has exactly the output's shape.
  bool y_is_out = false;
};

// INVALID_ARGUMENT "incompatible shapes [2,3] and [4]" (callers add the node).
absl::StatusOr<BroadcastPlan> MakeBroadcastPlan(const TensorShape& x, const TensorShape& y);

// out[i] = f(x[i*sx], y[i*sy]) for i in [0, n), sx and sy each 0 or 1.
template <typename T, typename R, typename F>
inline void BinaryRow(const T* x, int64_t sx, const T* y, int64_t sy, R* out, int64_t n, F f) {
  if (sx != 0 && sy != 0) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(x[i], y[i]);
  } else if (sx != 0) {
    const T b = *y;
    for (int64_t i = 0; i < n; ++i) out[i] = f(x[i], b);
  } else if (sy != 0) {
    const T a = *x;
    for (int64_t i = 0; i < n; ++i) out[i] = f(a, y[i]);
  } else {
    const R v = f(*x, *y);
    for (int64_t i = 0; i < n; ++i) out[i] = v;
  }
}

// Computes out = f(x, y) with broadcasting as planned. `out` may alias an operand
// whose shape is the output's.
template <typename T, typename R, typename F>
void RunBinary(const OpKernelContext& ctx, const BroadcastPlan& plan, const T* x, const T* y,
               R* out, F f) {
  const int64_t total = plan.out_shape.num_elements();
  if (total == 0) return;
  const int nd = static_cast<int>(plan.dims.size());
  if (nd == 0) {
    out[0] = f(x[0], y[0]);
    return;
  }
  const int64_t inner = plan.dims[nd - 1];
  const int64_t sx = plan.x_stride[nd - 1], sy = plan.y_stride[nd - 1];
  const int64_t rows = total / inner;
  if (rows == 1) {
    PoolParallelFor(ctx, inner, kParallelGrain, [&](int64_t b, int64_t e) {
      BinaryRow(x + b * sx, sx, y + b * sy, sy, out + b, e - b, f);
    });
    return;
  }
  const int64_t min_rows = std::max<int64_t>(1, kParallelGrain / inner);
  PoolParallelFor(ctx, rows, min_rows, [&](int64_t b, int64_t e) {
    // Mixed-radix counter over the outer dims, starting at row b.
    int64_t idx[TensorShape::kMaxRank] = {};
    int64_t xo = 0, yo = 0;
    int64_t r = b;
    for (int d = nd - 2; d >= 0; --d) {
      idx[d] = r % plan.dims[d];
      r /= plan.dims[d];
      xo += idx[d] * plan.x_stride[d];
      yo += idx[d] * plan.y_stride[d];
    }
    for (int64_t row = b; row < e; ++row) {
      BinaryRow(x + xo, sx, y + yo, sy, out + row * inner, inner, f);
      for (int d = nd - 2; d >= 0; --d) {
        xo += plan.x_stride[d];
        yo += plan.y_stride[d];
        if (++idx[d] < plan.dims[d]) break;
        xo -= plan.x_stride[d] * plan.dims[d];
        yo -= plan.y_stride[d] * plan.dims[d];
        idx[d] = 0;
      }
    }
  });
}

// out[i] = f(x[i]); `out` may alias x.
template <typename T, typename R, typename F>
void RunUnary(const OpKernelContext& ctx, const T* x, R* out, int64_t n, F f) {
  PoolParallelFor(ctx, n, kParallelGrain, [&](int64_t b, int64_t e) {
    const T* xb = x + b;
    R* ob = out + b;
    const int64_t m = e - b;
    for (int64_t i = 0; i < m; ++i) ob[i] = f(xb[i]);
  });
}

// Registration of each kernel family (called by RegisterCpuMathKernels).
void RegisterCpuCwiseBinaryKernels(KernelRegistry* r);
void RegisterCpuCwiseUnaryKernels(KernelRegistry* r);
void RegisterCpuReductionKernels(KernelRegistry* r);

}  // namespace tandem::cwise

#endif  // TANDEM_FRAMEWORK_KERNELS_CPU_CWISE_COMMON_H_

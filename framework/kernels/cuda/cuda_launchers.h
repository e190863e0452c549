// framework/kernels/cuda/cuda_launchers.h
//
// The launchers of the GPU kernels in the .cu files of this folder, for the host code
// of the kernel classes (.cc). Plain declarations over raw device pointers, sizes and
// a stream, so that both nvcc and the host compiler parse this header and nvcc never
// sees abseil or glog. Every launcher queues its kernels on `stream` (nothing when
// there is no element) and returns cudaGetLastError() after the launch.
//
// Unless said otherwise, pointers are device pointers, n/rows/c are element counts
// (>= 0) and nothing is read on the host.
#ifndef TANDEM_FRAMEWORK_KERNELS_CUDA_CUDA_LAUNCHERS_H_
#define TANDEM_FRAMEWORK_KERNELS_CUDA_CUDA_LAUNCHERS_H_

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::gpu {

// Threads per block of the one-dimensional launches, and their grid: enough blocks for
// one thread per element, capped at 65535 (grid-stride loops cover the rest).
inline constexpr int kLaunchThreads = 256;
inline int LaunchGrid(int64_t n) {
  const int64_t b = (n + kLaunchThreads - 1) / kLaunchThreads;
  return static_cast<int>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

// ---- cwise_kernels.cu ----

// y = f(x), elementwise (the CPU kernels' definitions).
enum class UnaryOp : int {
  kNeg,
  kAbs,
  kSign,
  kSquare,
  kSqrt,
  kRsqrt,
  kExp,
  kLog,
  kReciprocal,
  kSigmoid,
  kTanh,
  kRelu,
  kRelu6,
  kElu,
  kSoftplus,
};
cudaError_t LaunchUnary(UnaryOp op, const float* x, float* y, int64_t n, cudaStream_t stream);
// bfloat16 in and out, computed in float32 (rounded to nearest even on store).
cudaError_t LaunchUnaryBf16(UnaryOp op, const __nv_bfloat16* x, __nv_bfloat16* y, int64_t n,
                            cudaStream_t stream);

// out = f(a, b) on same-shape operands: a is input 0, b input 1 of the op, i.e.
// (y, dy) for SigmoidGrad ... ReciprocalGrad, (gradients, features) for ReluGrad,
// Relu6Grad and SoftplusGrad, (gradients, outputs) for EluGrad.
enum class GradOp : int {
  kSigmoidGrad,
  kTanhGrad,
  kSqrtGrad,
  kRsqrtGrad,
  kReciprocalGrad,
  kReluGrad,
  kRelu6Grad,
  kEluGrad,
  kSoftplusGrad,
};
cudaError_t LaunchGrad(GradOp op, const float* a, const float* b, float* out, int64_t n,
                       cudaStream_t stream);
cudaError_t LaunchGradBf16(GradOp op, const __nv_bfloat16* a, const __nv_bfloat16* b,
                           __nv_bfloat16* out, int64_t n, cudaStream_t stream);

// out = f(x, y) with numpy broadcasting.
enum class BinaryOp : int {
  kAdd,
  kSub,
  kMul,
  kRealDiv,
  kMaximum,
  kMinimum,
  kSquaredDifference,
  kPow,
};
inline constexpr int kMaxBroadcastRank = 8;
// Output element i, written as mixed-radix coordinates over dims[0..rank) (row-major,
// dims[rank-1] fastest), reads x[sum coord[d] * x_strides[d]] and likewise y; a
// broadcast dimension has stride 0. rank 0 is a single element.
struct BroadcastIndex {
  int rank = 0;
  int64_t dims[kMaxBroadcastRank] = {};
  int64_t x_strides[kMaxBroadcastRank] = {};
  int64_t y_strides[kMaxBroadcastRank] = {};
};
// n: output elements (the product of dims).
cudaError_t LaunchBinary(BinaryOp op, const BroadcastIndex& index, const float* x, const float* y,
                         float* out, int64_t n, cudaStream_t stream);

// p[0..n) = value.
cudaError_t LaunchFill(float* p, int64_t n, float value, cudaStream_t stream);
// Every element of p = *value, a scalar in device memory.
cudaError_t LaunchFillFromScalar(float* p, int64_t n, const float* value, cudaStream_t stream);
cudaError_t LaunchFillFromScalarBf16(__nv_bfloat16* p, int64_t n, const __nv_bfloat16* value,
                                     cudaStream_t stream);
cudaError_t LaunchFillBf16(__nv_bfloat16* p, int64_t n, float value, cudaStream_t stream);

// Conversions between float32 and bfloat16 (round to nearest even).
cudaError_t LaunchFloatToBf16(const float* x, __nv_bfloat16* y, int64_t n, cudaStream_t stream);
cudaError_t LaunchBf16ToFloat(const __nv_bfloat16* x, float* y, int64_t n, cudaStream_t stream);

// ---- reduction_kernels.cu ----

// The `chunks` for LaunchReduceSum: contiguous runs (inner == 1) of about 4096
// elements per block; strided sums enough (outer, chunk, inner) threads to fill the
// GPU, with at least 8 rows per chunk. Between 1 and min(reduce, 1024).
inline int64_t ReduceChunks(int64_t outer, int64_t reduce, int64_t inner) {
  int64_t chunks;
  if (inner == 1) {
    chunks = (reduce + 4095) / 4096;
  } else {
    const int64_t outputs = outer * inner;
    chunks = (131072 + outputs - 1) / outputs;
    const int64_t by_rows = (reduce + 7) / 8;
    if (chunks > by_rows) chunks = by_rows;
  }
  if (chunks > 1024) chunks = 1024;
  if (chunks > reduce) chunks = reduce;
  return chunks < 1 ? 1 : chunks;
}

// Sums over the middle dimension of x viewed as [outer, reduce, inner], in two passes
// through a float32 scratch `partial` of outer * chunks * inner elements:
//   partial[o, k, i] = sum of x[o, r, i] over rows r of chunk k, where chunk k holds
//                      rows [k * per, min(reduce, (k + 1) * per)), per = ceil(reduce /
//                      chunks);
//   out[o, i] = (sum over k of partial[o, k, i]) / divisor.
// REQUIRES: outer, reduce, inner, chunks >= 1.
cudaError_t LaunchReduceSum(const float* x, float* partial, float* out, int64_t outer,
                            int64_t reduce, int64_t inner, int64_t chunks, float divisor,
                            cudaStream_t stream);
// bfloat16 x and out, float32 partial sums (BiasAddGrad of bfloat16).
cudaError_t LaunchReduceSumBf16(const __nv_bfloat16* x, float* partial, __nv_bfloat16* out,
                                int64_t outer, int64_t reduce, int64_t inner, int64_t chunks,
                                float divisor, cudaStream_t stream);

// ---- nn_kernels.cu ----

// y[r, j] = act(x[r, j] + bias[j]) for x, y [rows, c]; act is ReLU when `relu`, else
// the identity. y may be x (same type).
cudaError_t LaunchBiasAdd(const float* x, const float* bias, float* y, int64_t rows, int64_t c,
                          bool relu, cudaStream_t stream);
cudaError_t LaunchBiasAddBf16(const __nv_bfloat16* x, const __nv_bfloat16* bias, __nv_bfloat16* y,
                              int64_t rows, int64_t c, bool relu, cudaStream_t stream);
// float32 x (a product's accumulators), bfloat16 bias and y: one rounding per element.
cudaError_t LaunchBiasAddFloatToBf16(const float* x, const __nv_bfloat16* bias, __nv_bfloat16* y,
                                     int64_t rows, int64_t c, bool relu, cudaStream_t stream);

// Softmax (or log-softmax when `log`) of every row of x [rows, c]. REQUIRES: c >= 1.
cudaError_t LaunchSoftmax(const float* x, float* y, int64_t rows, int64_t c, bool log,
                          cudaStream_t stream);
// loss[r] = logsumexp(x[r]) - x[r, labels[r]];
// backprop[r, j] = softmax(x[r])[j] - (j == labels[r]).
// REQUIRES: c >= 1 and every label in [0, c) (checked by the caller on the host).
cudaError_t LaunchSparseXent(const float* logits, const int64_t* labels, float* loss,
                             float* backprop, int64_t rows, int64_t c, cudaStream_t stream);

// ---- training_kernels.cu ----
// Hyper-parameters are pointers to float32 scalars in device memory; the formulas are
// the CPU kernels' (framework/kernels/cpu/training_kernels.cc).

cudaError_t LaunchApplyGradientDescent(float* var, const float* alpha, const float* delta,
                                       int64_t n, cudaStream_t stream);
cudaError_t LaunchApplyMomentum(float* var, float* accum, const float* lr, const float* grad,
                                const float* momentum, bool nesterov, int64_t n,
                                cudaStream_t stream);
cudaError_t LaunchApplyAdagrad(float* var, float* accum, const float* lr, const float* grad,
                               int64_t n, cudaStream_t stream);
cudaError_t LaunchApplyAdam(float* var, float* m, float* v, const float* beta1_power,
                            const float* beta2_power, const float* lr, const float* beta1,
                            const float* beta2, const float* epsilon, const float* grad,
                            bool nesterov, int64_t n, cudaStream_t stream);
cudaError_t LaunchApplyRMSProp(float* var, float* ms, float* mom, const float* lr, const float* rho,
                               const float* momentum, const float* epsilon, const float* grad,
                               int64_t n, cudaStream_t stream);
cudaError_t LaunchApplyCenteredRMSProp(float* var, float* mg, float* ms, float* mom,
                                       const float* lr, const float* rho, const float* momentum,
                                       const float* epsilon, const float* grad, int64_t n,
                                       cudaStream_t stream);

// A Philox4x32-10 stream position: framework/core/random.h's PhiloxRandom state.
struct PhiloxState {
  uint32_t counter[4];
  uint32_t key[2];
};
// Dropout: for element i, u = the (i % 4)th word of Philox block i / 4 after `state`,
// as a float in [0, 1); mask[i] = u >= rate ? keep_scale : 0; y[i] = x[i] * mask[i]
// (nn_dropout_kernels.cc on the CPU, bit for bit).
cudaError_t LaunchDropout(const float* x, float* y, float* mask, int64_t n, PhiloxState state,
                          float rate, float keep_scale, cudaStream_t stream);

}  // namespace tandem::gpu

#endif  // TANDEM_FRAMEWORK_KERNELS_CUDA_CUDA_LAUNCHERS_H_

// framework/kernels/cpu/matmul_rows.h
//
// A matrix product computed block of rows by block of rows, each written as float32
// into a buffer of the caller's: for kernels that consume a product while its block is
// still in cache, such as an optimizer's update fused with the MatMul that computes its
// gradient (training_kernels.cc). op(a) [m, k] x op(b) [k, n] with a and b of one
// dtype, float32 or bfloat16 (accumulated in float32 and written unrounded, as MatMul
// with Tout = float32). Create lays both operands out once: op(a) as rows, b in the
// layout oneDNN's kernel wants (else each block would pack all of b again), bfloat16
// ones with the inner dimension padded with zeros to a multiple of 32. Where
// oneDNN has no bfloat16 kernels for the CPU, bfloat16 operands are widened first.
//
// Thread safety: Run may be called from several threads at once for different blocks.
// Inside an OpenMP team a block runs on the calling thread alone (oneDNN does not nest).
#ifndef TANDEM_FRAMEWORK_KERNELS_CPU_MATMUL_ROWS_H_
#define TANDEM_FRAMEWORK_KERNELS_CPU_MATMUL_ROWS_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "framework/kernels/op_kernel.h"
#include "framework/tensor/tensor.h"

namespace tandem::nn {

class MatMulRowBlocks {
 public:
  // The product's blocks of `rows` rows (the last may be shorter). REQUIRES: a and b
  // matrices of one dtype whose inner dimensions agree, rows > 0.
  static absl::StatusOr<MatMulRowBlocks> Create(const OpKernelContext& ctx, const Tensor& a,
                                                bool transpose_a, const Tensor& b, bool transpose_b,
                                                int64_t rows);

  int64_t m() const { return m_; }
  int64_t n() const { return n_; }
  int64_t rows() const { return rows_; }
  int64_t blocks() const { return (m_ + rows_ - 1) / rows_; }
  // Writes rows [i * rows, min(m, (i + 1) * rows)) of the product into `out` [.., n].
  absl::Status Run(int64_t i, float* out) const;

 private:
  struct Primitive;
  MatMulRowBlocks() = default;

  Tensor a_;  // op(a) as rows [m, k] (bytes, where laid out by a reorder)
  int64_t a_element_bytes_ = 0;
  Tensor b_, b_last_;  // b in the layouts of the full blocks' and the last block's kernels
  int64_t m_ = 0, k_ = 0, n_ = 0, rows_ = 0;
  std::shared_ptr<const Primitive> full_, last_;  // blocks of `rows` rows; the last block
  const OpKernelContext* ctx_ = nullptr;
};

}  // namespace tandem::nn

#endif  // TANDEM_FRAMEWORK_KERNELS_CPU_MATMUL_ROWS_H_

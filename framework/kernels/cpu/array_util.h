// framework/kernels/cpu/array_util.h
//
// Helpers of the array kernels: reading shape-like int32/int64 inputs with errors a
// user can act on (shared with the GPU's kernels, which read these inputs in host
// memory), row-major strides, and a dtype-agnostic strided copy that moves elements by
// their byte size (so one structural kernel serves every dtype).
//
// Thread safety: pure functions.
#ifndef TANDEM_FRAMEWORK_KERNELS_CPU_ARRAY_UTIL_H_
#define TANDEM_FRAMEWORK_KERNELS_CPU_ARRAY_UTIL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "framework/kernels/kernel_registry.h"
#include "framework/kernels/op_kernel.h"

namespace tandem::array_kernels {

// Input `i` (int32 or int64, rank <= 1) as int64 values; `what` names it in errors.
absl::StatusOr<std::vector<int64_t>> ReadIndexVector(const OpKernelContext& ctx, int i,
                                                     absl::string_view what);
// Input `i` as one int32/int64 value (a scalar or a 1-element vector).
absl::StatusOr<int64_t> ReadIndexScalar(const OpKernelContext& ctx, int i, absl::string_view what);

// The axes a reduction's optional input 1 names (int32 or int64, rank <= 1; absent =
// all axes, empty = none) as a mask over `rank` dimensions; negative axes count from
// the end. An axis out of range is an error naming it and input 0's shape.
absl::StatusOr<std::vector<bool>> ReducedAxes(const OpKernelContext& ctx, int rank);

// Fill(dims, value)'s output shape: `dims` (input 0) checked as ReadIndexVector does
// and as a shape, and an error unless `value` (input 1) is a scalar.
absl::StatusOr<TensorShape> FillShape(const OpKernelContext& ctx);
// Row-major element strides of `dims`.
std::vector<int64_t> RowMajorStrides(absl::Span<const int64_t> dims);

// For every index vector k over `dims`, copies the element at
// in + sum(k[d] * in_strides[d]) to out + sum(k[d] * out_strides[d]); strides count
// elements of `elem_size` bytes and may be negative. `in` and `out` must not overlap.
void StridedCopy(const char* in, char* out, size_t elem_size, absl::Span<const int64_t> dims,
                 absl::Span<const int64_t> in_strides, absl::Span<const int64_t> out_strides);

// Registration of the kernels of the other array_*.cc files.
void RegisterCpuArraySliceKernels(KernelRegistry* r);
void RegisterCpuArrayGatherKernels(KernelRegistry* r);

}  // namespace tandem::array_kernels

#endif  // TANDEM_FRAMEWORK_KERNELS_CPU_ARRAY_UTIL_H_

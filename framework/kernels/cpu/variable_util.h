// framework/kernels/cpu/variable_util.h
//
// Helpers for kernels that use resource variables: resolve the handle in input i to
// the Var in this device's ResourceMgr, with the errors a user should see
// ("Attempting to use uninitialized value dense/kernel").
#ifndef TANDEM_FRAMEWORK_KERNELS_CPU_VARIABLE_UTIL_H_
#define TANDEM_FRAMEWORK_KERNELS_CPU_VARIABLE_UTIL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/kernels/op_kernel.h"

namespace tandem {

// The handle held by input `i` (INVALID_ARGUMENT if it is not a resource).
absl::StatusOr<ResourceHandle> HandleFromInput(const OpKernelContext& ctx, int i);
// The existing Var of input `i`'s handle; FAILED_PRECONDITION if it was never created.
absl::StatusOr<std::shared_ptr<Var>> LookupVar(const OpKernelContext& ctx, int i);
// The Var of input `i`'s handle, created (uninitialised) with `dtype` if absent.
absl::StatusOr<std::shared_ptr<Var>> LookupOrCreateVar(const OpKernelContext& ctx, int i,
                                                       DType dtype);
// The Vars of inputs [0, n), which must be n different variables (an optimizer's
// variable and its slots); `names` names every input in errors.
absl::StatusOr<std::vector<std::shared_ptr<Var>>> LookupDistinctVars(
    const OpKernelContext& ctx, int n, const std::vector<const char*>& names);
// The int32/int64 `indices` as row numbers of input 0's variable of `var_shape`;
// an index outside [0, var_shape.dim(0)) is an error naming it and the variable.
absl::StatusOr<std::vector<int64_t>> VariableRowIndices(const OpKernelContext& ctx,
                                                        const Tensor& indices,
                                                        const TensorShape& var_shape);
// FAILED_PRECONDITION "Attempting to use uninitialized value <name>".
absl::Status UninitializedError(const ResourceHandle& handle);

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_KERNELS_CPU_VARIABLE_UTIL_H_

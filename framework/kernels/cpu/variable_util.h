// framework/kernels/cpu/variable_util.h
//
// Helpers for kernels that use resource variables, on the CPU and the GPU: resolve the
// handle in input i to the Var in this device's ResourceMgr, with the errors a user
// should see ("Attempting to use uninitialized value dense/kernel"), and check an
// optimizer's variables.
#ifndef TANDEM_FRAMEWORK_KERNELS_CPU_VARIABLE_UTIL_H_
#define TANDEM_FRAMEWORK_KERNELS_CPU_VARIABLE_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
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
// variable and its slots); `names` names every input of the node (another number of
// inputs is an error) and names them in errors.
absl::StatusOr<std::vector<std::shared_ptr<Var>>> LookupDistinctVars(
    const OpKernelContext& ctx, int n, const std::vector<const char*>& names);
// Checks an optimizer's variable and slots, `vars` (inputs [0, vars.size()), whose
// locks the caller holds): each initialized and float32, all of one shape; `names`
// names every input in errors.
absl::Status CheckOptimizerVars(
    const OpKernelContext& ctx, const std::vector<std::shared_ptr<Var>>& vars,
    const std::vector<const char*>& names) ABSL_NO_THREAD_SAFETY_ANALYSIS;
// Checks an optimizer's input `i` past its variables: float32, and a scalar unless it
// is the gradient (input `grad`); `names` names it in errors.
absl::Status CheckOptimizerOperand(const OpKernelContext& ctx, int i, int grad,
                                   const std::vector<const char*>& names);
// Runs `update` with every Var of `vars` locked, in address order so that two updates
// sharing variables cannot deadlock; returns its status.
template <typename F>
absl::Status WithVarsLocked(const std::vector<std::shared_ptr<Var>>& vars,
                            F&& update) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  std::vector<Var*> order;
  for (const auto& v : vars) order.push_back(v.get());
  std::sort(order.begin(), order.end());
  for (Var* v : order) v->mu()->Lock();
  absl::Status status = update();
  for (auto it = order.rbegin(); it != order.rend(); ++it) (*it)->mu()->Unlock();
  return status;
}
// The int32/int64 `indices` as row numbers of input 0's variable of `var_shape`;
// an index outside [0, var_shape.dim(0)) is an error naming it and the variable.
absl::StatusOr<std::vector<int64_t>> VariableRowIndices(const OpKernelContext& ctx,
                                                        const Tensor& indices,
                                                        const TensorShape& var_shape);
// FAILED_PRECONDITION "Attempting to use uninitialized value <name>".
absl::Status UninitializedError(const ResourceHandle& handle);

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_KERNELS_CPU_VARIABLE_UTIL_H_

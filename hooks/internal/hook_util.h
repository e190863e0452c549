// hooks/internal/hook_util.h
//
// Helpers shared by the built-in hooks (not for use outside hooks/): finding the
// global step's read tensor and reading int64 scalars.
//
// Thread safety: pure functions (the session ones as thread-safe as Session::Run).
#ifndef TANDEM_HOOKS_INTERNAL_HOOK_UTIL_H_
#define TANDEM_HOOKS_INTERNAL_HOOK_UTIL_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "framework/graph/graph.h"
#include "framework/runtime/session.h"
#include "framework/tensor/tensor.h"
#include "hooks/session_run_hook.h"

namespace tandem::hooks_internal {

// The name of the global step's read tensor ("global_step/Read/ReadVariableOp:0");
// FAILED_PRECONDITION "<hook>: the graph has no global step ..." when there is none.
absl::StatusOr<std::string> GlobalStepTensorName(Graph* graph, absl::string_view hook);

// Run args that fetch `tensor` (a hook's BeforeRun asking for the global step).
inline SessionRunArgs FetchOf(const std::string& tensor) {
  SessionRunArgs args;
  args.fetches.push_back(tensor);
  return args;
}

// The value of an integer (or integral-valued) scalar; INVALID_ARGUMENT naming `what`
// otherwise.
absl::StatusOr<int64_t> ScalarToInt64(const Tensor& t, absl::string_view what);

// Runs `tensor` alone and returns it as an int64.
absl::StatusOr<int64_t> ReadInt64(Session* session, const std::string& tensor);

}  // namespace tandem::hooks_internal

#endif  // TANDEM_HOOKS_INTERNAL_HOOK_UTIL_H_

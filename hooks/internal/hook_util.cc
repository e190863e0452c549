// hooks/internal/hook_util.cc
#include "hooks/internal/hook_util.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/ops/optimizer.h"

namespace tandem::hooks_internal {

absl::StatusOr<std::string> GlobalStepTensorName(Graph* graph, absl::string_view hook) {
  std::optional<ops::Variable> step = ops::GetGlobalStep(graph);
  if (!step.has_value() || !step->valid()) {
    return absl::FailedPreconditionError(absl::StrCat(
        hook, ": the graph has no global step; create one with ops::GetOrCreateGlobalStep"));
  }
  return step->value().name();
}

absl::StatusOr<int64_t> ScalarToInt64(const Tensor& t, absl::string_view what) {
  if (!t.IsInitialized() || t.dtype() == DType::kResource || t.NumElements() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": expected a scalar, got shape ", t.shape().DebugString()));
  }
  switch (t.dtype()) {
    case DType::kInt64:
      return t.scalar<int64_t>();
    case DType::kInt32:
      return static_cast<int64_t>(t.scalar<int32_t>());
    default: {
      const double v = t.ValueAsDouble(0);
      if (!std::isfinite(v) || v != std::floor(v)) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": expected an integer scalar, got ", v));
      }
      return static_cast<int64_t>(v);
    }
  }
}

absl::StatusOr<int64_t> ReadInt64(Session* session, const std::string& tensor) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<Tensor> out, session->Run({}, {tensor}));
  if (out.size() != 1) {
    return absl::InternalError(
        absl::StrCat("fetching ", tensor, " returned ", out.size(), " values"));
  }
  return ScalarToInt64(out[0], tensor);
}

}  // namespace tandem::hooks_internal

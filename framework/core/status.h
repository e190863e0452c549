// framework/core/status.h
//
// Error handling across every tandem boundary: absl::Status / absl::StatusOr<T> with
// canonical codes, and two macros that propagate them.
//
//   TANDEM_RETURN_IF_ERROR(expr);            // returns expr's status if not OK
//   TANDEM_ASSIGN_OR_RETURN(lhs, expr);      // lhs = *expr, or returns its status
//
// AnnotateStatus prefixes context (a file, a tensor name, an op) to a status message
// while keeping its code and payloads.
#ifndef TANDEM_FRAMEWORK_CORE_STATUS_H_
#define TANDEM_FRAMEWORK_CORE_STATUS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tandem {

// Returns `status` with "`context`: " prefixed to its message and its payloads kept
// (a config error stays one); OK stays OK.
inline absl::Status AnnotateStatus(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  absl::Status out(status.code(), absl::StrCat(context, ": ", status.message()));
  status.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

}  // namespace tandem

#define TANDEM_STATUS_CONCAT_INNER_(a, b) a##b
#define TANDEM_STATUS_CONCAT_(a, b) TANDEM_STATUS_CONCAT_INNER_(a, b)

#define TANDEM_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status tandem_status_ = (expr);          \
    if (!tandem_status_.ok()) return tandem_status_; \
  } while (0)

#define TANDEM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return std::move(tmp).status();      \
  lhs = std::move(tmp).value()

#define TANDEM_ASSIGN_OR_RETURN(lhs, expr) \
  TANDEM_ASSIGN_OR_RETURN_IMPL_(TANDEM_STATUS_CONCAT_(tandem_statusor_, __LINE__), lhs, expr)

#endif  // TANDEM_FRAMEWORK_CORE_STATUS_H_

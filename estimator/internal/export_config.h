// estimator/internal/export_config.h
//
// The [export] and [train] warm-start rules of estimator/job_config.h: a key that a
// setting makes meaningless is refused rather than ignored (metric keys without
// strategy "best", warm_start_vars / warm_start_map without warm_start_from), as are
// a warm_start_vars that is not a regex, a "best" metric other than loss without
// metric_mode, and an export name or model name that cannot be a path segment or URL
// segment.
//
// Thread safety: a pure function.
#ifndef TANDEM_ESTIMATOR_INTERNAL_EXPORT_CONFIG_H_
#define TANDEM_ESTIMATOR_INTERNAL_EXPORT_CONFIG_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "estimator/job_config.h"

namespace tandem::internal {

absl::Status CheckExportAndWarmStart(const JobConfig& c,
                                     const std::function<std::string(const std::string&)>& where);

}  // namespace tandem::internal

#endif  // TANDEM_ESTIMATOR_INTERNAL_EXPORT_CONFIG_H_

// apps/trainer/exit_codes.h
//
// The exit codes of every trainer subcommand: 0 on success, 1 for a runtime error, 2
// for a usage or configuration error (a bad flag, a bad job config, a task role that
// cannot run the command; estimator/job_config.h's ConfigError marks the last kind
// wherever in a call it is found), and 128 + N when signal N (SIGTERM: 143, SIGINT:
// 130) stopped `train` or `train_and_evaluate` early (the chief after writing a
// checkpoint; framework/core/termination.h). The error is printed on stderr as
// "error: ...".
#ifndef TANDEM_APPS_TRAINER_EXIT_CODES_H_
#define TANDEM_APPS_TRAINER_EXIT_CODES_H_

#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "estimator/job_config.h"
#include "framework/core/termination.h"

namespace tandem {

inline constexpr int kRuntimeError = 1;
inline constexpr int kUsageError = 2;
// Seconds between SIGTERM and the forced exit of a training task.
inline constexpr double kTerminationGraceSecs = 25;

// Prints "error: <message>" to stderr and returns `code`.
inline int Fail(int code, const absl::Status& status) {
  std::fprintf(stderr, "error: %s\n", std::string(status.message()).c_str());
  return code;
}

// Fail with kUsageError for a config error, kRuntimeError otherwise.
inline int Fail(const absl::Status& status) {
  return Fail(IsConfigError(status) ? kUsageError : kRuntimeError, status);
}

// 128 + the signal when one stopped the process, else Fail(status).
inline int FailOrStopped(const absl::Status& status) {
  if (!termination::Requested()) return Fail(status);
  return Fail(termination::ExitCode(), status);
}

}  // namespace tandem

#endif  // TANDEM_APPS_TRAINER_EXIT_CODES_H_

// estimator/internal/task_server.h
//
// StartTaskServer: the Server of this process's task of a training cluster, as its
// RunConfig names it (cluster, task, session thread counts), with the given token
// and TLS settings. Training tasks start one for their GrpcSession, ps tasks to
// serve their variables. It registers the checkpoint ops first (SaveShard: the chief's
// Saver writes each task's variables on that task).
//
// Thread safety: a pure function.
#ifndef TANDEM_ESTIMATOR_INTERNAL_TASK_SERVER_H_
#define TANDEM_ESTIMATOR_INTERNAL_TASK_SERVER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "estimator/run_config.h"
#include "framework/distributed/server.h"

namespace tandem::internal {

absl::StatusOr<std::unique_ptr<Server>> StartTaskServer(const RunConfig& config,
                                                        const TransportSecurity& security);

}  // namespace tandem::internal

#endif  // TANDEM_ESTIMATOR_INTERNAL_TASK_SERVER_H_

// estimator/internal/task_server.cc
#include "estimator/internal/task_server.h"

#include "checkpoint/shard_ops.h"

namespace tandem::internal {

absl::StatusOr<std::unique_ptr<Server>> StartTaskServer(const RunConfig& config,
                                                        const TransportSecurity& security) {
  // The chief's Saver places a SaveShard on every task that holds variables.
  checkpoint::EnsureCheckpointOps();
  ServerOptions so;
  so.cluster = config.cluster_spec();
  so.task = config.task();
  so.security = security;
  if (config.session_config()) {
    so.inter_op_threads = config.session_config()->inter_op_parallelism_threads;
    so.intra_op_threads = config.session_config()->intra_op_parallelism_threads;
  }
  return Server::Create(so);
}

}  // namespace tandem::internal

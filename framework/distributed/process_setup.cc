#include "framework/distributed/process_setup.h"

#include <malloc.h>

#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "framework/distributed/rpc/grpc_util.h"

namespace tandem {

void InitProcess(const ProcessOptions& options) {
  if (options.keep_large_blocks_in_heap) {
    mallopt(M_MMAP_THRESHOLD, 512 * 1024 * 1024);
    mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
  }
  if (options.grpc_transport_experiments) {
    setenv("GRPC_EXPERIMENTS", kGrpcTransportExperiments, /*overwrite=*/0);
  }
  if (!options.mutex_deadlock_detection) {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  }
}

}  // namespace tandem

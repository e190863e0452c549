// apps/trainer/liveness.h
//
// LivenessSignals: what lets a scheduler see that a training process is alive, beyond
// the gRPC health check its Server answers on its own port:
//   - [run] liveness_file: the file's modification time is refreshed now and every
//     kLivenessRefreshSecs while the process runs (created if missing), for an exec
//     probe such as `find FILE -newermt '-60 seconds' | grep -q .`. A frozen process
//     (SIGSTOP, a hung VM) stops refreshing it.
//   - [security] health_port, for a task that runs no Server (the evaluator, a local
//     job): a HealthPort of its own on 0.0.0.0:health_port that answers SERVING. Tasks
//     with a Server open the health port with it (framework/distributed/server.h).
// Either ends with the object.
//
// Thread safety: not copyable; the destructor stops the refreshing thread.
#ifndef TANDEM_APPS_TRAINER_LIVENESS_H_
#define TANDEM_APPS_TRAINER_LIVENESS_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "estimator/job_config.h"
#include "framework/distributed/health_port.h"

namespace tandem {

inline constexpr int kLivenessRefreshSecs = 10;

class LivenessSignals {
 public:
  // Starts the signals `job` asks for its role; an error when the file cannot be
  // written or the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<LivenessSignals>> Start(const JobConfig& job);
  ~LivenessSignals();
  LivenessSignals(const LivenessSignals&) = delete;
  LivenessSignals& operator=(const LivenessSignals&) = delete;

 private:
  LivenessSignals() = default;
  std::string file_;
  absl::Notification stop_;
  std::thread refresher_;
  std::unique_ptr<HealthPort> health_port_;
};

}  // namespace tandem

#endif  // TANDEM_APPS_TRAINER_LIVENESS_H_

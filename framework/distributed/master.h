// framework/distributed/master.h
//
// Master: the in-process implementation of MasterInterface for one task. It owns the
// master sessions by handle; each request that may block (creating a session waits
// for the cluster's tasks, a step waits for its partitions) runs on the master's own
// pool, so the transport's threads are never held.
//
// Thread safety: all methods are thread-safe.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_MASTER_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_MASTER_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "framework/core/thread_pool.h"
#include "framework/distributed/master_session.h"

namespace tandem {

class Master : public MasterInterface {
 public:
  explicit Master(MasterEnv env);
  ~Master() override;

  TANDEM_MASTER_RPCS(TANDEM_OVERRIDE_RPC)

  // Every later call fails with UNAVAILABLE (the server is going away).
  void Stop() { stopped_ = true; }

 private:
  absl::StatusOr<std::shared_ptr<MasterSession>> Find(const std::string& handle);
  // True (and `done` called with UNAVAILABLE) once stopped.
  bool Refused(StatusCallback& done);

  const MasterEnv env_;
  std::atomic<bool> stopped_{false};
  ThreadPool pool_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<MasterSession>> sessions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_MASTER_H_

// framework/distributed/worker_rendezvous.h
//
// WorkerRendezvous: the rendezvous of one step on one worker. Values sent by this
// task's partitions are kept in a LocalRendezvous; a receive whose producer is on
// another task becomes a RecvTensor call to that task's worker (found through the
// WorkerCacheInterface), which answers from its own step rendezvous. StartAbort
// fails local waiters and cancels the outstanding remote calls, whose receivers then
// see the abort status rather than a transport error.
//
// Thread safety: as Rendezvous.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_WORKER_RENDEZVOUS_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_WORKER_RENDEZVOUS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "framework/distributed/worker_interface.h"
#include "framework/runtime/rendezvous.h"

namespace tandem {

// "/job:ps/replica:0/task:0" for a full or partial device spec with job and task.
std::string TaskNameOf(const DeviceSpec& device);

class WorkerRendezvous : public Rendezvous {
 public:
  // `task`: this worker's task name. `cache` is not owned and must outlive this.
  WorkerRendezvous(std::string task, int64_t step_id, WorkerCacheInterface* cache);
  ~WorkerRendezvous() override;

  absl::Status Send(const ParsedKey& key, const Tensor& value, bool is_dead) override;
  void RecvAsync(const ParsedKey& key, DoneCallback done) override;
  absl::Status Recv(const ParsedKey& key, const RecvOptions& options, Tensor* value,
                    bool* is_dead) override;
  void StartAbort(const absl::Status& status) override;
  // Receives only from this task's table (serves RecvTensor).
  void RecvLocalAsync(const ParsedKey& key, DoneCallback done) { local_.RecvAsync(key, done); }
  absl::Status status() const { return local_.status(); }

 private:
  void RecvRemote(const ParsedKey& key, const std::string& src_task, DoneCallback done);

  const std::string task_;
  const int64_t step_id_;
  WorkerCacheInterface* const cache_;
  LocalRendezvous local_;
  absl::Mutex mu_;
  absl::flat_hash_set<std::shared_ptr<CallOptions>> inflight_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_WORKER_RENDEZVOUS_H_

// framework/distributed/worker_rendezvous.h
//
// WorkerRendezvous: the rendezvous of one step on one worker. Values sent by this
// task's partitions are kept in a LocalRendezvous; a receive whose producer is on
// another task becomes a RecvTensor call to that task's worker (found through the
// WorkerCacheInterface), which answers from its own step rendezvous. A tensor larger
// than the producer's chunk size arrives in several calls, each checked to continue
// the last, into one buffer (no transport message size limit applies). StartAbort
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
#include "absl/container/flat_hash_map.h"
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
  // A value being served to another task in chunks, kept until its last chunk.
  void Stash(const std::string& key, const Tensor& value);
  // The stashed value of `key` (FAILED_PRECONDITION if none); `drop` forgets it.
  absl::StatusOr<Tensor> Stashed(const std::string& key, bool drop);

 private:
  struct RemoteRecv;
  // True when `key`'s producer is on this task.
  bool IsLocal(const ParsedKey& key) const;
  void RecvRemote(const ParsedKey& key, const std::string& src_task, DoneCallback done);
  // One RecvTensor call for `recv`, from the bytes received so far.
  void IssueRecvCall(std::shared_ptr<RemoteRecv> recv);
  // Checks a chunk against what was received so far and copies it in.
  static absl::Status AddChunk(RemoteRecv* recv, const proto::RecvTensorResponse& r,
                               const Tensor& bytes);

  const std::string task_;
  const int64_t step_id_;
  WorkerCacheInterface* const cache_;
  LocalRendezvous local_;
  absl::Mutex mu_;
  absl::flat_hash_set<std::shared_ptr<CallOptions>> inflight_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Tensor> stash_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_WORKER_RENDEZVOUS_H_

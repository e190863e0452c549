// framework/distributed/worker_rendezvous.h
//
// WorkerRendezvous: the rendezvous of one step on one worker. Values sent by this
// task's partitions are kept in a LocalRendezvous; a receive whose producer is on
// another task becomes a RecvTensor call to that task's worker (found through the
// WorkerCacheInterface), which answers from its own step rendezvous. A tensor larger
// than the producer's chunk size arrives in several calls into one buffer (no
// transport message size limit applies): the first says what the tensor is, then up
// to kChunksInFlight calls for the others are out at once, so they spread over the
// client's connections and each fits one HTTP/2 flow-control window (gRPC 1.51 lets a
// lone stream have about 1 MiB in flight before it must wait for a WINDOW_UPDATE). StartAbort
// fails local waiters and cancels the outstanding remote calls, whose receivers then
// see the abort status rather than a transport error.
//
// Receives from one task that a partition starts in one burst (its _Recv roots, at the
// start of a step: RecvBatching) go out as one call that names every key; the
// producer answers it once any of them is sent, with all that are sent by then, and
// the rest are asked for again the same way. A step that pulls five tensors from a
// task in two waves so costs two calls instead of five.
//
// Thread safety: as Rendezvous.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_WORKER_RENDEZVOUS_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_WORKER_RENDEZVOUS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "framework/distributed/cluster_spec.h"
#include "framework/distributed/worker_interface.h"
#include "framework/runtime/executor.h"
#include "framework/runtime/rendezvous.h"

namespace tandem {

class WorkerRendezvous : public Rendezvous, public RecvBatching {
 public:
  // `task`: this worker's task name. `cache` is not owned and must outlive this.
  WorkerRendezvous(std::string task, int64_t step_id, WorkerCacheInterface* cache);
  ~WorkerRendezvous() override;

  absl::Status Send(const ParsedKey& key, const Tensor& value, bool is_dead) override;
  void RecvAsync(const ParsedKey& key, DoneCallback done) override;
  absl::Status Recv(const ParsedKey& key, const RecvOptions& options, Tensor* value,
                    bool* is_dead) override;
  void StartAbort(const absl::Status& status) override;
  void BeginRecvBatch() override;
  void EndRecvBatch() override;
  // Receives only from this task's table (serves RecvTensor).
  void RecvLocalAsync(const ParsedKey& key, DoneCallback done) { local_.RecvAsync(key, done); }
  // A value of a RecvLocalAnyAsync: which key (its index) and what was sent.
  struct Ready {
    int index = 0;
    Tensor value;
    bool is_dead = false;
  };
  using AnyCallback = std::function<void(const absl::Status&, std::vector<Ready>)>;
  // Receives from this task's table whichever of `keys` (distinct) are sent first:
  // calls `done` once any one is, with every one sent by then, each taken out of the
  // table; the others stay for a later receive. An abort fails it.
  void RecvLocalAnyAsync(std::vector<ParsedKey> keys, AnyCallback done);
  // Chunked receives keep this many calls out at once.
  static constexpr int kChunksInFlight = 8;
  // A value being served to another task in chunks, kept until `chunks` more chunks
  // (the ones after the first) have been taken.
  void Stash(const std::string& key, const Tensor& value, int64_t chunks);
  // The stashed value of `key`, for one chunk (FAILED_PRECONDITION if none); the
  // stash forgets it when its last chunk is taken.
  absl::StatusOr<Tensor> TakeChunk(const std::string& key);

 private:
  struct RemoteRecv;
  // True when `key`'s producer is on this task.
  bool IsLocal(const ParsedKey& key) const;
  // `may_hold`: the call may wait for the end of this thread's RecvBatching burst
  // (not for a receive that blocks the thread).
  void RecvRemote(const ParsedKey& key, const std::string& src_task, DoneCallback done,
                  bool may_hold);
  // What remote receives share with their RecvTensor calls, which may finish after the
  // rendezvous is gone (a failed chunk ends a receive while its other chunks are out).
  struct Calls {
    int64_t step_id = 0;
    absl::Mutex mu;
    absl::Status aborted ABSL_GUARDED_BY(mu);
    absl::flat_hash_set<std::shared_ptr<CallOptions>> inflight ABSL_GUARDED_BY(mu);

    // Counts `call` in flight, unless the step was aborted: returns that status.
    absl::Status Begin(const std::shared_ptr<CallOptions>& call);
    // `call` came back: forgets it; returns the abort status (OK if none).
    absl::Status End(const std::shared_ptr<CallOptions>& call);
  };
  // One RecvTensor call for `recv`, for the bytes from `offset`.
  static void IssueRecvCall(std::shared_ptr<Calls> calls, std::shared_ptr<RemoteRecv> recv,
                            uint64_t offset);
  // One RecvTensor call for all of `recvs` (from one task); asks again for those it
  // did not answer.
  static void IssueBatchCall(std::shared_ptr<Calls> calls,
                             std::vector<std::shared_ptr<RemoteRecv>> recvs);
  // Issues the receives of one task: one call, or one for all of them.
  static void IssueRecvCalls(std::shared_ptr<Calls> calls,
                             std::vector<std::shared_ptr<RemoteRecv>> recvs);
  // Takes what the call for the bytes of `recv` from `offset` returned (`r`, `bytes`):
  // finishes the receive, or asks for its next chunks.
  static void OnRecvReply(const std::shared_ptr<Calls>& calls,
                          const std::shared_ptr<RemoteRecv>& recv, uint64_t offset,
                          const proto::RecvTensorResponse& r, const Tensor& bytes);
  struct AnyRecv;  // The state of one RecvLocalAnyAsync.
  // The receives held by one RecvBatching burst; this thread's bursts, innermost last.
  struct PendingBurst;
  static std::vector<PendingBurst>& Bursts();
  // Checks the chunk asked for at `offset` and copies it in.
  static absl::Status AddChunk(RemoteRecv* recv, uint64_t offset,
                               const proto::RecvTensorResponse& r, const Tensor& bytes);

  const std::string task_;
  WorkerCacheInterface* const cache_;
  LocalRendezvous local_;
  absl::Mutex mu_;
  const std::shared_ptr<Calls> calls_;
  struct Stashed {
    Tensor value;
    int64_t chunks_left = 0;
  };
  absl::flat_hash_map<std::string, Stashed> stash_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_WORKER_RENDEZVOUS_H_

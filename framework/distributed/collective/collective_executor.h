// framework/distributed/collective/collective_executor.h
//
// CollectiveExecutor: this task's member of a collective group (TensorFlow's
// CollectiveExecutor, MultiWorkerMirroredStrategy's group), and the Collectives the
// collective kernels of its steps run on (kernels/collectives.h). The group is the training
// tasks of a cluster in rank order (chief, or worker 0 without one, is rank 0). It runs
// all-reduce, broadcast and all-gather over the worker service: each piece of data is
// pushed by the member that produced it (CollectiveData RPC) to the member that needs
// it, which keeps it until its own collective asks for it, so members may run their
// collectives in any order and no thread ever waits for a peer.
//
//   - Forming the group (Join): every member asks the leader (rank 0), which answers
//     all of them once every rank has asked, with a new generation and each member's
//     incarnation and global step. A member that runs its collectives again after a
//     failure joins again; data of older generations is dropped. Until every member
//     has joined, Join names the missing ones in the log every 30 s.
//   - Algorithms: all-reduce of a buffer at most `small_bytes` uses recursive doubling
//     (log2 N exchanges of the whole buffer; a group that is not a power of two folds
//     its extra ranks in first); a larger one runs a ring reduce-scatter and
//     all-gather (2(N-1) exchanges of 1/N of the buffer), split into lanes of at most
//     `piece_bytes` that move independently, so that the transfer of one lane overlaps
//     the reduction of another. Every member ends with the same bits (each ring
//     segment is summed by one member; recursive doubling adds commutatively).
//     Broadcast sends the source's buffer to every other member; all-gather sends
//     every member's buffer to every other.
//   - Failures: a wait for a peer older than `probe_after_ms` checks the peer's health
//     (GetStatus: does it answer, is it the same incarnation that joined); a dead,
//     restarted or frozen peer, a failed send, or a wait past `timeout_ms` aborts every
//     collective of this generation with UNAVAILABLE naming the peer, and tells the
//     other members, so the step fails on every member within the timeout (sooner
//     when the peer is dead) and the callers re-form the group (Join).
//   - A peer that leaves on purpose (its server stops, usually because it finished)
//     fails only what still needs it: a wait for its data that has not arrived, a send
//     to it. Data it pushed before leaving is still taken, and waits on other members
//     go on, so a member one collective behind the others still completes the step
//     they all completed (with 3 members, recursive doubling's folded rank waits on
//     its partner after the third member is done).
//   - Stopping together: RequestStop marks this member; the mark travels with the
//     all-reduce and all-gather data, so every member that completes the same
//     collectives sees the same StopAgreed().
//
// Thread safety: all methods are thread-safe. Collective callbacks run on RPC or
// watchdog threads and must not block.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_COLLECTIVE_COLLECTIVE_EXECUTOR_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_COLLECTIVE_COLLECTIVE_EXECUTOR_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "framework/distributed/worker_interface.h"
#include "framework/kernels/collectives.h"
#include "framework/tensor/tensor.h"

namespace tandem {

struct CollectiveGroup {
  std::vector<std::string> members;  // Task names by rank; rank 0 leads.
  int rank = 0;                      // This task's rank.
};

struct CollectiveOptions {
  int64_t timeout_ms = 60000;      // A wait for a peer longer than this fails.
  int64_t probe_after_ms = 5000;   // A wait this old checks the peer's health.
  uint64_t piece_bytes = 4 << 20;  // The largest lane of a ring all-reduce.
  uint64_t small_bytes = 2 << 20;  // Recursive doubling up to this many bytes.
};

struct CollectiveAlgorithms;

class CollectiveExecutor : public Collectives {
 public:
  // `workers` reaches every member (not owned; outlives this). `incarnation`: this
  // task's CPU device incarnation, which GetStatus reports to peers.
  CollectiveExecutor(std::string task_name, uint64_t incarnation, WorkerCacheInterface* workers);
  ~CollectiveExecutor() override;
  CollectiveExecutor(const CollectiveExecutor&) = delete;
  CollectiveExecutor& operator=(const CollectiveExecutor&) = delete;

  // Sets the group once (INVALID_ARGUMENT for a bad rank or a group without this task;
  // FAILED_PRECONDITION when another group was set).
  absl::Status Configure(CollectiveGroup group, CollectiveOptions options);
  bool configured() const;
  int rank() const;
  int size() const override;
  // "worker:1" style name of `rank`'s task, for messages.
  std::string MemberName(int rank) const;

  struct Formation {
    uint64_t generation = 0;
    std::vector<int64_t> global_steps;  // By rank.
    int source = 0;  // The lowest rank with the highest global step: Broadcast's source.
  };
  // Forms the group (blocking): waits up to `wait_ms` for every member, logging the
  // missing ones. `fingerprint` describes this member's collective ops; members whose
  // fingerprints differ are FAILED_PRECONDITION (they built different graphs).
  absl::StatusOr<Formation> Join(int64_t global_step, const std::string& fingerprint,
                                 int64_t wait_ms);
  // The broadcast source of the current generation.
  int source() const;

  // Sums the float32 `data` over the group, in place, and multiplies the sum by
  // `scale` (1 / size(): the mean). Each (instance_key) must run once per step on every
  // member, in any order relative to other instances. Each element is scaled once, by
  // the member that completes its sum, so every member ends with the same bits.
  void AllReduceSum(int64_t instance_key, Tensor data, Done done, float scale = 1.0f) override;
  // Every member's `data` (same byte size everywhere) ends with the source's bytes.
  void Broadcast(int64_t instance_key, Tensor data, Done done) override;
  // Every member's `data`, in rank order, as bytes. With `same_size`, a member whose
  // byte size differs from this one's fails the collective (different graphs); without,
  // each member may bring any size.
  void AllGather(int64_t instance_key, Tensor data,
                 std::function<void(absl::StatusOr<std::vector<Tensor>>)> done,
                 bool same_size = true) override;

  // Marks this member as wanting to stop; StopAgreed() becomes true on every member
  // once they have completed an all-reduce or all-gather that started after it.
  void RequestStop() { stop_requested_ = true; }
  bool StopAgreed() const { return stop_agreed_; }

  // Fails every pending collective of this generation, and the ones started later
  // until the next Join, with `status`, and tells the other members to do the same (so a
  // member waiting on this one fails at once instead of at its timeout).
  void Abort(const absl::Status& status) { Abort(status, /*tell_peers=*/true, /*leaving=*/false); }
  // As Abort, for a member that stops taking part (its server is stopping): logged as
  // routine, not as a failure.
  void Leave(const std::string& reason) {
    Abort(absl::UnavailableError(reason), /*tell_peers=*/true, /*leaving=*/true);
  }

  // RPC handlers (Worker forwards them).
  void HandleData(const WireMessage<proto::CollectiveDataRequest>& request, Done done);
  void HandleJoin(const proto::CollectiveJoinRequest& request,
                  proto::CollectiveJoinResponse* response, Done done);

 private:
  class Run;
  friend class Run;
  friend struct CollectiveAlgorithms;
  // (generation, instance, sequence, phase, piece, source rank).
  using Key = std::tuple<uint64_t, int64_t, int64_t, int32_t, int32_t, int32_t>;
  using RecvDone = std::function<void(const absl::Status&, Tensor, bool stop)>;
  struct Slot {
    bool has_data = false;
    Tensor data;
    bool stop = false;
    RecvDone waiter;
    int64_t wait_id = 0;
  };
  struct Wait {
    int peer;
    int64_t since_us;
  };

  // `leaving`: this member stops on purpose, which is logged as routine.
  void Abort(const absl::Status& status, bool tell_peers, bool leaving);
  // `peer` left on purpose with `status`: fails the waits for its data and aborts the
  // group when there are any; otherwise records it, for Recv and Send.
  void PeerLeft(int peer, const absl::Status& status);
  // The status of `peer` when it left this generation; OK while it takes part.
  absl::Status LeftLocked(int peer) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts an RPC this executor starts until the returned guard (held by the RPC's
  // callback) is dropped; the destructor waits for all of them.
  std::shared_ptr<void> RpcInFlight();
  // What a collective starts with: the group as it stands, this instance's sequence.
  struct Start {
    uint64_t generation = 0;
    int64_t sequence = 0;
    int rank = 0;
    int size = 1;
    int source = 0;
    CollectiveOptions options;
  };
  // Starts a collective of `instance_key`, or returns the abort status.
  absl::StatusOr<Start> Begin(int64_t instance_key);
  // Sends `data` to `peer`; `done` gets the RPC status.
  void Send(const Key& key, int peer, Tensor data, bool stop, Done done);
  // Calls `done` with the piece under `key` once it arrives (or the abort status).
  void Recv(const Key& key, RecvDone done);
  int64_t StartWait(int peer);
  void EndWait(int64_t id);
  void Watchdog();
  void Probe(int peer);
  // Answers every member of a complete round.
  void JoinReply();
  std::string MemberNameLocked(int rank) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Formations this member left, newest last (data for them is refused).
  static constexpr size_t kPastGenerations = 16;

  const std::string task_name_;
  const uint64_t incarnation_;
  WorkerCacheInterface* const workers_;
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> stop_agreed_{false};

  mutable absl::Mutex mu_;
  CollectiveGroup group_ ABSL_GUARDED_BY(mu_);
  CollectiveOptions options_ ABSL_GUARDED_BY(mu_);
  bool configured_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int source_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<uint64_t> incarnations_ ABSL_GUARDED_BY(mu_);  // By rank, from Join.
  std::deque<uint64_t> past_generations_ ABSL_GUARDED_BY(mu_);
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
  std::map<int, absl::Status> left_ ABSL_GUARDED_BY(mu_);  // Peers that left, by rank.
  std::map<int64_t, int64_t> next_sequence_ ABSL_GUARDED_BY(mu_);
  std::map<Key, Slot> slots_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, Wait> waits_ ABSL_GUARDED_BY(mu_);
  int64_t next_wait_ = 1 ABSL_GUARDED_BY(mu_);
  std::map<int, int64_t> probing_ ABSL_GUARDED_BY(mu_);  // Peer -> probe start.

  // The leader's state of the round being formed.
  struct Joiner {
    proto::CollectiveJoinRequest request;
    proto::CollectiveJoinResponse* response = nullptr;
    Done done;  // Null once answered with the missing members.
    int64_t since_us = 0;
  };
  std::map<int, Joiner> round_ ABSL_GUARDED_BY(mu_);
  proto::CollectiveJoinResponse formed_ ABSL_GUARDED_BY(mu_);  // The last round formed.

  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  int rpcs_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread watchdog_;
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_COLLECTIVE_COLLECTIVE_EXECUTOR_H_

// framework/distributed/worker.h
//
// Worker: the in-process implementation of WorkerInterface for one task. It owns no
// devices: the Server hands it the task's DeviceMgr, where variables live in each
// device's ResourceMgr and so outlive worker sessions (workers that connect later
// share them, as on a TensorFlow parameter server).
//
//   - A worker session (CreateWorkerSession) holds the partitions a master
//     registered and the kernels of their stateful nodes.
//   - RegisterGraph builds one Executor per partition; every node of a partition is
//     on one device of this task, and the graph is built once.
//   - RunGraph starts a partition for a step on the calling thread (its cheap root
//     nodes; the rest run on the inter-op pool) and replies when the step ends; no
//     thread waits for it. All partitions of a step on this task share a
//     WorkerRendezvous, created by whichever of RunGraph or RecvTensor arrives first
//     and ended by CleanupGraph, or by a later RunGraph that lists it among its
//     cleanup_step_ids. A failing partition aborts its step's rendezvous, so the
//     step's other partitions stop waiting.
//   - Ending a step drops its rendezvous and aborts whatever still waits on it. The
//     last kRememberedEndedSteps ended step ids are remembered: a RunGraph or
//     RecvTensor of such a step (a call that was under way when the step ended) is
//     ABORTED at once instead of creating a rendezvous that nothing would ever end.
//   - Cancellation: a RunGraph or a waiting RecvTensor whose CallOptions is cancelled
//     (the gRPC service cancels it when the caller cancels, its deadline passes or
//     the connection drops) ends its step on this task: the executor starts no further
//     node (ExecutorArgs::cancelled) and the step's _Recv waits and RecvTensor calls
//     fail with ABORTED, so no handler waits for a caller that has gone, and the
//     partitions of other tasks that wait on the step see the recoverable error.
//   - RecvTensor answers from the step's rendezvous once the value is sent; a value
//     over recv_chunk_bytes goes in chunks, kept in the step until the last. A call
//     naming several keys (at most 4096, each once) is answered once any one is
//     sent, with every one sent by then (WorkerRendezvous::RecvLocalAnyAsync). A key
//     naming another incarnation of this task's device is ABORTED (the sender's
//     master registered against a previous run of this server).
//   - Unknown session or graph handles are ABORTED, the recoverable error.
//   - CollectiveData and CollectiveJoin go to the task's CollectiveExecutor
//     (FAILED_PRECONDITION when it has none). They need no cancellation: data is
//     answered at once, and a join within seconds even while members are missing.
//
// Thread safety: all methods are thread-safe.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_WORKER_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_WORKER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "framework/core/thread_pool.h"
#include "framework/distributed/worker_interface.h"
#include "framework/distributed/worker_rendezvous.h"
#include "framework/runtime/device.h"
#include "framework/runtime/executor.h"

namespace tandem {

class CollectiveExecutor;

// Chunks keep every message far below gRPC's 2 GiB limit, and let one large tensor
// travel over several connections at once: a 64 MiB RecvTensor went from 1.16-1.17
// to 1.55-1.89 of a raw TCP stream on loopback with 8 MiB chunks (distributed_bench).
// Smaller chunks lost: 1 MiB ones cost a 4 MiB tensor a round trip more than they
// saved (0.58-0.62 -> 0.52-0.55).
inline constexpr uint64_t kDefaultRecvChunkBytes = uint64_t{8} << 20;

// Ended steps a worker remembers, to refuse calls that arrive after their step ended
// (about 0.4 MB). A parameter server serving 8 workers at 1000 steps/s each still
// refuses calls that arrive up to two seconds late; a later one is ended by its
// caller's cancellation instead.
inline constexpr int kRememberedEndedSteps = 16384;

struct WorkerEnv {
  std::string task_name;                         // "/job:ps/replica:0/task:0"
  DeviceMgr* devices = nullptr;                  // Not owned.
  WorkerCacheInterface* worker_cache = nullptr;  // Not owned; reaches the other tasks.
  ThreadPool* inter_op_pool = nullptr;           // Not owned; runs executor nodes.
  ThreadPool* intra_op_pool = nullptr;           // Not owned.
  int intra_op_threads = 0;                      // ExecutorArgs::intra_op_threads.
  std::function<void(const std::string& reason)> on_shutdown;  // May be empty.
  CollectiveExecutor* collective = nullptr;                    // Not owned; may be null.
  // RecvTensor sends a larger tensor in chunks of this many bytes, which the receiver
  // asks for several at a time (WorkerRendezvous) over its connections to this task.
  uint64_t recv_chunk_bytes = kDefaultRecvChunkBytes;
};

class Worker : public WorkerInterface {
 public:
  explicit Worker(WorkerEnv env);
  ~Worker() override;

  TANDEM_WORKER_RPCS(TANDEM_OVERRIDE_RPC)

  // Aborts every step's rendezvous with `status`, and every step started later, so that
  // no call waits for a tensor any more (RecvTensor of a step that never runs, a
  // RunGraph blocked in a _Recv): the server stops with nothing left in flight.
  void AbortAllSteps(const absl::Status& status);
  // Number of steps whose rendezvous this worker holds (for tests).
  int NumLiveSteps() const;
  // Number of RunGraph calls whose partition is still running (for tests).
  int NumRunningGraphs() const { return running_graphs_.load(); }
  // Chunks sent by RecvTensor for tensors over recv_chunk_bytes (for tests).
  int64_t chunks_sent() const { return chunks_sent_; }

 private:
  struct Partition {
    std::unique_ptr<Executor> executor;
    Device* device = nullptr;
    std::vector<DType> arg_dtypes;  // By _Arg index.
  };
  struct Session {
    KernelCache kernels;  // Stateful kernels of this session's partitions.
    absl::Mutex mu;
    std::map<std::string, std::shared_ptr<const Partition>> graphs ABSL_GUARDED_BY(mu);
    int64_t next_graph = 1 ABSL_GUARDED_BY(mu);
  };

  absl::StatusOr<std::shared_ptr<Session>> FindSession(const std::string& handle) const;
  absl::StatusOr<std::shared_ptr<const Partition>> FindGraph(const std::string& session,
                                                             const std::string& graph) const;
  absl::StatusOr<std::unique_ptr<Partition>> BuildPartition(const proto::GraphDef& def,
                                                            Session* session) const;
  // The rendezvous of `step_id`, created if needed; ABORTED for an ended step.
  absl::StatusOr<std::shared_ptr<WorkerRendezvous>> StepRendezvous(int64_t step_id);
  // Ends `step_id` on this task: forgets its rendezvous (if any) after aborting it
  // with `why` (not OK), and remembers the step as ended.
  void EndStep(int64_t step_id, const absl::Status& why);
  absl::Status CheckKey(const ParsedKey& key) const;
  // A rendezvous key a caller sent, parsed and checked against this task's devices.
  absl::StatusOr<ParsedKey> ParseAndCheckKey(const std::string& text) const;
  // RecvTensor of several keys (RecvTensorRequest::more_keys).
  void RecvTensorsAsync(CallOptions* options, const proto::RecvTensorRequest& request,
                        WireMessage<proto::RecvTensorResponse>* response, StatusCallback done);
  // A cancelled call of `step_id` ends that step on this task.
  void EndStepIfCancelled(CallOptions* options, int64_t step_id);
  // Describes `value` (sent as `key` in `step`) in `r` and returns what to send: the
  // value, or its first chunk (the rest is stashed for the calls that follow).
  Tensor ReplyWith(WorkerRendezvous& step, const std::string& key, const Tensor& value,
                   bool is_dead, proto::RecvTensorResponse* r);

  const WorkerEnv env_;
  std::atomic<int64_t> chunks_sent_{0};
  std::atomic<int> running_graphs_{0};
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int64_t, std::shared_ptr<WorkerRendezvous>> steps_ ABSL_GUARDED_BY(mu_);
  absl::Status abort_all_ ABSL_GUARDED_BY(mu_);  // Set by AbortAllSteps.
  // The last kRememberedEndedSteps ended steps, oldest first, and as a set.
  std::deque<int64_t> ended_order_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<int64_t> ended_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_WORKER_H_

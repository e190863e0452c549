// framework/runtime/executor.h
//
// Executor runs one step of an executable graph on one device: every node whose
// inputs are ready is run, cheap ones inline on the thread that readied them,
// expensive ones on the inter-op pool. Each output is released as soon as its last
// consumer has taken it, so kernels can reuse buffers in place and peak memory
// follows the live set. The first error stops new nodes from starting; the step
// returns that error once running nodes finish.
//
// The graph's _Arg nodes read ExecutorArgs::args and _Retval nodes fill
// ExecutorArgs::retvals. Kernels are created once, in Create. An AsyncOpKernel (e.g.
// _Recv) holds no thread while it waits; its successors run once it calls back. A
// pending asynchronous kernel is not interrupted by `cancelled` or the deadline: the
// step's owner aborts the rendezvous it waits on.
//
// Thread safety: Run may be called concurrently (each call has its own step state).
#ifndef TANDEM_FRAMEWORK_RUNTIME_EXECUTOR_H_
#define TANDEM_FRAMEWORK_RUNTIME_EXECUTOR_H_

#include <atomic>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "framework/core/thread_pool.h"
#include "framework/graph/graph.h"
#include "framework/kernels/kernel_registry.h"
#include "framework/runtime/device.h"
#include "framework/runtime/step_stats.h"

namespace tandem {

// A step's rendezvous that can send receives from one task together: the executor
// brackets each burst of nodes it runs on one thread with BeginRecvBatch and
// EndRecvBatch (pairs nest), so the _Recv roots a partition starts at once from one
// task may become one call.
class RecvBatching {
 public:
  virtual ~RecvBatching() = default;
  virtual void BeginRecvBatch() = 0;
  // Starts the receives begun on this thread since the matching BeginRecvBatch.
  virtual void EndRecvBatch() = 0;
};

struct ExecutorArgs {
  int64_t step_id = 0;
  const std::vector<Tensor>* args = nullptr;  // Not owned.
  std::vector<Tensor>* retvals = nullptr;     // Not owned; resized to num_retvals.
  ThreadPool* inter_op_pool = nullptr;        // Null: everything runs inline.
  ThreadPool* intra_op_pool = nullptr;
  // The step's ops run one at a time on the calling thread (no inter-op pool, no
  // other caller's steps applying updates beside them): the kernels' own loops may
  // then use the caller's OpenMP team (parallel.h).
  bool ops_one_at_a_time = false;
  // > 0: OpenMP parallel regions inside kernels (oneDNN) use this many threads, on
  // whichever thread runs the kernel; 0 leaves OpenMP's default (one per core).
  int intra_op_threads = 0;
  Rendezvous* rendezvous = nullptr;
  RecvBatching* recv_batching = nullptr;         // Not owned; may be null.
  Collectives* collective = nullptr;             // Not owned; for collective kernels.
  StepStats* stats = nullptr;                    // Non-null: record per-node timing.
  const std::atomic<bool>* cancelled = nullptr;  // Set by others to stop the step.
  // Wall-clock deadline (env::NowMicros) after which no further node starts and the
  // step fails with DEADLINE_EXCEEDED; 0: none. A kernel already running finishes.
  int64_t deadline_micros = 0;
};

// Kernels of stateful ops (random generators, dropout, variables) shared by every
// executor of one session, keyed by node name, so that their state (e.g. a random
// stream) carries on across Run signatures as in TensorFlow. The runtime's own frame
// ops (_Arg, _Retval, _Send, _Recv) are never shared: they keep no state across
// steps, and an edge's _Send or _Recv may have the same name with another rendezvous
// key in another plan's partition. A name registered again with another op or other
// attributes is an INTERNAL error, never a silently shared kernel. A shared kernel refers to the
// node of the first graph that made it; that graph must live as long as the cache.
class KernelCache {
 public:
  absl::StatusOr<std::shared_ptr<OpKernel>> GetOrCreate(const Node& node, const DeviceType& device,
                                                        const KernelRegistry* registry);

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<OpKernel>> kernels_ ABSL_GUARDED_BY(mu_);
};

class Executor {
 public:
  // `shared` (may be null; not owned) supplies the kernels of stateful nodes.
  static absl::StatusOr<std::unique_ptr<Executor>> Create(std::unique_ptr<Graph> graph,
                                                          Device* device,
                                                          const KernelRegistry* registry,
                                                          KernelCache* shared = nullptr);
  ~Executor();

  // Runs the graph once and waits for it.
  absl::Status Run(const ExecutorArgs& args) const;
  // Runs the graph once and calls `done` with the step's status when every node has
  // run, on whichever thread finished last (possibly before RunAsync returns). Cheap
  // roots run on the calling thread, every other node on the inter-op pool, so an RPC
  // thread may start a step. `args` is copied; what it points to must outlive `done`.
  void RunAsync(const ExecutorArgs& args, std::function<void(const absl::Status&)> done) const;
  int num_args() const { return num_args_; }
  int num_retvals() const { return num_retvals_; }
  const Graph& graph() const { return *graph_; }

 private:
  struct Item {
    std::shared_ptr<OpKernel> kernel;
    std::vector<int> input_slots;  // Global slot of each data input.
    std::vector<int> successors;   // One entry per out edge (data and control).
    int first_slot = 0;
    int initial_pending = 0;
    AsyncOpKernel* async = nullptr;  // `kernel` when it is asynchronous.
    bool cheap = false;
  };
  class StepState;

  Executor() = default;

  std::unique_ptr<Graph> graph_;
  Device* device_ = nullptr;
  std::vector<Item> items_;
  std::vector<int> slot_uses_;  // Consumers of each output slot.
  std::vector<int> roots_;
  int num_slots_ = 0;
  int num_args_ = 0;
  int num_retvals_ = 0;
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_RUNTIME_EXECUTOR_H_

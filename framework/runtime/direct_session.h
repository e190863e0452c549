// framework/runtime/direct_session.h
//
// DirectSession: the in-process Session. It keeps the full graph, places every node
// on this process's devices, and caches the executors of each (feeds, fetches,
// targets) signature, so a step after the first only moves tensors. Variables live in
// the devices' ResourceMgrs for the session's lifetime.
//
// Devices: CPU:0, plus GPU:0.. when SessionOptions::num_gpus asks (placer.h puts each
// node on the GPU when it has a kernel there for the node's dtype, else on the CPU).
// With one device a signature is one Executor; with several, the graph is cut per
// device (partitioner.h) and each step runs one Executor per device, joined by a
// step-local rendezvous whose _Recv moves tensors between host and GPU memory.
//
// Thread safety: as Session.
#ifndef TANDEM_FRAMEWORK_RUNTIME_DIRECT_SESSION_H_
#define TANDEM_FRAMEWORK_RUNTIME_DIRECT_SESSION_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "framework/core/thread_pool.h"
#include "framework/graph/graph.h"
#include "framework/runtime/device.h"
#include "framework/runtime/executor.h"
#include "framework/runtime/feeds.h"
#include "framework/runtime/prepare_graph.h"
#include "framework/runtime/session.h"

namespace tandem {

class DirectSession : public Session {
 public:
  static absl::StatusOr<std::unique_ptr<DirectSession>> Create(const proto::GraphDef& graph,
                                                               const SessionOptions& options);
  ~DirectSession() override;

  absl::Status Extend(const proto::GraphDef& graph) override;
  using Session::Run;
  absl::StatusOr<std::vector<Tensor>> Run(const FeedMap& feeds,
                                          absl::Span<const std::string> fetches,
                                          absl::Span<const std::string> targets,
                                          const RunOptions& options,
                                          RunMetadata* metadata) override;
  absl::Status Close() override;

  DeviceMgr* device_mgr() { return devices_.get(); }

 private:
  struct Executable {
    // One per device; executors[0] runs on the CPU and holds the _Arg and _Retval nodes.
    std::vector<std::unique_ptr<Executor>> executors;
    std::vector<FeedEndpoint> feeds;  // Sorted by name: the order of _Arg indices.
  };
  DirectSession(const SessionOptions& options, std::unique_ptr<DeviceMgr> devices);
  // Prepares `graph`'s new nodes (prepare_graph.h), adds and places them.
  absl::Status ExtendLocked(const proto::GraphDef& graph) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status PlaceNodes() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The executors of the placed executable graph `sub`, one per device it uses.
  absl::Status CreateExecutors(std::unique_ptr<Graph> sub, Executable* exec);
  // One step over several executors.
  static absl::Status RunPartitions(const Executable& exec, const ExecutorArgs& args);
  absl::StatusOr<std::shared_ptr<const Executable>> GetExecutable(
      std::vector<std::string> feeds, absl::Span<const std::string> fetches,
      absl::Span<const std::string> targets);

  SessionOptions options_;
  std::unique_ptr<DeviceMgr> devices_;
  std::unique_ptr<ThreadPool> inter_op_pool_;  // Null when the caller runs every op.
  std::unique_ptr<ThreadPool> intra_op_pool_;  // Null with one intra-op thread.
  int intra_op_threads_ = 1;                   // OpenMP threads of a kernel (ExecutorArgs).
  std::atomic<int64_t> next_step_id_{1};
  absl::Mutex mu_;
  std::unique_ptr<Graph> graph_ ABSL_GUARDED_BY(mu_);
  PreparedGraph prepared_ ABSL_GUARDED_BY(mu_);  // What graph_ holds, as given.
  absl::flat_hash_map<std::string, std::shared_ptr<const Executable>> executables_
      ABSL_GUARDED_BY(mu_);
  // Stateful kernels shared by all executables (their graphs live in executables_).
  KernelCache stateful_kernels_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_RUNTIME_DIRECT_SESSION_H_

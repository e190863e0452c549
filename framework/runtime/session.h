// framework/runtime/session.h
//
// A Session runs steps of one graph: it feeds tensors, runs the nodes the fetches and
// targets need, and returns the fetched tensors. DirectSession runs in this process;
// GrpcSession (framework/distributed) sends each step to a master. Both keep
// variables between steps. Names are "node:index" (or "node" for output 0) for
// feeds and fetches, node names for targets.
//
// Thread safety: Run may be called from several threads at once; Extend and Close
// may not race with Run.
#ifndef TANDEM_FRAMEWORK_RUNTIME_SESSION_H_
#define TANDEM_FRAMEWORK_RUNTIME_SESSION_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "framework/protos/graph.pb.h"
#include "framework/runtime/mixed_precision.h"
#include "framework/runtime/step_stats.h"
#include "framework/tensor/tensor.h"

namespace tandem {

class Collectives;  // framework/kernels/collectives.h

using FeedMap = std::vector<std::pair<std::string, Tensor>>;

struct SessionOptions {
  // Threads that run a step's ops (inter) and the threads inside one op (intra), the
  // caller counted in both: N means the caller and N - 1 pool threads. With one
  // inter-op thread the caller runs the step's ops one at a time, each on all intra-op
  // threads (a session with a collective executor or a GPU keeps one pool thread for
  // callbacks). 0: one inter-op thread (oneDNN's OpenMP teams of two ops at once would
  // oversubscribe the cores), one intra-op thread per core.
  int inter_op_threads = 0;
  int intra_op_threads = 0;
  // Place nodes asking for a missing device (e.g. a GPU) on the CPU instead of failing.
  bool allow_soft_placement = true;
  std::string target;  // "" (in process) or "grpc://host:port".
  // Remote sessions only: partial device specs ("/job:ps", "/job:worker/task:1") the
  // session may use; the master contacts only their tasks. Empty: every task.
  std::vector<std::string> device_filters;
  // Remote sessions only: how long creating the session waits for the cluster's
  // tasks to come up; 0: 60 s.
  int64_t wait_for_workers_ms = 0;
  // Remote sessions only: the deadline of a step whose RunOptions set none
  // (TensorFlow's operation_timeout_in_ms); 0: none. A step past it fails
  // DEADLINE_EXCEEDED.
  int64_t operation_timeout_ms = 0;
  // kMixedBfloat16 rewrites the graph the session is created with
  // (framework/runtime/mixed_precision.h); then, whatever the precision, bias and ReLU
  // chains are fused (framework/runtime/remapper.h). Nodes added later by Extend are
  // rewritten and fused the same way, in the context of the whole graph
  // (framework/runtime/prepare_graph.h).
  Precision precision = Precision::kFloat32;
  // In-process sessions only: the collective group that the graph's collective ops
  // (framework/ops/collective_ops.h) reduce over. Not owned; must outlive the session.
  // Null: a graph with collective ops fails when it runs them.
  Collectives* collective = nullptr;
  // In-process sessions only: GPUs to compute on (GPU:0..num_gpus-1); -1 every visible
  // GPU, 0 none. More than the process sees fails the session's creation.
  int num_gpus = 0;
  double gpu_memory_fraction = 0.9;  // Of each GPU's memory the session's tensors may use.
};

class Session {
 public:
  virtual ~Session() = default;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Adds the nodes of `graph` that the session's graph does not have yet.
  virtual absl::Status Extend(const proto::GraphDef& graph) = 0;
  // Runs one step. On error no fetched value is returned, and variables keep
  // whatever the ops that already ran wrote.
  virtual absl::StatusOr<std::vector<Tensor>> Run(const FeedMap& feeds,
                                                  absl::Span<const std::string> fetches,
                                                  absl::Span<const std::string> targets,
                                                  const RunOptions& options,
                                                  RunMetadata* metadata) = 0;  // May be null.
  absl::StatusOr<std::vector<Tensor>> Run(const FeedMap& feeds,
                                          absl::Span<const std::string> fetches,
                                          absl::Span<const std::string> targets = {}) {
    return Run(feeds, fetches, targets, RunOptions(), nullptr);
  }
  virtual absl::Status Close() = 0;

 protected:
  Session() = default;
};

// Returns a session on this process's devices for `graph`. Errors in the graph
// (unknown ops, bad attrs, shape mismatches) are reported here.
absl::StatusOr<std::unique_ptr<Session>> NewDirectSession(const proto::GraphDef& graph,
                                                          const SessionOptions& options = {});

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_RUNTIME_SESSION_H_

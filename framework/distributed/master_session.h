// framework/distributed/master_session.h
//
// MasterSession: one client session on a master. It keeps the client's full graph,
// placed on the devices of the tasks the session may use (its device filters), and
// for each run signature (feeds, fetches, targets) a registered step plan: the pruned
// graph cut into one partition per device with _Send/_Recv on every cut edge, each
// partition registered once with its task's worker. A step then only moves tensors:
// RunGraph on every partition in parallel under one step id; the first error aborts
// the step on every task (no partition is left waiting) and is returned naming the
// task that failed; finally every task drops the step's rendezvous.
//
// Step ids start at a random 63-bit value, so steps of different clients (between-
// graph replication: several masters driving one ps) never share a rendezvous.
//
// Thread safety: Run may be called concurrently; Extend and Close take the session
// lock.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_MASTER_SESSION_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_MASTER_SESSION_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "framework/distributed/master_interface.h"
#include "framework/graph/graph.h"
#include "framework/runtime/feeds.h"

namespace tandem {

struct MasterEnv {
  std::string task_name;  // The master's task: where nodes without a device go.
  WorkerCacheInterface* worker_cache = nullptr;  // Not owned.
};

// The devices of `tasks` (all the cache's tasks that match one of `filters`, or all
// when empty), waiting up to `wait_ms` for tasks that are not up yet (UNAVAILABLE).
absl::StatusOr<std::vector<proto::DeviceAttributes>> ListClusterDevices(
    WorkerCacheInterface* cache, const std::vector<std::string>& filters, int64_t wait_ms);

// The distinct tasks ("/job:ps/replica:0/task:0") of `devices`, in first-seen order.
absl::StatusOr<std::vector<std::string>> TasksOfDevices(
    const std::vector<proto::DeviceAttributes>& devices);

class MasterSession {
 public:
  static absl::StatusOr<std::unique_ptr<MasterSession>> Create(const MasterEnv& env,
                                                               std::string handle,
                                                               const proto::GraphDef& graph,
                                                               const proto::SessionConfig& config);
  ~MasterSession();

  const std::string& handle() const { return handle_; }
  const std::vector<proto::DeviceAttributes>& devices() const { return devices_; }
  // Adds nodes and places them; returns the new graph version.
  absl::StatusOr<int64_t> Extend(const proto::GraphDef& graph, int64_t current_version);
  int64_t graph_version() {
    absl::MutexLock lock(&mu_);
    return graph_version_;
  }
  absl::Status Run(const WireMessage<proto::RunStepRequest>& request,
                   WireMessage<proto::RunStepResponse>* response);
  // Drops the cached plans, cleans up the finished steps' state on the workers
  // (CleanupGraph) and deletes the worker sessions, which drop their registered
  // partitions with them.
  absl::Status Close();

 private:
  struct Part {
    std::string task;
    WorkerInterface* worker = nullptr;  // Not owned.
    std::string graph_handle;
    std::vector<int> arg_global;     // Local _Arg index -> position in the sorted feeds.
    std::vector<int> retval_global;  // Local _Retval index -> position in the fetches.
    proto::GraphDef def;             // Until it is registered.
  };
  struct Plan {
    std::vector<FeedEndpoint> feeds;  // Sorted by name.
    std::vector<Part> parts;
    std::vector<std::string> tasks;  // The distinct tasks of `parts`.
  };

  MasterSession(const MasterEnv& env, std::string handle);
  absl::StatusOr<int64_t> ExtendLocked(const proto::GraphDef& graph, int64_t current_version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::shared_ptr<const Plan>> GetPlan(std::vector<std::string> feeds,
                                                      const std::vector<std::string>& fetches,
                                                      std::vector<std::string> targets);
  // Places, partitions and renumbers the step's graph (under mu_, which guards the graph).
  absl::StatusOr<std::shared_ptr<Plan>> BuildPlan(const std::vector<std::string>& feeds,
                                                  const std::vector<std::string>& fetches,
                                                  const std::vector<std::string>& targets)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Registers every partition of `plan` with its task, all at once and without mu_
  // (a slow task holds up no other step); on an error the ones registered are dropped.
  absl::Status RegisterPlan(Plan* plan) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status RunPlan(const Plan& plan, const std::vector<Tensor>& feeds,
                       const proto::RunStepRequest& options,
                       WireMessage<proto::RunStepResponse>* response);
  void Deregister(const Plan& plan);
  // Sends CleanupGraph for `step_id` to `task` without waiting; a non-OK `abort`
  // aborts the step's rendezvous there.
  void CleanupAsync(const std::string& task, int64_t step_id, const absl::Status& abort);

  const MasterEnv env_;
  const std::string handle_;
  proto::SessionConfig config_;
  std::vector<proto::DeviceAttributes> devices_;
  std::vector<std::string> tasks_;  // Tasks that hold at least one of devices_.
  std::atomic<int64_t> next_step_id_;
  absl::Mutex mu_;
  std::unique_ptr<Graph> graph_ ABSL_GUARDED_BY(mu_);
  int64_t graph_version_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, std::shared_ptr<const Plan>> plans_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  // Steps that ended without error, by task: the next RunGraph to the task carries
  // them in cleanup_step_ids (Close sends CleanupGraph for any left), which saves a
  // CleanupGraph call per task and step. A list holds at most the steps that ran
  // concurrently with the task's latest one.
  absl::Mutex cleanup_mu_;
  absl::flat_hash_map<std::string, std::vector<int64_t>> finished_steps_
      ABSL_GUARDED_BY(cleanup_mu_);
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_MASTER_SESSION_H_

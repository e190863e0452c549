// framework/distributed/cluster_spec.h
//
// ClusterSpec: the tasks of a training cluster, as in TensorFlow's tf.train.ClusterSpec:
// job name ("chief", "worker", "ps", ...) -> task index -> "host:port". Task indices may
// be sparse ({"worker": {"1": "h:2222"}} in TF_CONFIG). Every address is validated when
// it is added: "host:port" with a port in 1..65535, IPv6 hosts in brackets
// ("[::1]:2222"). Parsing TF_CONFIG JSON and TOML into a ClusterSpec lives with those
// formats (estimator/run_config.h, estimator/job_config.h); this header knows no format
// and no transport, so the distributed runtime (placer, GrpcServer) builds on it.
//
// Target tandem_distributed_base (depends on tandem_graph only); the rest of
// framework/distributed joins it with the distributed runtime.
//
// Thread safety: value type; const methods may be called concurrently.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_CLUSTER_SPEC_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_CLUSTER_SPEC_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "framework/graph/device_spec.h"

namespace tandem {

// Well-known job names (TensorFlow's estimator TaskType).
inline constexpr absl::string_view kJobChief = "chief";
inline constexpr absl::string_view kJobMaster = "master";
inline constexpr absl::string_view kJobWorker = "worker";
inline constexpr absl::string_view kJobPs = "ps";
inline constexpr absl::string_view kJobEvaluator = "evaluator";

// OK when `address` is "host:port": host a DNS name or IPv4 address ([A-Za-z0-9._-]+),
// or an IPv6 address in brackets; port a decimal number in 1..65535.
absl::Status ValidateTaskAddress(absl::string_view address);
// OK when `job` is a valid job name: [A-Za-z][A-Za-z0-9_]* (TensorFlow's rule).
absl::Status ValidateJobName(absl::string_view job);

// One task of a cluster: its job and its index in that job. The one identity that
// servers, run configs and the trainer's commands pass around.
// "/job:ps/replica:0/task:0": the task of a full or partial device spec with job and
// task (replica 0 when it has none).
std::string TaskNameOf(const DeviceSpec& device);

struct TaskId {
  std::string job;
  int index = 0;
  std::string ToString() const;    // "worker:1"
  std::string DeviceName() const;  // "/job:worker/replica:0/task:1"
  bool operator==(const TaskId& o) const = default;
};

class ClusterSpec {
 public:
  using TaskMap = std::map<int, std::string>;  // task index -> "host:port"

  ClusterSpec() = default;  // Empty: no cluster (local training).

  // A cluster from dense task lists: {"worker": {"h0:2222", "h1:2222"}}.
  static absl::StatusOr<ClusterSpec> FromJobs(
      const std::map<std::string, std::vector<std::string>>& jobs);

  // Adds one task. Fails with INVALID_ARGUMENT on a bad job name, negative index, bad
  // address, or a task that is already present.
  absl::Status AddTask(absl::string_view job, int task_index, absl::string_view address);
  // Adds `addresses` as tasks 0..n-1 of `job` (which must not exist yet). An empty list
  // adds a job with no tasks.
  absl::Status AddJob(absl::string_view job, const std::vector<std::string>& addresses);

  // True when there is no job at all (TensorFlow: `not cluster_spec`).
  bool empty() const { return jobs_.empty(); }
  // Job names, sorted.
  std::vector<std::string> jobs() const;
  bool HasJob(absl::string_view job) const;
  bool HasTask(absl::string_view job, int task_index) const;
  // Number of tasks of `job` (0 when absent). Sparse jobs count only listed tasks.
  int NumTasks(absl::string_view job) const;
  // Sorted task indices of `job`.
  std::vector<int> TaskIndices(absl::string_view job) const;
  // Total number of tasks over all jobs.
  int TotalTasks() const;
  // "host:port" of a task; NOT_FOUND when it is not in the cluster.
  absl::StatusOr<std::string> TaskAddress(absl::string_view job, int task_index) const;
  absl::StatusOr<std::string> TaskAddress(const TaskId& task) const {
    return TaskAddress(task.job, task.index);
  }
  bool HasTask(const TaskId& task) const { return HasTask(task.job, task.index); }
  const std::map<std::string, TaskMap>& job_tasks() const { return jobs_; }

  // The device name of a task: "/job:worker/replica:0/task:1".
  static std::string TaskDeviceName(absl::string_view job, int task_index);
  static DeviceSpec TaskDevice(absl::string_view job, int task_index);
  // Every task's device name, jobs sorted, then task indices ascending.
  std::vector<std::string> AllTaskDeviceNames() const;

  // JSON-like text, e.g. {"ps": ["h2:2222"], "worker": {"1": "h1:2222"}} (dense jobs as
  // lists, sparse ones as objects), for messages and logs.
  std::string DebugString() const;

  bool operator==(const ClusterSpec& o) const = default;

 private:
  std::map<std::string, TaskMap> jobs_;
  // "host:port" -> "job task N" that listens there: no two tasks share an address.
  std::map<std::string, std::string> address_owner_;
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_CLUSTER_SPEC_H_

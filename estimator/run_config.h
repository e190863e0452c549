// estimator/run_config.h
//
// RunConfig: how an Estimator runs (model_dir, checkpoint and summary cadence, seeds,
// session threads) and where this process sits in a training cluster (task type and
// index, cluster, chief or not, master address, replica counts). The distributed part is
// derived from TF_CONFIG with exactly TensorFlow 1.x's rules
// (tensorflow_estimator/python/estimator/run_config.py,
// _init_distributed_setting_from_environment_var):
//
//   * No "cluster" (local): task type must be "worker" (default) and index 0 (default);
//     is_chief; master = TF_CONFIG "session_master" or ""; 0 ps, 1 worker replica.
//   * "cluster" with a "master" job (legacy, e.g. SageMaker): a "chief" job as well is an
//     error; exactly one master task; an evaluator task is an error; is_chief iff master.
//   * Otherwise "cluster" must have at most one "chief" task; task type and index must be
//     set, index >= 0, the task must be in the cluster, except task type "evaluator",
//     which is not part of the training cluster: its cluster_spec is empty, master "",
//     0 ps and 0 worker replicas. is_chief iff task type is "chief". Looser than
//     TensorFlow's Estimator, on purpose: a cluster without a chief (Kubeflow's default
//     PS/Worker TFJob) is accepted when it has worker 0, which then acts as the chief
//     (logged once), as MultiWorkerMirroredStrategy does.
//   * master: TF_CONFIG "session_master" if set; "" when the cluster has one job with
//     one task; else "grpc://" + this task's address. evaluation_master: TF_CONFIG
//     "eval_session_master" for the evaluator, else "".
//   * num_ps_replicas = #ps; num_worker_replicas = #worker + #chief (or #master).
//   * global_id_in_cluster: chief (or master) first, then the other jobs alphabetically,
//     ps last; a sparse job spans its highest index + 1.
//   * An "evaluator" job inside "cluster" (Kubeflow's operator lists every replica type
//     there) is accepted, as TensorFlow does: it is not counted in num_worker_replicas,
//     the evaluator's own cluster is cleared, and it shifts the global ids of the jobs
//     sorted after it ("worker"). Unlike TensorFlow, the training tasks' cluster_spec
//     leaves it out: the evaluator runs no server, so nothing may connect to or wait on
//     it, and master is derived without it.
//   * replica_index (tandem's, not TensorFlow's): the task's position among the chief
//     (or master) and the workers in index order. It numbers input shards and
//     collective ranks, which the evaluator must not shift.
//   * Default session device filters (between-graph replication): chief/master see ps
//     and themselves, worker k sees ps and "/job:worker/task:k", ps see everyone,
//     evaluator none.
//   * "model_dir" in TF_CONFIG: must be non-empty; when RunConfigOptions::model_dir is
//     also set the two must agree.
//   * "environment": kept; "cloud" (Kubeflow, SageMaker, AI Platform) changes nothing,
//     "google" means the scheduler runs the servers (is_google_environment()).
//   * "service", if present, must be an object.
// Stricter than TensorFlow, on purpose: every address is validated, and a task index
// that is missing from a sparse job is an error (TensorFlow would produce master
// "grpc://None").
//
// Thread safety: value type.
#ifndef TANDEM_ESTIMATOR_RUN_CONFIG_H_
#define TANDEM_ESTIMATOR_RUN_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "framework/distributed/cluster_spec.h"
#include "framework/runtime/mixed_precision.h"

namespace tandem {

// The fields of the TF_CONFIG environment variable that tandem reads.
struct TfConfig {
  ClusterSpec cluster;                             // "cluster"; empty when absent.
  std::string task_type;                           // "task.type"; "" when absent.
  std::optional<int> task_index;                   // "task.index".
  std::string environment;                         // "environment": "cloud", "google", ...
  std::optional<std::string> session_master;       // "session_master".
  std::optional<std::string> eval_session_master;  // "eval_session_master".
  std::optional<std::string> model_dir;            // "model_dir".
  bool operator==(const TfConfig& o) const = default;
};

// Parses TF_CONFIG JSON. "" or "{}" give an empty TfConfig. Jobs in "cluster" are lists
// of addresses or objects from task index ("1") to address. Errors are INVALID_ARGUMENT
// and name the field ("TF_CONFIG: task.index must be an integer, got \"x\"").
absl::StatusOr<TfConfig> ParseTfConfig(absl::string_view json_text);
// ParseTfConfig of the TF_CONFIG environment variable (empty when unset).
absl::StatusOr<TfConfig> TfConfigFromEnvironment();

// The session options a RunConfig carries (TensorFlow's ConfigProto subset).
struct SessionConfig {
  int inter_op_parallelism_threads = 0;  // 0: runtime default.
  int intra_op_parallelism_threads = 0;  // 0: runtime default.
  bool allow_soft_placement = true;
  std::vector<std::string> device_filters;  // Empty: all devices visible.
  bool operator==(const SessionConfig& o) const = default;
};

// What a user sets; the rest of RunConfig is derived.
struct RunConfigOptions {
  std::string model_dir;  // "" = unset (TF_CONFIG's, or the Estimator's).
  std::optional<int64_t> tf_random_seed;
  int64_t save_summary_steps = 100;  // >= 0; 0 disables summaries.
  // At most one may be set. Neither set: every 600 seconds. 0 disables checkpoints (as a
  // falsy value does in TensorFlow's Estimator).
  std::optional<int64_t> save_checkpoints_steps;
  std::optional<int64_t> save_checkpoints_secs;
  int keep_checkpoint_max = 5;                   // >= 0; 0 keeps all.
  double keep_checkpoint_every_n_hours = 10000;  // > 0.
  int64_t log_step_count_steps = 100;            // > 0.
  // > 0: the chief writes a Chrome trace of one training step every this many steps,
  // model_dir/timeline-<global step>.json (ProfilerHook); 0: none.
  int64_t trace_every_steps = 0;
  // The deadline of each training step on a cluster (SessionOptions::
  // operation_timeout_ms); 0: none.
  int64_t operation_timeout_secs = 300;         // >= 0.
  std::optional<SessionConfig> session_config;  // Unset: derived (device filters).
  // GPUs the local sessions compute on: -1 GPU:0 when the process sees one (else the
  // CPU), 0 the CPU only, 1 GPU:0 (session creation fails without one). Ops with a GPU
  // kernel for their dtype run there, the rest on the CPU. More than 1 (towers across
  // GPUs) is UNIMPLEMENTED, and so is 1 on a cluster, whose tasks compute on their CPU.
  int num_gpus = -1;
  double gpu_memory_fraction = 0.9;  // In (0, 1]: of the GPU's memory, for tensors.
  // kMixedBfloat16: matmuls and convolutions (and the ops between them) run on
  // bfloat16 with float32 master weights (framework/runtime/mixed_precision.h), in
  // every session the Estimator creates. Exports stay float32 graphs. A CPU session
  // on a CPU without bfloat16 dot products runs float32 instead (PrecisionForCpu).
  Precision precision = Precision::kFloat32;
};

class RunConfig {
 public:
  // A local config with the defaults, as RunConfig() without TF_CONFIG.
  RunConfig();

  // Validates `options` and applies `tf_config` with TensorFlow's rules (file comment).
  // Errors are INVALID_ARGUMENT naming the field.
  static absl::StatusOr<RunConfig> Create(const RunConfigOptions& options,
                                          const TfConfig& tf_config);
  // Create with the TF_CONFIG environment variable.
  static absl::StatusOr<RunConfig> FromEnvironment(const RunConfigOptions& options = {});

  const std::string& model_dir() const { return model_dir_; }
  std::optional<int64_t> tf_random_seed() const { return tf_random_seed_; }
  int64_t save_summary_steps() const { return save_summary_steps_; }
  std::optional<int64_t> save_checkpoints_steps() const { return save_checkpoints_steps_; }
  std::optional<int64_t> save_checkpoints_secs() const { return save_checkpoints_secs_; }
  // True when a checkpoint saver runs (steps or secs set and > 0).
  bool checkpoints_enabled() const;
  int keep_checkpoint_max() const { return keep_checkpoint_max_; }
  double keep_checkpoint_every_n_hours() const { return keep_checkpoint_every_n_hours_; }
  int64_t log_step_count_steps() const { return log_step_count_steps_; }
  int64_t trace_every_steps() const { return trace_every_steps_; }
  int64_t operation_timeout_secs() const { return operation_timeout_secs_; }
  int num_gpus() const { return num_gpus_; }
  double gpu_memory_fraction() const { return gpu_memory_fraction_; }
  // Unset in local mode unless given; with a cluster, the derived device filters.
  const std::optional<SessionConfig>& session_config() const { return session_config_; }
  Precision precision() const { return precision_; }

  const ClusterSpec& cluster_spec() const { return cluster_spec_; }
  const std::string& task_type() const { return task_type_; }
  int task_id() const { return task_id_; }
  TaskId task() const { return {task_type_, task_id_}; }
  bool is_chief() const { return is_chief_; }
  const std::string& master() const { return master_; }
  const std::string& evaluation_master() const { return evaluation_master_; }
  int num_ps_replicas() const { return num_ps_replicas_; }
  int num_worker_replicas() const { return num_worker_replicas_; }
  // Unset for the evaluator.
  std::optional<int> global_id_in_cluster() const { return global_id_in_cluster_; }
  // 0 .. num_worker_replicas-1 for the chief (or master) and the workers; unset for
  // the ps and evaluator tasks.
  std::optional<int> replica_index() const { return replica_index_; }
  const std::string& environment() const { return environment_; }
  bool is_google_environment() const { return environment_ == "google"; }
  // True when this task is part of a multi-task training cluster.
  bool is_distributed() const { return !cluster_spec_.empty(); }
  // True when this task trains with its variables on the ps tasks of a cluster: a
  // chief, master or worker of a cluster of more than one task.
  bool TrainsOnCluster() const;
  // "/job:<task_type>/replica:0/task:<task_id>"; "" in local mode and for the evaluator.
  std::string task_device_name() const;

  bool operator==(const RunConfig& o) const = default;

 private:
  std::string model_dir_;
  std::optional<int64_t> tf_random_seed_;
  int64_t save_summary_steps_ = 100;
  std::optional<int64_t> save_checkpoints_steps_;
  std::optional<int64_t> save_checkpoints_secs_ = 600;
  int keep_checkpoint_max_ = 5;
  double keep_checkpoint_every_n_hours_ = 10000;
  int64_t log_step_count_steps_ = 100;
  int64_t trace_every_steps_ = 0;
  int64_t operation_timeout_secs_ = 300;
  int num_gpus_ = -1;
  double gpu_memory_fraction_ = 0.9;
  std::optional<SessionConfig> session_config_;
  Precision precision_ = Precision::kFloat32;

  ClusterSpec cluster_spec_;
  std::string task_type_ = "worker";
  int task_id_ = 0;
  bool is_chief_ = true;
  std::string master_;
  std::string evaluation_master_;
  int num_ps_replicas_ = 0;
  int num_worker_replicas_ = 1;
  std::optional<int> global_id_in_cluster_ = 0;
  std::optional<int> replica_index_ = 0;
  std::string environment_;
};

// TensorFlow's default device filters for `task_type`/`task_id` in between-graph
// replication (empty for the evaluator and unknown task types).
std::vector<std::string> DefaultDeviceFilters(absl::string_view task_type, int task_id);

}  // namespace tandem

#endif  // TANDEM_ESTIMATOR_RUN_CONFIG_H_

// estimator/job_config.h
//
// JobConfig: one training job as written in a TOML file (docs/config.md), resolved
// against TF_CONFIG and command-line overrides:
//
//   [model]       name = "fashion_mlp"       registered model name (required)
//   [model.params]                           free-form: numbers, strings, bools, arrays
//   [features.<name>]                        a feature column (estimator/feature_config.h)
//   [data]        dataset, data_dir, train_path, eval_path, eval_batch_size,
//                 shuffle_buffer, prefetch_buffer; for the premade estimators format,
//                 label_name and the csv / tfrecord_example keys
//                 (estimator/internal/data_config.h)
//   [run]         model_dir, save_checkpoints_steps | save_checkpoints_secs,
//                 keep_checkpoint_max, keep_checkpoint_every_n_hours, log_step_count_steps,
//                 trace_every_steps, save_summary_steps, random_seed, inter_op_threads,
//                 intra_op_threads, precision ("float32" or "mixed_bfloat16"),
//                 operation_timeout_secs, liveness_file
//   [train]       max_steps, batch_size, warm_start_from, warm_start_vars,
//                 [train.warm_start_map] "model/var" = "name/in/source"
//   [eval]        steps (0: until the eval input ends), start_delay_secs, throttle_secs, name,
//                 final_on_chief (on a cluster the chief evaluates the final checkpoint)
//   [export]      strategy ("none" | "final" | "latest" | "best"), name, keep,
//                 model_name, metric and metric_mode (strategy "best" only)
//   [distribute]  strategy ("auto" | "none" | "parameter_server" | "collective" |
//                 "multi_worker_mirrored" | "hybrid"), sync, replicas_to_aggregate,
//                 total_num_replicas, on_missing_replicas, missing_replicas_patience_secs,
//                 partitioner ("auto" | "none" | "fixed" | "min_size" | "max_size", and
//                 TensorFlow 1's names), num_shards, max_shards, min_shard_bytes,
//                 max_shard_bytes, bytes_per_pack, collective_timeout_secs,
//                 check_replicas_steps
//   [security]    tls_cert, tls_key, tls_ca, tls_server_name, health_port
//   [cluster]     job = ["host:port", ...]  or  job = { 1 = "host:port" } (sparse ids)
//   [task]        type = "worker", index = 0 (the TOML twin of TF_CONFIG's "task")
//
// Precedence, highest first: `--set section.key=value` overrides (values parsed as TOML;
// an unparsable bare word is taken as a string) > TF_CONFIG ("cluster" replaces [cluster],
// "task" replaces [task], "model_dir" replaces [run] model_dir) > the file > defaults.
// Unknown sections and keys, wrong types and out-of-range values are INVALID_ARGUMENT
// errors that name the key and where its value came from: "job.toml:12:3: [run] unknown
// key 'save_checkpoint_steps' (did you mean 'save_checkpoints_steps'?)",
// "--set train.max_steps=-1: [train] max_steps must be >= 1, got -1".
// The distributed fields are then derived by RunConfig with TensorFlow's rules.
//
// Bounds (config errors): keys of more than 32 dotted segments (checked before the
// TOML parser, which recurses on them; internal/toml_limits.h); [train] batch_size
// and [data] eval_batch_size at most 2^20; [run] inter_op_threads and
// intra_op_threads at most max(8, 2 per core of this machine).
//
// [distribute], checked against the cluster (each refusal is a config error):
//   strategy "auto" (default): parameter-server between-graph training on a cluster
//     with ps tasks (TensorFlow 1.x's behaviour), collective all-reduce on a cluster
//     of several training tasks without one, local training otherwise;
//     "parameter_server": a cluster with ps tasks is required; "collective" (alias
//     "multi_worker_mirrored", MultiWorkerMirroredStrategy): synchronous replicas that
//     each hold every variable and average their gradients by all-reduce
//     (framework/ops/collective_ops.h); a cluster with ps tasks is refused; "hybrid":
//     the model's tables on the ps tasks (partitioned as "parameter_server" does), every
//     other variable mirrored and all-reduced among the training tasks
//     (estimator/internal/hybrid_strategy.cc): each replica's table rows are applied as
//     they come, or with sync = true averaged over the replicas and applied once per
//     step; the cluster needs both kinds of task, and a model without a table is
//     refused; "none": local training only, so a cluster of more than one task is
//     refused.
//   bytes_per_pack (collective): the gradient bucket size, default 25 MiB (the first
//     bucket is at most 1 MiB, as PyTorch DDP's); collective_timeout_secs (default 60): a
//     replica that stops answering fails every other replica's step after at most this
//     long (a dead or frozen one sooner, by the health check); check_replicas_steps
//     (default 1000, 0: never): every so many steps the replicas compare checksums of
//     their variables and fail naming the ones that differ. These keys are refused
//     with another strategy than "collective" or "hybrid".
//   sync = true: synchronous replicas (framework/ops/sync_replicas.h), on a cluster
//     with ps tasks only; with "hybrid", synchronous table updates (the keys below are
//     then refused).
//     replicas_to_aggregate (default: every replica) may be fewer than the replicas (the rest are
//     backups), never more; total_num_replicas, if set, must be the cluster's chief + workers. When
//     fewer replicas are up than replicas_to_aggregate, on_missing_replicas = "wait" (default)
//     waits, naming them every 30 s, for at most missing_replicas_patience_secs (0: no bound), and
//     "continue" aggregates what the live replicas send. These keys without sync
//     are refused.
//   partitioner, num_shards, max_shards, min_shard_bytes, max_shard_bytes: how the
//     tables of a model that has them are split across the ps tasks
//     (internal/partition_config.h: TensorFlow 2's partitioners, TensorFlow 1's names
//     as aliases). A key of another partitioner, a partitioner with the collective
//     strategy, and one for a model without tables are refused.
//
// [run] operation_timeout_secs (default 300, 0: none): the deadline of each training
// step on a cluster (TensorFlow's operation_timeout_in_ms); a step past it fails
// DEADLINE_EXCEEDED and the session is re-created, as after a lost task.
// [run] liveness_file: a file whose modification time this task refreshes every 10 s
// while it runs (for an exec liveness probe; the evaluator serves no port to probe).
// [run] num_gpus (default -1: GPU:0 when the process sees a GPU, else the CPU; 0: the
// CPU only; 1: GPU:0, an error without one) and gpu_memory_fraction (default 0.9) of
// the GPU's memory for tensors: RunConfigOptions. More than one GPU, and GPUs in a
// cluster, are refused (UNIMPLEMENTED).
//
// [security], for the cluster's gRPC (estimator/internal/security_config.h): tls_cert,
// tls_key and tls_ca, PEM files given all three or none, make every task's server and
// clients speak mutual TLS; tls_server_name is the name the clients check the servers'
// certificate against (default: each address's host); health_port, a plaintext port
// answering only gRPC health checks (for Kubernetes probes when TLS is on). Each key the
// config leaves empty falls back to $TANDEM_TLS_CERT, $TANDEM_TLS_KEY, $TANDEM_TLS_CA,
// $TANDEM_TLS_SERVER_NAME. The cluster token comes from $TANDEM_CLUSTER_TOKEN only (a
// secret does not belong in a config file).
//
// Thread safety: value type.
#ifndef TANDEM_ESTIMATOR_JOB_CONFIG_H_
#define TANDEM_ESTIMATOR_JOB_CONFIG_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "estimator/run_config.h"
#include "estimator/strategy.h"
#include "framework/distributed/cluster_spec.h"

namespace tandem {

// A configuration error: a status with the code given (INVALID_ARGUMENT by default)
// marked so that the trainer exits with its usage/config code (2) rather than the
// runtime-error code (1), wherever in the call it was found (the model function's
// [model.params] lookups, a refused [distribute] setting, a task role that cannot run
// the command).
absl::Status ConfigError(absl::string_view message,
                         absl::StatusCode code = absl::StatusCode::kInvalidArgument);
// `status` with the config-error mark (OK stays OK).
absl::Status AsConfigError(absl::Status status);
bool IsConfigError(const absl::Status& status);

// The [model.params] keys a model looked up, shared by every copy of one ModelSection,
// so that keys nobody read can be reported as unknown. Not part of the value: two
// trackers always compare equal.
class ParamUseTracker {
 public:
  ParamUseTracker();
  void Mark(absl::string_view key) const;
  std::vector<std::string> Used() const;
  bool operator==(const ParamUseTracker&) const { return true; }

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// One [model.params] value.
struct ParamValue {
  enum class Type { kBool, kInt, kDouble, kString, kArray };
  Type type = Type::kInt;
  bool bool_value = false;
  int64_t int_value = 0;
  double double_value = 0;
  std::string string_value;
  std::vector<ParamValue> array;  // Type::kArray.

  static ParamValue Bool(bool v);
  static ParamValue Int(int64_t v);
  static ParamValue Double(double v);
  static ParamValue String(std::string v);
  static ParamValue Array(std::vector<ParamValue> v);
  bool operator==(const ParamValue& o) const;
};
using ParamMap = std::map<std::string, ParamValue>;

// One [features.<name>] table (a feature column, estimator/feature_config.h): its keys
// as written, and where each value came from ("job.toml:12:3", "--set ...") for errors.
struct FeatureTable {
  ParamMap keys;
  std::map<std::string, std::string> where;  // Not part of the value.
  bool operator==(const FeatureTable& o) const { return keys == o.keys; }
};

struct ModelSection {
  std::string name;
  ParamMap params;
  // Typed lookups with a default; INVALID_ARGUMENT when present with another type (an
  // integer is accepted as a double).
  absl::StatusOr<int64_t> GetInt(absl::string_view key, int64_t default_value) const;
  absl::StatusOr<double> GetDouble(absl::string_view key, double default_value) const;
  absl::StatusOr<bool> GetBool(absl::string_view key, bool default_value) const;
  absl::StatusOr<std::string> GetString(absl::string_view key,
                                        absl::string_view default_value) const;
  absl::StatusOr<std::vector<int64_t>> GetIntList(absl::string_view key,
                                                  std::vector<int64_t> default_value) const;
  absl::StatusOr<std::vector<std::string>> GetStringList(
      absl::string_view key, std::vector<std::string> default_value) const;
  // Whether `key` is set (it counts as read).
  bool Has(absl::string_view key) const;
  // A config error naming each key of `params` that no Get* call asked for (with a
  // did-you-mean among the keys that were asked for); OK when there is none.
  absl::Status CheckEveryKeyRead() const;
  bool operator==(const ModelSection& o) const = default;

  ParamUseTracker read;  // Keys the Get* calls asked for.
};

struct DataSection {
  std::string dataset;  // A dataset name ("fashion_mnist"), or "" with paths.
  std::string data_dir;
  std::string train_path;  // Files: a path, a glob pattern, or several joined by ','.
  std::string eval_path;
  int64_t eval_batch_size = 0;  // 0: [train] batch_size.
  int64_t shuffle_buffer = 10000;
  int64_t prefetch_buffer = -1;  // Batches ahead; -1: auto (data::kAutotune); 0: none.
  // The files' format for the premade estimators: "csv" or "tfrecord_example"
  // (estimator/internal/data_config.h); "" for models that read their own data.
  std::string format;
  std::string label_name;  // The label's column (csv) or feature key (tfrecord_example).
  // csv (TensorFlow's make_csv_dataset names where it has one): column_names in file
  // order; column_defaults, one per column, give each column's type (integer: int64,
  // float: float32, string, boolean) and the value of an empty field ([] : required).
  std::vector<std::string> column_names;
  std::vector<ParamValue> column_defaults;
  bool header = false;
  std::string field_delim = ",";
  bool skip_initial_space = false;
  std::string na_value;
  std::string comment;
  std::string strip_line_suffix;
  bool skip_bad_rows = false;
  std::map<std::string, std::string> value_separators;  // Column -> list separator.
  std::string compression = "auto";  // tfrecord_example: "auto" (by .gz), "none", "gzip".
  bool operator==(const DataSection& o) const = default;
};

struct RunSection {
  std::string model_dir;
  std::optional<int64_t> save_checkpoints_steps;
  std::optional<int64_t> save_checkpoints_secs;  // Neither set: 600 (resolved).
  int64_t keep_checkpoint_max = 5;
  double keep_checkpoint_every_n_hours = 10000;
  int64_t log_step_count_steps = 100;
  int64_t trace_every_steps = 0;  // RunConfigOptions::trace_every_steps.
  int64_t save_summary_steps = 100;
  std::optional<int64_t> random_seed;
  int64_t inter_op_threads = 0;
  int64_t intra_op_threads = 0;
  std::string precision = "float32";     // Or "mixed_bfloat16" (RunConfigOptions::precision).
  int64_t operation_timeout_secs = 300;  // Cluster steps' deadline; 0: none.
  std::string liveness_file;             // "" = none.
  int64_t num_gpus = -1;                 // RunConfigOptions::num_gpus.
  double gpu_memory_fraction = 0.9;
  bool operator==(const RunSection& o) const = default;
};

struct TrainSection {
  std::optional<int64_t> max_steps;  // Unset: until the input ends.
  int64_t batch_size = 32;
  // Warm start (estimator/internal/warm_start.h): a model_dir, a checkpoint prefix or a
  // .safetensors file; "" = none. The other two keys need it.
  std::string warm_start_from;
  std::string warm_start_vars = ".*";                 // TF's vars_to_warm_start.
  std::map<std::string, std::string> warm_start_map;  // Model variable -> source name.
  bool operator==(const TrainSection& o) const = default;
};

struct EvalSection {
  int64_t steps = 100;  // 0: until the eval input ends.
  int64_t start_delay_secs = 120;
  int64_t throttle_secs = 600;
  std::string name;
  // On a cluster, the chief evaluates the final checkpoint after training. An
  // evaluator task, which the chief cannot see (schedulers leave it out of the
  // cluster), evaluates it too; set false when one runs and the chief should not.
  bool final_on_chief = true;
  bool operator==(const EvalSection& o) const = default;
};

struct ExportSection {
  // "none", or TensorFlow's exporters: "final" (once, after the final evaluation),
  // "latest" (after every evaluation), "best" (after an evaluation better than every
  // earlier one by `metric`).
  std::string strategy = "none";
  std::string name = "exporter";  // model_dir/export/<name>/<version>.
  int64_t keep = 5;               // Versions kept (TF's exports_to_keep).
  std::string model_name;         // In the signature and URLs; "" = [model] name.
  std::string metric = "loss";    // "best" only.
  std::string metric_mode;        // "best" only: "min" | "max"; "" = "min" for loss.
  bool operator==(const ExportSection& o) const = default;
};

struct DistributeSection {
  std::string strategy = "auto";
  bool sync = false;
  int64_t replicas_to_aggregate = 0;  // 0: every replica.
  int64_t total_num_replicas = 0;     // 0: the chief and the workers.
  std::string on_missing_replicas = "wait";
  int64_t missing_replicas_patience_secs = 0;  // 0: wait as long as it takes.
  // Tables of models that have them (internal/partition_config.h).
  std::string partitioner = "auto";
  int64_t num_shards = 0;  // "fixed": 0 = one per ps task.
  int64_t max_shards = 0;  // "min_size": 0 = one per ps task; "max_size": 0 = no cap.
  int64_t min_shard_bytes = int64_t{256} << 10;  // "min_size".
  int64_t max_shard_bytes = 0;                   // "max_size": required.
  // Collective strategy only.
  int64_t bytes_per_pack = int64_t{25} << 20;  // Gradient bucket size (DDP's bucket_cap_mb).
  int64_t collective_timeout_secs = 60;        // A silent peer fails the step after this.
  int64_t check_replicas_steps = 1000;         // Compare the replicas' variables; 0: never.
  bool operator==(const DistributeSection& o) const = default;
};

struct SecuritySection {
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
  std::string tls_server_name;
  int64_t health_port = 0;  // 0: none.
  bool operator==(const SecuritySection& o) const = default;
};

struct TaskSection {
  std::string type;  // "" = unset.
  std::optional<int64_t> index;
  bool operator==(const TaskSection& o) const = default;
};

// Reads only the [cluster] and [task] tables of a TOML document (a job config or a
// file holding just those), with the job config's rules and errors; other sections
// are ignored. Used by `trainer serve --cluster FILE.toml`.
absl::Status ParseClusterToml(absl::string_view toml_text, absl::string_view source_name,
                              ClusterSpec* cluster, TaskSection* task);

// Every key of the typed sections as Markdown (type, default, accepted values), from
// the parser's own key table: docs/config-reference.md, `trainer config_reference`.
std::string JobConfigReference();

class JobConfig {
 public:
  // Parses `toml_text` (named `source_name` in messages), applies `tf_config_json`
  // ("" = none) and `overrides` ("section.key=value"), validates, and derives run_config.
  static absl::StatusOr<JobConfig> Parse(absl::string_view toml_text, absl::string_view source_name,
                                         absl::Span<const std::string> overrides = {},
                                         absl::string_view tf_config_json = "");
  // Parse of the file at `path`.
  static absl::StatusOr<JobConfig> Load(const std::string& path,
                                        absl::Span<const std::string> overrides = {},
                                        absl::string_view tf_config_json = "");
  // Load with the TF_CONFIG environment variable.
  static absl::StatusOr<JobConfig> LoadWithEnvironment(
      const std::string& path, absl::Span<const std::string> overrides = {});

  // The resolved configuration as TOML (--print_config), headed by comment lines
  // that say this task's role (DescribeRole); Parse of it gives an equal JobConfig
  // (TF_CONFIG's cluster and task are printed as [cluster] and [task]).
  std::string ToToml() const;
  // "chief (task chief:0, the chief) of a cluster of 1 chief, 2 workers, 2 ps: ..."
  // or "local: ...": what this task does under train_and_evaluate.
  std::string DescribeRole() const;
  // How this job trains, [distribute] strategy resolved once against the cluster:
  // kLocal without a cluster of several tasks; kCollective when named
  // ("collective", "multi_worker_mirrored") or "auto" on a cluster of several training
  // tasks without ps tasks; kParameterServer otherwise.
  Strategy strategy() const;

  ModelSection model;
  std::map<std::string, FeatureTable> features;  // [features.<name>] by name.
  DataSection data;
  RunSection run;
  TrainSection train;
  EvalSection eval;
  ExportSection export_;  // [export] ("export" is a C++ keyword).
  DistributeSection distribute;
  SecuritySection security;
  ClusterSpec cluster;
  TaskSection task;

  // Derived from [run], the cluster and the task with TensorFlow's rules.
  const RunConfig& run_config() const { return run_config_; }

  bool operator==(const JobConfig& o) const = default;

 private:
  RunConfig run_config_;
};

}  // namespace tandem

#endif  // TANDEM_ESTIMATOR_JOB_CONFIG_H_

// estimator/estimator.h
//
// Estimator (tf.estimator.Estimator): trains, evaluates and predicts with a model
// function, keeping everything in model_dir (checkpoints, event files, eval results).
// Each call builds a fresh graph for its mode, creates the session through a
// MonitoredSession (hooks/), feeds the input batches and returns.
//
//   Train:    restores the latest checkpoint (or initialises, with warm start), runs
//             steps until `steps` more / `max_steps` / the end of the input, saving
//             checkpoints per the RunConfig and at the end. Skips training when the
//             latest checkpoint is already at max_steps. Hooks: the spec's training
//             hooks, StopAtStepHook, NanTensorHook, LoggingTensorHook (loss and step
//             every log_step_count_steps), and on the chief the default summary,
//             step-counter and checkpoint hooks plus the spec's chief hooks (and a
//             ProfilerHook every trace_every_steps, when set).
//   Evaluate: restores `checkpoint_path` (default: the latest, falling back past
//             unreadable checkpoints as Train does; FAILED_PRECONDITION when there is
//             none), runs the metrics' update ops for `steps` batches or
//             until the input ends, and returns every metric plus "loss" (mean batch
//             loss) and global_step; writes them as scalars to model_dir/eval or
//             model_dir/eval_<name> at the checkpoint's global step.
//   Predict:  restores the checkpoint (the latest by default, with Evaluate's
//             fallback) and calls `on_batch` with the predictions of every batch until
//             the input ends.
//
// Warm start (tf.estimator.WarmStartSettings): when variables are initialised (not
// restored), the variables whose names match `vars_to_warm_start` (a regex, default all
// trainable) take their values from `ckpt_to_initialize_from` (a checkpoint prefix, a
// model_dir, whose latest checkpoint is used, or a .safetensors file from any writer),
// under the names var_name_to_prev_var_name gives. A matching variable missing from
// the source, or one of another shape, is an error naming it
// (estimator/internal/warm_start.h).
//
// On a cluster (RunConfig from TF_CONFIG: a chief, master or worker task of a cluster
// of more than one task), Train starts this task's Server once (kept for the
// Estimator's life), builds the graph under the replica device setter (variables,
// global_step and optimizer slots on the ps tasks, round-robin; every other op on this
// task), and runs it through a GrpcSession to that server with the RunConfig's device
// filters (the ps tasks and this task), waiting up to five minutes for the ps tasks
// to answer (naming the ones it waits for in the log). The chief initialises or
// restores and writes checkpoints and summaries; other tasks wait until the model is
// ready. Each training task reads its own input shard: InputContext{number of training
// tasks, global_id_in_cluster} unless the options set one. Evaluate and Predict always
// run in this process on the checkpoint (a DirectSession), whatever the cluster.
//
// The Strategy (estimator/strategy.h) is chosen once, by Create; each is one object
// (estimator/internal/training_strategy.h). With the collective strategy
// (EstimatorOptions::strategy, or ::collective set), training on a cluster is
// MultiWorkerMirroredStrategy instead: every training task builds the whole graph on its own
// device, and the optimizers average the gradients by all-reduce (ops::EnableCollectiveAllReduce)
// before the same update runs everywhere. Every task restores or initialises its own copy; then the
// replicas form their group and take the variables of the replica with the newest global step
// (estimator/internal/collective_replicas.h), again after any failed step (a replica that died,
// froze or restarted fails every replica's step within collective_timeout_secs; the group re-forms
// once it is back). The chief alone writes checkpoints and summaries. A signal to any replica stops
// every replica after the same step; the chief then saves its checkpoint.
//
// [model.params]: after the TRAIN graph is built, a key that neither input_fn nor
// model_fn asked for is a config error naming it (estimator/job_config.h). Evaluate
// and Predict do not check, since a model may read some keys only for training.
//
// Thread safety: one call at a time per Estimator.
#ifndef TANDEM_ESTIMATOR_ESTIMATOR_H_
#define TANDEM_ESTIMATOR_ESTIMATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "estimator/model.h"
#include "estimator/run_config.h"
#include "estimator/strategy.h"
#include "framework/distributed/transport_security.h"
#include "hooks/checkpoint_saver_hook.h"
#include "hooks/monitored_session.h"

namespace tandem {

class Server;
namespace internal {
class TrainRun;
}  // namespace internal

struct WarmStartSettings {
  // "" = no warm start. A model_dir, a checkpoint prefix, or a .safetensors file.
  std::string ckpt_to_initialize_from;
  std::string vars_to_warm_start = ".*";
  bool trainable_only = true;  // Match only trainable variables (TensorFlow's default).
  // Model variable -> its name in the source, where they differ.
  std::map<std::string, std::string> var_name_to_prev_var_name;
};

struct TrainOptions {
  std::optional<int64_t> steps;      // More steps from the current global step.
  std::optional<int64_t> max_steps;  // Absolute; at most one of steps / max_steps.
  std::vector<std::shared_ptr<SessionRunHook>> hooks;
  std::vector<std::shared_ptr<CheckpointSaverListener>> saving_listeners;
};

struct EvalOptions {
  std::optional<int64_t> steps;  // Unset: until the input ends.
  std::vector<std::shared_ptr<SessionRunHook>> hooks;
  std::string checkpoint_path;  // "" = latest in model_dir.
  std::string name;             // Eval directory suffix: eval_<name>.
};

struct EvalResult {
  std::map<std::string, float> metrics;  // Includes "loss".
  int64_t global_step = 0;
  std::string checkpoint_path;
};

struct PredictOptions {
  std::string checkpoint_path;            // "" = latest in model_dir.
  std::vector<std::string> predict_keys;  // Empty: all predictions.
  std::vector<std::shared_ptr<SessionRunHook>> hooks;
};

// One input of a served model: a feature the model function receives, per example
// (without the batch dimension, which serving leaves open).
struct ServingInput {
  std::string name;
  DType dtype = DType::kFloat;
  PartialShape shape;
};
using ServingInputSpec = std::vector<ServingInput>;

struct ExportOptions {
  std::string checkpoint_path;            // "" = latest in model_dir (FAILED_PRECONDITION if none).
  std::string model_name;                 // "" = "model".
  std::map<std::string, double> metrics;  // Recorded in the signature (e.g. eval results).
};

// Predictions of one batch: key -> tensor [batch, ...].
using PredictionCallback =
    std::function<absl::Status(const std::map<std::string, Tensor>& predictions)>;

// Synchronous replicas on a cluster (framework/ops/sync_replicas.h,
// hooks/sync_replicas_hook.h): every replica's ops::Optimizer aggregates through the
// ps, the chief applies one update per replicas_to_aggregate gradients.
struct SyncReplicasSettings {
  int replicas_to_aggregate = 0;       // 0: every replica (chief and workers).
  bool continue_when_missing = false;  // Else wait for missing replicas.
  double patience_secs = 0;            // Waiting: 0 = no bound.
};

// Collective all-reduce replicas on a cluster without ps tasks (MultiWorkerMirroredStrategy;
// framework/ops/collective_ops.h, estimator/internal/collective_replicas.h).
struct CollectiveSettings {
  int64_t bytes_per_pack = int64_t{25} << 20;  // Gradient bucket size.
  int64_t timeout_secs = 60;                   // A silent peer fails the step after this.
  int64_t check_replicas_steps = 1000;         // Compare the replicas' variables; 0: never.
};

struct EstimatorOptions {
  ModelFn model_fn;
  RunConfig config;
  ModelSection params;
  WarmStartSettings warm_start;
  // Null: DirectSession locally, GrpcSession to this task's own server on a cluster.
  SessionFactory session_factory;
  // Every mode's input. For training on a cluster, num_input_pipelines == 1 (the
  // default) is replaced by the one derived from the RunConfig; evaluation and
  // prediction always read their whole input.
  InputContext input_context;
  TransportSecurity security;  // This task's server and sessions on a cluster.
  // Set: training on a cluster is synchronous. Ignored by local training.
  std::optional<SyncReplicasSettings> sync_replicas;
  // Set: training on a cluster uses collective all-reduce (the cluster must have no ps
  // task). Ignored by local training.
  std::optional<CollectiveSettings> collective;
  // How training on a cluster is spread (estimator/strategy.h); unset: kCollective
  // when `collective` is set, else kParameterServer. Local training ignores it.
  std::optional<Strategy> strategy;
};

class Estimator {
 public:
  // INVALID_ARGUMENT when model_fn is missing or config has no model_dir.
  static absl::StatusOr<std::unique_ptr<Estimator>> Create(EstimatorOptions options);

  // Returns the global step reached.
  absl::StatusOr<int64_t> Train(const InputFn& input_fn, const TrainOptions& options = {});
  absl::StatusOr<EvalResult> Evaluate(const InputFn& input_fn, const EvalOptions& options = {});
  absl::Status Predict(const InputFn& input_fn, const PredictionCallback& on_batch,
                       const PredictOptions& options = {});

  // Export for serving (tf.estimator's export_saved_model; format: serving/signature.h):
  // builds the PREDICT graph with a placeholder per `inputs` entry, takes the weights
  // from the checkpoint and writes a new version under `export_dir_base`, returning
  // its directory. The signature's outputs are the spec's predictions.
  absl::StatusOr<std::string> ExportSavedModel(const std::string& export_dir_base,
                                               const ServingInputSpec& inputs,
                                               const ExportOptions& options = {});
  // The features of the PREDICT input's first batch, as a serving input spec.
  static absl::StatusOr<ServingInputSpec> ServingInputFromInputFn(const InputFn& input_fn);

  // The newest checkpoint prefix in model_dir, or "" when there is none.
  std::string LatestCheckpoint() const;
  const std::string& model_dir() const { return options_.config.model_dir(); }
  const RunConfig& config() const { return options_.config; }
  const TransportSecurity& security() const { return options_.security; }
  // "model_dir/eval" or "model_dir/eval_<name>".
  std::string EvalDir(const std::string& name) const;
  ~Estimator();

 private:
  friend class internal::TrainRun;  // Train's steps (estimator.cc).
  explicit Estimator(EstimatorOptions options);
  // Starts this task's server once.
  absl::Status EnsureServer();
  // The latest checkpoint and its step when that step is at or past `max_steps`
  // (training is over, here or on another task of the cluster); nullopt otherwise or
  // without max_steps.
  std::optional<std::pair<std::string, int64_t>> FinalCheckpoint(
      std::optional<int64_t> max_steps) const;

  EstimatorOptions options_;
  Strategy strategy_ = Strategy::kLocal;  // Chosen once, by Create.
  InputContext train_input_context_;
  std::unique_ptr<Server> server_;  // On a cluster, after the first Train.
};

}  // namespace tandem

#endif  // TANDEM_ESTIMATOR_ESTIMATOR_H_

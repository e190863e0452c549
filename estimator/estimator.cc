// estimator/estimator.cc
//
// Estimator::Train / Evaluate / Predict: build the mode's graph around placeholders
// shaped like the input's first batch, wrap it in a MonitoredSession with the
// estimator's hooks, and feed the batches.
#include "estimator/estimator.h"

#include <string.h>

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpoint_index.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_state.h"
#include "estimator/internal/mode_graph.h"
#include "estimator/internal/task_server.h"
#include "estimator/internal/training_strategy.h"
#include "estimator/internal/warm_start.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/core/termination.h"
#include "framework/core/thread_pool.h"
#include "framework/distributed/server.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/optimizer.h"
#include "framework/ops/state_ops.h"
#include "framework/ops/summary_ops.h"
#include "framework/runtime/device.h"
#include "glog/logging.h"
#include "hooks/logging_hooks.h"
#include "hooks/profiler_hook.h"
#include "hooks/stop_hooks.h"
#include "hooks/summary_writer.h"

namespace tandem {
namespace {

using internal::Feeds;
using internal::ModeGraph;
using internal::OpenInput;

// Tries at creating the session when a task of the cluster is lost (a ps restarting),
// a second apart, under the cluster strategies.
constexpr int kClusterCreateAttempts = 10;

// The CPU threads this process's steps compute on (data::ScopedStepCpuThreads): the
// session's intra-op threads, or 0 (none) when its steps run on GPUs. A task of a
// cluster runs its steps on its own server's threads, made with the same session config.
int StepCpuThreads(const RunConfig& config) {
  if (!config.is_distributed() && LocalGpuCount(config.num_gpus()) > 0) return 0;
  return ThreadPool::DefaultSize(
      config.session_config() ? config.session_config()->intra_op_parallelism_threads : 0);
}

checkpoint::SaverOptions MakeSaverOptions(const RunConfig& config) {
  checkpoint::SaverOptions so;
  so.max_to_keep = config.keep_checkpoint_max();
  so.keep_checkpoint_every_n_hours = config.keep_checkpoint_every_n_hours();
  return so;
}

// Restores `checkpoint` when given; else the latest checkpoint of `model_dir`, falling
// back past unreadable ones (naming them) as training does.
std::unique_ptr<ChiefSessionCreator> RestoringCreator(const SessionCreatorOptions& options,
                                                      const std::string& model_dir,
                                                      const std::string& checkpoint) {
  if (!checkpoint.empty()) return std::make_unique<ChiefSessionCreator>(options, "", checkpoint);
  return std::make_unique<ChiefSessionCreator>(options, model_dir, "");
}

}  // namespace

absl::StatusOr<std::unique_ptr<Estimator>> Estimator::Create(EstimatorOptions options) {
  if (!options.model_fn) return absl::InvalidArgumentError("Estimator: model_fn is required");
  if (options.config.model_dir().empty()) {
    return absl::InvalidArgumentError("Estimator: [run] model_dir is required");
  }
  std::unique_ptr<Estimator> e(new Estimator(std::move(options)));
  const RunConfig& config = e->options_.config;
  e->strategy_ = internal::ChooseStrategy(e->options_);
  const bool collective = e->strategy_ == Strategy::kCollective;
  if (config.TrainsOnCluster()) {
    if (config.num_ps_replicas() == 0 && !collective) {
      return ConfigError(
          absl::StrCat("Estimator: the cluster ", config.cluster_spec().DebugString(),
                       " has training tasks but no ps task; train with collective all-reduce "
                       "(EstimatorOptions::strategy or ::collective, [distribute] strategy = "
                       "\"collective\") or add ps tasks"));
    }
    if (config.num_ps_replicas() > 0 && collective) {
      return ConfigError(
          absl::StrCat("Estimator: collective all-reduce replicas mirror the "
                       "variables, but the cluster ",
                       config.cluster_spec().DebugString(), " has ps tasks"));
    }
    InputContext& context = e->train_input_context_;
    if (context.num_input_pipelines == 1 && config.replica_index()) {
      context.num_input_pipelines = config.num_worker_replicas();
      context.input_pipeline_id = *config.replica_index();
    }
  }
  return e;
}

Estimator::Estimator(EstimatorOptions options)
    : options_(std::move(options)), train_input_context_(options_.input_context) {}

Estimator::~Estimator() = default;

absl::Status Estimator::EnsureServer() {
  if (server_ != nullptr) return absl::OkStatus();
  TANDEM_ASSIGN_OR_RETURN(server_, internal::StartTaskServer(options_.config, options_.security));
  LOG(INFO) << "Started server " << server_->task_name() << " on " << server_->address();
  return absl::OkStatus();
}

std::optional<std::pair<std::string, int64_t>> Estimator::FinalCheckpoint(
    std::optional<int64_t> max_steps) const {
  if (!max_steps) return std::nullopt;
  const std::string latest = LatestCheckpoint();
  const int64_t step = latest.empty() ? -1 : checkpoint::CheckpointGlobalStep(latest);
  if (step < *max_steps) return std::nullopt;
  return std::make_pair(latest, step);
}

std::string Estimator::LatestCheckpoint() const {
  absl::StatusOr<std::string> latest = checkpoint::LatestCheckpoint(model_dir());
  return latest.ok() ? *latest : "";
}

std::string Estimator::EvalDir(const std::string& name) const {
  return env::JoinPath(model_dir(), name.empty() ? "eval" : "eval_" + name);
}

namespace internal {

// One Estimator::Train call as named steps: Check, BuildGraph, SetUpCluster,
// SessionOptionsWithHooks, CreateSession, Loop, Finish. Each step that finds training
// over elsewhere (the final checkpoint at max_steps) sets finished_at.
class TrainRun {
 public:
  TrainRun(Estimator& e, const InputFn& input_fn, const TrainOptions& options)
      : e_(e),
        config_(e.options_.config),
        input_fn_(input_fn),
        options_(options),
        strategy_(internal::MakeTrainingStrategy(e.strategy_, Env())) {}

  absl::StatusOr<int64_t> Run() {
    TANDEM_RETURN_IF_ERROR(Check());
    if (finished_at_) return *finished_at_;
    TANDEM_RETURN_IF_ERROR(BuildGraph());
    TANDEM_RETURN_IF_ERROR(SetUpCluster());
    TANDEM_ASSIGN_OR_RETURN(MonitoredTrainingSessionOptions mts, SessionOptionsWithHooks());
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<MonitoredSession> session, CreateSession(mts));
    if (session == nullptr) return *finished_at_;
    TANDEM_RETURN_IF_ERROR(Loop(*session));
    return Finish(*session);
  }

 private:
  // The options, and whether max_steps has already been reached.
  absl::Status Check() {
    if (options_.steps && options_.max_steps) {
      return absl::InvalidArgumentError("Train: give steps or max_steps, not both");
    }
    if ((options_.steps && *options_.steps <= 0) ||
        (options_.max_steps && *options_.max_steps <= 0)) {
      return absl::InvalidArgumentError("Train: steps and max_steps must be positive");
    }
    if (auto final = e_.FinalCheckpoint(options_.max_steps)) {
      LOG(INFO) << "Skipping training since max_steps has already saved (checkpoint "
                << final->first << " is at step " << final->second << ").";
      finished_at_ = final->second;
      return absl::OkStatus();
    }
    if (!options_.saving_listeners.empty() && !config_.checkpoints_enabled()) {
      return absl::InvalidArgumentError(
          "Train: saving_listeners need checkpoints (set save_checkpoints_steps or _secs)");
    }
    return absl::OkStatus();
  }

  // The input and the TRAIN graph of the model.
  absl::Status BuildGraph() {
    TANDEM_ASSIGN_OR_RETURN(
        in_, internal::OpenInputFn(input_fn_, ModeKey::kTrain, e_.train_input_context_,
                                   StepCpuThreads(e_.options_.config)));
    TANDEM_RETURN_IF_ERROR(internal::BuildModeGraph(e_.options_, ModeKey::kTrain, in_.FeatureSpec(),
                                                    in_.LabelSpec(), strategy_.get(), &g_));
    TANDEM_RETURN_IF_ERROR(e_.options_.params.CheckEveryKeyRead());
    ops::summary::Scalar(g_.root, "loss", g_.spec.loss);
    return g_.root.status();
  }

  // What the strategy needs before the session: on a cluster, this task's server and
  // the collective group or the ps tasks' session factory.
  absl::Status SetUpCluster() {
    factory_ = e_.options_.session_factory;
    return strategy_->SetUp(g_, &factory_);
  }

  // What the strategy may use of the Estimator and of this call.
  internal::StrategyEnv Env() {
    internal::StrategyEnv env;
    env.options = &e_.options_;
    env.server = [this]() -> absl::StatusOr<Server*> {
      TANDEM_RETURN_IF_ERROR(e_.EnsureServer());
      return e_.server_.get();
    };
    env.finished_elsewhere = FinishedElsewhere();
    env.input_pipeline = InputPipeline();
    return env;
  }

  // The one test of whether training ended elsewhere, for the strategy and the
  // session's recovery policy: the checkpoint at max_steps exists (the chief saved it
  // and may have shut the ps tasks down); sets finished_at. Empty without max_steps.
  std::function<bool()> FinishedElsewhere() {
    if (!options_.max_steps) return nullptr;
    return [this] {
      std::optional<std::pair<std::string, int64_t>> final = e_.FinalCheckpoint(options_.max_steps);
      if (!final) return false;
      if (!finished_at_) {
        LOG(INFO) << "Training reached max_steps elsewhere (checkpoint " << final->first << ").";
      }
      finished_at_ = final->second;
      return true;
    };
  }

  std::string InputPipeline() const {
    return absl::StrCat("input pipeline ", e_.train_input_context_.input_pipeline_id, " of ",
                        e_.train_input_context_.num_input_pipelines);
  }

  // The Scaffold (warm start), the hooks the Estimator adds and the session settings.
  absl::StatusOr<MonitoredTrainingSessionOptions> SessionOptionsWithHooks() {
    const WarmStartSettings& warm_start = e_.options_.warm_start;
    std::shared_ptr<Scaffold> scaffold = g_.spec.scaffold;
    if (scaffold == nullptr) {
      ScaffoldOptions so;
      so.saver_options = MakeSaverOptions(config_);
      if (!warm_start.ckpt_to_initialize_from.empty()) {
        so.init_fn = internal::WarmStartFn(g_.root.graph(), warm_start);
      }
      scaffold = std::make_shared<Scaffold>(std::move(so));
    } else if (!warm_start.ckpt_to_initialize_from.empty()) {
      return absl::UnimplementedError(
          "warm start together with a model_fn-provided Scaffold is not supported; set the "
          "Scaffold's init_fn instead");
    }
    MonitoredTrainingSessionOptions mts;
    mts.is_chief = config_.is_chief();
    mts.checkpoint_dir = e_.model_dir();
    mts.scaffold = scaffold;
    mts.hooks = options_.hooks;
    if (options_.steps || options_.max_steps) {
      mts.hooks.push_back(std::make_shared<StopAtStepHook>(options_.steps, options_.max_steps));
    }
    mts.hooks.push_back(std::make_shared<NanTensorHook>(g_.spec.loss.name()));
    mts.hooks.push_back(std::make_shared<LoggingTensorHook>(
        std::vector<std::pair<std::string, std::string>>{{"loss", g_.spec.loss.name()},
                                                         {"step", g_.global_step.value().name()}},
        Every::Steps(config_.log_step_count_steps())));
    mts.hooks.insert(mts.hooks.end(), g_.spec.training_hooks.begin(), g_.spec.training_hooks.end());
    mts.chief_only_hooks = g_.spec.training_chief_hooks;
    if (config_.trace_every_steps() > 0) {  // One writer of model_dir's timelines.
      mts.chief_only_hooks.push_back(std::make_shared<ProfilerHook>(
          Every::Steps(config_.trace_every_steps()), e_.model_dir()));
    }
    // MonitoredTrainingSession's checkpoint hook, with the caller's listeners: every
    // save_checkpoints_steps when positive, else every save_checkpoints_secs.
    mts.save_checkpoint_steps = config_.save_checkpoints_steps();
    mts.save_checkpoint_secs.reset();
    if (config_.save_checkpoints_secs()) {
      mts.save_checkpoint_secs = static_cast<double>(*config_.save_checkpoints_secs());
    }
    mts.saving_listeners = options_.saving_listeners;
    mts.save_summaries_steps = config_.save_summary_steps();
    mts.log_step_count_steps = config_.log_step_count_steps();
    mts.factory = factory_;
    mts.recovery.create_attempts = strategy_->RecoversLostTasks() ? kClusterCreateAttempts : 1;
    mts.recovery.finished_elsewhere = FinishedElsewhere();
    strategy_->Configure(mts);
    return mts;
  }

  // The monitored session; null (with finished_at) when training ended elsewhere. On a
  // cluster a task may die while this one creates its session (a ps restarting): the
  // session's recovery policy (SessionOptionsWithHooks) retries as it does between steps.
  absl::StatusOr<std::unique_ptr<MonitoredSession>> CreateSession(
      const MonitoredTrainingSessionOptions& mts) {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<MonitoredSession> session,
                            NewMonitoredTrainingSession(g_.root.graph(), mts));
    if (session->finished_elsewhere()) return std::unique_ptr<MonitoredSession>();
    return session;
  }

  // Steps until a hook stops training, the input ends, a signal comes or training ends
  // elsewhere; a step that failed with a lost task and was recovered (the session
  // re-created) is followed by the next batch.
  absl::Status Loop(MonitoredSession& session) {
    const SessionRunRequest base{{}, {}, {g_.spec.train_op->name()}};
    while (!session.ShouldStop()) {
      if (termination::Requested() && strategy_->StopsAtSignal()) {
        LOG(WARNING) << "Training stops: " << strsignal(termination::Signal())
                     << (config_.is_chief() ? " (writing a checkpoint first)" : "");
        break;
      }
      TANDEM_ASSIGN_OR_RETURN(std::optional<data::Element> batch, in_.Next());
      if (!batch) {
        LOG(INFO) << "Training input ended.";
        break;
      }
      SessionRunRequest request = base;
      request.feeds = Feeds(g_, *batch);
      absl::Status s = session.Run(request).status();
      if (session.finished_elsewhere()) break;
      if (!s.ok() && session.recovered()) {
        LOG(WARNING) << "Training step failed, session recreated: " << s;
        continue;
      }
      TANDEM_RETURN_IF_ERROR(s);
      ++local_steps_;
    }
    if (!finished_at_ && session.raw_session() == nullptr && !termination::Requested()) {
      return absl::UnavailableError(
          "Train: the session could not be re-created after a failed step; training stopped");
    }
    return absl::OkStatus();
  }

  // The global step reached; closes the session (the chief's final checkpoint) and
  // says why training stopped when it did not finish.
  absl::StatusOr<int64_t> Finish(MonitoredSession& session) {
    int64_t global_step = finished_at_.value_or(-1);
    if (!finished_at_ && session.raw_session() != nullptr) {
      TANDEM_ASSIGN_OR_RETURN(auto step,
                              session.raw_session()->Run({}, {g_.global_step.value().name()}));
      global_step = step[0].scalar<int64_t>();
    }
    absl::Status closed = session.Close();  // The chief's final checkpoint.
    if (termination::Requested()) {
      // A stable form of the fact for log readers; the status below says it in words.
      LOG(WARNING) << "event=training_stopped signal=" << termination::Signal()
                   << " global_step=" << global_step << " checkpoint="
                   << (!config_.is_chief() ? "none"
                       : closed.ok()       ? "saved"
                                           : "failed");
      return absl::CancelledError(absl::StrCat(
          "training stopped by ", strsignal(termination::Signal()), " at global step ", global_step,
          !config_.is_chief() ? ""
          : closed.ok()       ? "; checkpoint saved"
                        : absl::StrCat("; the checkpoint could not be saved: ", closed.message())));
    }
    TANDEM_RETURN_IF_ERROR(closed);
    TANDEM_RETURN_IF_ERROR(strategy_->AfterClose(global_step));
    LOG(INFO) << "Training finished at global step " << global_step << " (" << local_steps_
              << " steps run by this task).";
    LOG(INFO) << "event=training_finished global_step=" << global_step
              << " local_steps=" << local_steps_;
    return global_step;
  }

  Estimator& e_;
  const RunConfig& config_;
  const InputFn& input_fn_;
  const TrainOptions& options_;
  const std::unique_ptr<internal::TrainingStrategy> strategy_;
  OpenInput in_;
  ModeGraph g_;
  SessionFactory factory_;
  int64_t local_steps_ = 0;  // Steps this task ran (on a cluster, its share of global_step).
  std::optional<int64_t> finished_at_;  // Set when training ended elsewhere (or before).
};

}  // namespace internal

absl::StatusOr<int64_t> Estimator::Train(const InputFn& input_fn, const TrainOptions& options) {
  return internal::TrainRun(*this, input_fn, options).Run();
}

absl::StatusOr<EvalResult> Estimator::Evaluate(const InputFn& input_fn,
                                               const EvalOptions& options) {
  if (options.steps && *options.steps <= 0) {
    return absl::InvalidArgumentError("Evaluate: steps must be positive");
  }
  std::string checkpoint_path = options.checkpoint_path;
  const bool latest = checkpoint_path.empty();
  if (latest) checkpoint_path = LatestCheckpoint();
  if (checkpoint_path.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("Evaluate: could not find a trained model (no checkpoint) in ", model_dir()));
  }
  TANDEM_ASSIGN_OR_RETURN(OpenInput in,
                          internal::OpenInputFn(input_fn, ModeKey::kEval, options_.input_context,
                                                StepCpuThreads(options_.config)));
  ModeGraph g;
  TANDEM_RETURN_IF_ERROR(internal::BuildModeGraph(options_, ModeKey::kEval, in.FeatureSpec(),
                                                  in.LabelSpec(), /*strategy=*/nullptr, &g));
  if (g.spec.eval_metric_ops.count("loss")) {
    return absl::InvalidArgumentError(
        "EstimatorSpec: metric name 'loss' is reserved for the Estimator's mean loss");
  }
  std::map<std::string, ops::metrics::Metric> metrics = g.spec.eval_metric_ops;
  metrics["loss"] = ops::metrics::Mean(g.root.NewSubScope("eval_loss"), g.spec.loss);
  TANDEM_RETURN_IF_ERROR(g.root.status());

  std::vector<std::string> names, values, updates;
  for (const auto& [name, m] : metrics) {
    names.push_back(name);
    values.push_back(m.value.name());
    updates.push_back(m.update_op.node->name());
  }
  std::vector<std::string> final_tensors = values;
  final_tensors.push_back(g.global_step.value().name());
  auto final_ops = std::make_shared<FinalOpsHook>(final_tensors);
  std::vector<std::shared_ptr<SessionRunHook>> hooks = g.spec.evaluation_hooks;
  hooks.insert(hooks.end(), options.hooks.begin(), options.hooks.end());
  hooks.push_back(final_ops);

  SessionCreatorOptions sco;
  sco.scaffold = g.spec.scaffold ? g.spec.scaffold : std::make_shared<Scaffold>();
  sco.session_options = internal::SessionOptionsFor(options_.config, /*cluster_master=*/false);
  sco.factory = options_.session_factory;
  LOG(INFO) << "Starting evaluation of " << checkpoint_path;
  auto creator = RestoringCreator(sco, model_dir(), latest ? "" : checkpoint_path);
  ChiefSessionCreator* restoring = creator.get();
  TANDEM_ASSIGN_OR_RETURN(auto session,
                          MonitoredSession::Create(g.root.graph(), std::move(creator), hooks));
  if (restoring->restored_from().empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("Evaluate: no checkpoint of ", model_dir(), " could be restored"));
  }
  checkpoint_path = restoring->restored_from();
  const SessionRunRequest base{{}, {}, updates};
  int64_t step = 0;
  while (!session->ShouldStop() && (!options.steps || step < *options.steps)) {
    TANDEM_ASSIGN_OR_RETURN(std::optional<data::Element> batch, in.Next());
    if (!batch) break;
    SessionRunRequest request = base;
    request.feeds = Feeds(g, *batch);
    TANDEM_RETURN_IF_ERROR(session->Run(request).status());
    ++step;
    if (options.steps && *options.steps >= 10 && step % (*options.steps / 10) == 0) {
      LOG(INFO) << "Evaluation [" << step << "/" << *options.steps << "]";
    }
  }
  TANDEM_RETURN_IF_ERROR(session->Close());
  const std::vector<Tensor>& out = final_ops->final_values();
  if (out.size() != final_tensors.size()) {
    return absl::InternalError("Evaluate: the final metric values were not fetched");
  }
  EvalResult result;
  result.checkpoint_path = checkpoint_path;
  result.global_step = out.back().scalar<int64_t>();
  std::vector<std::pair<std::string, float>> scalars;
  std::vector<std::string> printed;
  for (size_t i = 0; i < names.size(); ++i) {
    float v = out[i].scalar<float>();
    result.metrics[names[i]] = v;
    scalars.emplace_back(names[i], v);
    printed.push_back(absl::StrCat(names[i], " = ", v));
  }
  printed.push_back(absl::StrCat("global_step = ", result.global_step));
  LOG(INFO) << "Saving dict for global step " << result.global_step << ": "
            << absl::StrJoin(printed, ", ") << " (" << step << " batches)";
  TANDEM_ASSIGN_OR_RETURN(auto writer, SummaryWriterForDir(EvalDir(options.name)));
  TANDEM_RETURN_IF_ERROR(writer->AddScalars(scalars, result.global_step));
  TANDEM_RETURN_IF_ERROR(writer->Flush());
  return result;
}

absl::Status Estimator::Predict(const InputFn& input_fn, const PredictionCallback& on_batch,
                                const PredictOptions& options) {
  std::string checkpoint_path = options.checkpoint_path;
  if (checkpoint_path.empty()) checkpoint_path = LatestCheckpoint();
  TANDEM_ASSIGN_OR_RETURN(OpenInput in,
                          internal::OpenInputFn(input_fn, ModeKey::kPredict, options_.input_context,
                                                StepCpuThreads(options_.config)));
  ModeGraph g;
  TANDEM_RETURN_IF_ERROR(internal::BuildModeGraph(options_, ModeKey::kPredict, in.FeatureSpec(),
                                                  in.LabelSpec(), /*strategy=*/nullptr, &g));
  std::vector<std::string> keys, fetches;
  for (const auto& [key, tensor] : g.spec.predictions) {
    if (!options.predict_keys.empty() &&
        std::find(options.predict_keys.begin(), options.predict_keys.end(), key) ==
            options.predict_keys.end()) {
      continue;
    }
    keys.push_back(key);
    fetches.push_back(tensor.name());
  }
  for (const std::string& k : options.predict_keys) {
    if (!g.spec.predictions.count(k)) {
      std::vector<std::string> have;
      for (const auto& [key, unused] : g.spec.predictions) have.push_back(key);
      return absl::InvalidArgumentError(absl::StrCat("Predict: unknown predict_key '", k,
                                                     "'; the model predicts ",
                                                     absl::StrJoin(have, ", ")));
    }
  }
  if (checkpoint_path.empty()) {
    LOG(WARNING) << "Could not find a trained model in " << model_dir()
                 << ", running initialization to predict.";
  }
  SessionCreatorOptions sco;
  sco.scaffold = g.spec.scaffold ? g.spec.scaffold : std::make_shared<Scaffold>();
  sco.session_options = internal::SessionOptionsFor(options_.config, /*cluster_master=*/false);
  sco.factory = options_.session_factory;
  std::vector<std::shared_ptr<SessionRunHook>> hooks = g.spec.prediction_hooks;
  hooks.insert(hooks.end(), options.hooks.begin(), options.hooks.end());
  TANDEM_ASSIGN_OR_RETURN(
      auto session, MonitoredSession::Create(
                        g.root.graph(),
                        RestoringCreator(sco, model_dir(),
                                         options.checkpoint_path.empty() ? "" : checkpoint_path),
                        hooks));
  while (!session->ShouldStop()) {
    TANDEM_ASSIGN_OR_RETURN(std::optional<data::Element> batch, in.Next());
    if (!batch) break;
    SessionRunRequest request{Feeds(g, *batch), fetches, {}};
    TANDEM_ASSIGN_OR_RETURN(std::vector<Tensor> out, session->Run(request));
    std::map<std::string, Tensor> predictions;
    for (size_t i = 0; i < keys.size(); ++i) predictions.emplace(keys[i], std::move(out[i]));
    TANDEM_RETURN_IF_ERROR(on_batch(predictions));
  }
  return session->Close();
}

}  // namespace tandem

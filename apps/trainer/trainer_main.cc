// apps/trainer/trainer_main.cc
//
// The trainer command line (apps/trainer/trainer_main.h): resolves the job config,
// creates the registered model and runs the Estimator call a subcommand names.
#include "apps/trainer/trainer_main.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "apps/trainer/exit_codes.h"
#include "apps/trainer/export_commands.h"
#include "apps/trainer/health_command.h"
#include "apps/trainer/json_lines.h"
#include "apps/trainer/launch.h"
#include "apps/trainer/liveness.h"
#include "apps/trainer/serve.h"
#include "apps/trainer/serve_model.h"
#include "estimator/canned/canned_model.h"
#include "estimator/estimator.h"
#include "estimator/job_config.h"
#include "estimator/job_options.h"
#include "estimator/training.h"
#include "framework/core/status.h"
#include "framework/core/termination.h"
#include "framework/distributed/process_setup.h"
#include "framework/distributed/rpc/grpc_util.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"

namespace tandem {
namespace {

struct Flags {
  std::string config;
  std::vector<std::string> sets;
  bool print_config = false;
  std::string checkpoint;
  std::string output = "-";
  std::vector<std::string> predict_keys;
  std::string exported;     // predict: an exported model instead of --config.
  std::string input = "-";  // predict --exported: JSON Lines instances.
  int health_port = -1;     // train, train_and_evaluate: security.health_port.
};

// One line per task for the log's end: what this task did.
void PrintTaskResult(const TaskResult& r, const std::string& model_dir);

std::string FormatMetrics(const EvalResult& r) {
  std::vector<std::string> parts;
  for (const auto& [name, value] : r.metrics) parts.push_back(absl::StrCat(name, " = ", value));
  parts.push_back(absl::StrCat("global_step = ", r.global_step));
  return absl::StrJoin(parts, ", ");
}

void PrintTaskResult(const TaskResult& r, const std::string& model_dir) {
  if (!WireTrafficSent().empty()) LOG(INFO) << WireTrafficSummary();
  if (r.role == kJobPs) {
    std::printf("ps: stopped: %s\n", r.stop_reason.c_str());
  } else if (r.role == kJobEvaluator) {
    if (r.evaluation) std::printf("final evaluation: %s\n", FormatMetrics(*r.evaluation).c_str());
  } else {
    if (r.global_step) {
      std::printf("trained: global_step = %lld, model_dir = %s\n",
                  static_cast<long long>(*r.global_step), model_dir.c_str());
    }
    if (r.evaluation) std::printf("final evaluation: %s\n", FormatMetrics(*r.evaluation).c_str());
  }
  std::fflush(stdout);
}

EvalOptions EvalOptionsFor(const JobConfig& job, const Flags& flags) {
  EvalOptions eo;
  if (job.eval.steps > 0) eo.steps = job.eval.steps;
  eo.name = job.eval.name;
  eo.checkpoint_path = flags.checkpoint;
  return eo;
}

int Run(const std::string& command, const Flags& flags,
        const std::function<void(ModelRegistry&)>& register_models) {
  ModelRegistry registry;
  if (absl::Status s = canned::RegisterPremadeEstimators(registry); !s.ok()) return Fail(s);
  register_models(registry);
  if (command == "models") {
    for (const std::string& name : registry.Names()) std::printf("%s\n", name.c_str());
    return 0;
  }
  if (command == "predict" && !flags.exported.empty()) {
    if (!flags.config.empty() || !flags.checkpoint.empty()) {
      return Fail(kUsageError, absl::InvalidArgumentError(
                                   "predict: give --exported (an exported model) or --config "
                                   "(a job and its checkpoint), not both"));
    }
    absl::StatusOr<int64_t> n =
        PredictExported(flags.exported, flags.input, flags.output, flags.predict_keys);
    if (!n.ok()) return Fail(n.status());
    LOG(INFO) << "Wrote " << *n << " predictions to " << flags.output;
    return 0;
  }
  if (flags.config.empty()) {
    return Fail(kUsageError,
                absl::InvalidArgumentError(absl::StrCat(command, ": --config is required")));
  }
  std::vector<std::string> sets = flags.sets;
  if (flags.health_port >= 0) {
    sets.insert(sets.begin(), absl::StrCat("security.health_port=", flags.health_port));
  }
  absl::StatusOr<JobConfig> job = JobConfig::LoadWithEnvironment(flags.config, sets);
  if (!job.ok()) return Fail(kUsageError, job.status());
  if (flags.print_config) {
    std::printf("%s", job->ToToml().c_str());
    return 0;
  }
  if (command == "train" || command == "train_and_evaluate") {
    // Before any thread starts (termination.h). Kubernetes waits 30 s by default
    // between SIGTERM and SIGKILL.
    termination::InstallHandler(kTerminationGraceSecs);
  }
  absl::StatusOr<std::unique_ptr<Model>> model = registry.Create(job->model.name, *job);
  if (!model.ok()) return Fail(kUsageError, model.status());
  if (job->run_config().model_dir().empty()) {
    return Fail(kUsageError,
                absl::InvalidArgumentError("[run] model_dir is required (in the config or --set "
                                           "run.model_dir=DIR)"));
  }
  absl::StatusOr<EstimatorOptions> eo = EstimatorOptionsFor(*job);
  if (!eo.ok()) return Fail(kUsageError, eo.status());
  eo->model_fn = BindModelFn(model->get());
  absl::StatusOr<std::unique_ptr<Estimator>> estimator = Estimator::Create(*std::move(eo));
  if (!estimator.ok()) return Fail(kUsageError, estimator.status());
  InputFn input_fn = BindInputFn(model->get(), &*job);
  LOG(INFO) << "Role: " << job->DescribeRole();

  std::unique_ptr<LivenessSignals> liveness;
  if (command == "train" || command == "train_and_evaluate") {
    absl::StatusOr<std::unique_ptr<LivenessSignals>> started = LivenessSignals::Start(*job);
    if (!started.ok()) return Fail(started.status());
    liveness = *std::move(started);
  }
  if (command == "train") {
    absl::StatusOr<TaskResult> r =
        Train(**estimator, TrainSpec{input_fn, job->train.max_steps, {}});
    if (!r.ok()) return FailOrStopped(r.status());
    PrintTaskResult(*r, (*estimator)->model_dir());
    return 0;
  }
  if (command == "evaluate") {
    absl::StatusOr<EvalResult> r = (*estimator)->Evaluate(input_fn, EvalOptionsFor(*job, flags));
    if (!r.ok()) return Fail(r.status());
    std::printf("evaluation of %s: %s\n", r->checkpoint_path.c_str(), FormatMetrics(*r).c_str());
    return 0;
  }
  if (command == "train_and_evaluate") {
    TrainSpec ts{input_fn, job->train.max_steps, {}};
    EvalSpec es;
    es.input_fn = input_fn;
    if (job->eval.steps > 0) {
      es.steps = job->eval.steps;
    } else {
      es.steps.reset();
    }
    es.name = job->eval.name;
    es.start_delay_secs = job->eval.start_delay_secs;
    es.throttle_secs = job->eval.throttle_secs;
    es.final_on_chief = job->eval.final_on_chief;
    if (auto exporter = ExporterFromConfig(*job, input_fn)) es.exporters.push_back(exporter);
    absl::StatusOr<TaskResult> r = TrainAndEvaluate(**estimator, ts, es);
    if (!r.ok()) return FailOrStopped(r.status());
    PrintTaskResult(*r, (*estimator)->model_dir());
    return 0;
  }
  if (command == "export") {
    if (flags.output == "-") {
      return Fail(kUsageError, absl::InvalidArgumentError("export: --output DIR is required"));
    }
    absl::StatusOr<std::string> dir =
        ExportCommand(**estimator, *job, input_fn, flags.checkpoint, flags.output);
    if (!dir.ok()) return Fail(dir.status());
    std::printf("exported: %s\n", dir->c_str());
    return 0;
  }
  if (command == "predict") {
    std::ofstream file;
    std::ostream* out = &std::cout;
    if (flags.output != "-") {
      file.open(flags.output, std::ios::trunc);
      if (!file) {
        return Fail(kRuntimeError, absl::NotFoundError(absl::StrCat("cannot open --output ",
                                                                    flags.output, " for writing")));
      }
      out = &file;
    }
    JsonLinesWriter writer(out);
    PredictOptions po;
    po.checkpoint_path = flags.checkpoint;
    po.predict_keys = flags.predict_keys;
    absl::Status s =
        (*estimator)
            ->Predict(
                input_fn, [&](const std::map<std::string, Tensor>& b) { return writer.Write(b); },
                po);
    if (!s.ok()) return Fail(s);
    out->flush();
    LOG(INFO) << "Wrote " << writer.count() << " predictions to " << flags.output;
    return 0;
  }
  return Fail(kUsageError, absl::InvalidArgumentError("unknown command " + command));
}

}  // namespace

int TrainerMain(int argc, char** argv, const std::function<void(ModelRegistry&)>& register_models) {
  InitProcess();
  CLI::App app{
      "tandem trainer: train, evaluate and predict with a registered model from a TOML job "
      "config. TF_CONFIG (TensorFlow's format) makes this process the chief, a worker, a "
      "ps or the evaluator of a cluster; `launch` runs a whole cluster locally."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("tandem trainer ") + TANDEM_VERSION);
  Flags flags;
  auto add_common = [&](CLI::App* sub, bool config_required = true) {
    CLI::Option* config = sub->add_option("--config", flags.config, "the TOML job config");
    if (config_required) config->required();
    sub->add_option("--set", flags.sets,
                    "override a config value: section.key=value (TOML value; repeatable)");
    sub->add_flag("--print_config", flags.print_config,
                  "print the resolved config (file < TF_CONFIG < --set) and exit");
  };
  auto add_health_port = [&](CLI::App* sub) {
    sub->add_option("--health_port", flags.health_port,
                    "also answer gRPC health checks, and nothing else, in plaintext on this "
                    "port (--set security.health_port=N; for Kubernetes probes under TLS)")
        ->check(CLI::Range(0, 65535));
  };
  CLI::App* train = app.add_subcommand("train", "train until [train] max_steps");
  add_common(train);
  add_health_port(train);
  CLI::App* evaluate =
      app.add_subcommand("evaluate", "evaluate a checkpoint (default: the latest)");
  add_common(evaluate);
  evaluate->add_option("--checkpoint", flags.checkpoint, "checkpoint prefix to evaluate");
  CLI::App* tae = app.add_subcommand(
      "train_and_evaluate", "train, evaluating after checkpoints (throttled) and at the end");
  add_common(tae);
  add_health_port(tae);
  CLI::App* predict = app.add_subcommand(
      "predict",
      "write predictions as JSON Lines: of a job's checkpoint (--config) or of an exported "
      "model (--exported, with --input instances)");
  add_common(predict, /*config_required=*/false);
  predict->add_option("--exported", flags.exported,
                      "an exported model: a version directory or an export base (its newest "
                      "version); needs no --config");
  predict
      ->add_option("--input", flags.input,
                   "with --exported: JSON Lines of instances (TensorFlow Serving's row "
                   "format, one per line), '-' for stdin")
      ->capture_default_str();
  predict->add_option("--checkpoint", flags.checkpoint, "checkpoint prefix (default: latest)");
  predict->add_option("--output", flags.output, "output file, '-' for stdout")
      ->capture_default_str();
  predict->add_option("--predict_keys", flags.predict_keys, "predictions to write (default all)");
  CLI::App* export_cmd = app.add_subcommand(
      "export",
      "export a checkpoint (default: the latest) for serving: a new version directory under "
      "--output with the PREDICT graph, the weights and signature.json");
  add_common(export_cmd);
  export_cmd->add_option("--checkpoint", flags.checkpoint, "checkpoint prefix (default: latest)");
  export_cmd->add_option("--output", flags.output, "the export base directory")->required();
  ServeFlags serve_flags;
  int serve_task = -1;
  CLI::App* serve = app.add_subcommand(
      "serve",
      "run one task of a cluster (e.g. a parameter server) until a client shuts it "
      "down");
  serve->add_option("--config", serve_flags.config,
                    "job config whose [cluster]/[task] (and TF_CONFIG) name the task");
  serve->add_option("--cluster", serve_flags.cluster,
                    "the cluster: TF_CONFIG JSON, a .json file of it, or a TOML file with "
                    "[cluster]");
  serve->add_option("--job", serve_flags.job, "this task's job (ps, worker, chief, ...)");
  serve->add_option("--task", serve_task, "this task's index in its job");
  serve->add_option("--token", serve_flags.token,
                    "cluster token every RPC must carry (default: $TANDEM_CLUSTER_TOKEN)");
  serve->add_option("--tls_cert", serve_flags.tls_cert, "PEM certificate: serve TLS");
  serve->add_option("--tls_key", serve_flags.tls_key, "PEM private key of --tls_cert");
  serve->add_option("--tls_ca", serve_flags.tls_ca, "PEM roots: require client certificates");
  serve->add_option("--inter_op_threads", serve_flags.inter_op_threads, "0: one per core")
      ->check(CLI::Range(0, 256));
  serve->add_option("--intra_op_threads", serve_flags.intra_op_threads, "0: one per core")
      ->check(CLI::Range(0, 256));
  serve
      ->add_option("--channels_per_task", serve_flags.channels_per_task,
                   "gRPC connections to each other task; concurrent tensor transfers "
                   "spread over them")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_subcommand("models", "list the registered models");
  app.add_subcommand("config_reference",
                     "print every job config key with its type, default and accepted values "
                     "(Markdown: docs/config-reference.md)");
  LaunchFlags launch_flags;
  CLI::App* launch = AddLaunchCommand(app, launch_flags);
  ServeModelFlags serve_model_flags;
  CLI::App* serve_model = AddServeModelCommand(app, serve_model_flags);
  HealthFlags health_flags;
  CLI::App* health = AddHealthCommand(app, health_flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kUsageError;
  }
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  std::string command = app.get_subcommands()[0]->get_name();
  if (command == "config_reference") {
    std::printf("%s", JobConfigReference().c_str());
    return 0;
  }
  if (command == "serve") {
    if (serve_task >= 0) serve_flags.task = serve_task;
    return Serve(serve_flags);
  }
  if (command == launch->get_name()) return Launch(launch_flags);
  if (command == serve_model->get_name()) return ServeModel(serve_model_flags);
  if (command == health->get_name()) return Health(health_flags);
  return Run(command, flags, register_models);
}

}  // namespace tandem

// estimator_bench: the Estimator's own cost. Trains the fashion_mlp model
// (784-256-128-100-10, Adam, batch 128) on Fashion-MNIST for the same number of steps
// twice in one process:
//   bare       a plain DirectSession loop feeding pre-shuffled rows
//              (apps/examples/session_trainer.h)
//   estimator  Estimator::Train with the job config's pipeline (shuffle, batch,
//              prefetch) and every default hook (logging, NaN check, step counter,
//              summaries, checkpoints)
// and prints steady-state examples/second of each (after `--warmup` steps) and the
// overhead = 1 - estimator / bare. Run by tests/bench/run.sh.
#include <chrono>
#include <cstdio>
#include <memory>

#include "CLI/CLI.hpp"
#include "apps/examples/models.h"
#include "apps/examples/session_trainer.h"
#include "estimator/estimator.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/data/fashion_mnist.h"
#include "glog/logging.h"

namespace tandem {
namespace {

// Records the wall time when step `warmup` finishes and when the last step does.
class TimingHook : public SessionRunHook {
 public:
  explicit TimingHook(int64_t warmup) : warmup_(warmup) {}
  absl::Status AfterRun(SessionRunContext&, const SessionRunValues&) override {
    if (++steps_ == warmup_) start_ = std::chrono::steady_clock::now();
    end_ = std::chrono::steady_clock::now();
    return absl::OkStatus();
  }
  double ExamplesPerSecond(int64_t batch) const {
    double s = std::chrono::duration<double>(end_ - start_).count();
    return s > 0 ? static_cast<double>((steps_ - warmup_) * batch) / s : 0;
  }

 private:
  int64_t warmup_, steps_ = 0;
  std::chrono::steady_clock::time_point start_, end_;
};

absl::StatusOr<double> EstimatorRate(const std::string& config, int64_t steps, int64_t warmup,
                                     int threads) {
  TANDEM_ASSIGN_OR_RETURN(std::string dir, env::MakeTempDir("estimator_bench"));
  std::vector<std::string> sets = {"run.model_dir=\"" + dir + "\"",
                                   "train.max_steps=" + std::to_string(steps + warmup),
                                   "run.inter_op_threads=" + std::to_string(threads),
                                   "run.intra_op_threads=" + std::to_string(threads)};
  TANDEM_ASSIGN_OR_RETURN(JobConfig job, JobConfig::Load(config, sets));
  ModelRegistry registry;
  TANDEM_RETURN_IF_ERROR(examples::RegisterExampleModels(registry));
  TANDEM_ASSIGN_OR_RETURN(auto model, registry.Create(job.model.name));
  EstimatorOptions eo;
  eo.model_fn = BindModelFn(model.get());
  eo.config = job.run_config();
  eo.params = job.model;
  TANDEM_ASSIGN_OR_RETURN(auto est, Estimator::Create(eo));
  auto timing = std::make_shared<TimingHook>(warmup);
  TrainOptions to;
  to.max_steps = job.train.max_steps;
  to.hooks.push_back(timing);
  TANDEM_RETURN_IF_ERROR(est->Train(BindInputFn(model.get(), &job), to).status());
  env::DeleteRecursively(dir).IgnoreError();
  return timing->ExamplesPerSecond(job.train.batch_size);
}

int Main(int argc, char** argv) {
  CLI::App app{"Estimator overhead: Estimator::Train vs a bare DirectSession loop."};
  std::string config = "configs/fashion_mlp.toml";
  int64_t steps = 1000, warmup = 50;
  int threads = 0;
  app.add_option("--config", config, "job config (fashion_mlp)")->capture_default_str();
  app.add_option("--steps", steps, "timed steps")->capture_default_str();
  app.add_option("--warmup", warmup, "untimed steps first")->capture_default_str();
  app.add_option("--threads", threads, "intra/inter-op threads (0 = per core)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = 1;  // Warnings and errors only: the bench prints its own line.
  google::InitGoogleLogging(argv[0]);

  auto data = data::LoadFashionMnist();
  if (!data.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(data.status().message()).c_str());
    return 1;
  }
  examples::SessionTrainOptions bare;
  bare.hidden = {256, 128, 100};
  bare.batch_size = 128;
  bare.threads = threads;
  bare.log_every = 0;
  bare.evaluate = false;
  // The bare loop times all its steps; run the warmup separately first.
  bare.max_steps = warmup;
  if (auto w = examples::TrainFashionModel(*data, bare); !w.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(w.status().message()).c_str());
    return 1;
  }
  bare.max_steps = steps;
  auto b = examples::TrainFashionModel(*data, bare);
  if (!b.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(b.status().message()).c_str());
    return 1;
  }
  auto e = EstimatorRate(config, steps, warmup, threads);
  if (!e.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(e.status().message()).c_str());
    return 1;
  }
  std::printf("estimator_overhead bare=%.0f estimator=%.0f overhead=%.1f%% examples/s\n",
              b->examples_per_second, *e, 100.0 * (1.0 - *e / b->examples_per_second));
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) { return tandem::Main(argc, argv); }

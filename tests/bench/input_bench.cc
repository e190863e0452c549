// input_bench: a job config's input pipeline alone, as the Estimator makes it for
// training (the premade estimators' CSV or tf.Example input, or an example model's):
// times `--steps` batches after `--warmup` and prints
//   input_bench config=<file> batch=<n> us_per_batch=<t> examples_per_second=<r> isa=<oneDNN's>
// tests/bench/census_bench.sh divides it by the trainer's time per step: the share of
// the step spent in the pipeline (the feature columns' hashing and lookups run inside
// the step, as graph ops).
#include <chrono>
#include <cstdio>
#include <memory>

#include "CLI/CLI.hpp"
#include "apps/examples/models.h"
#include "estimator/canned/canned_model.h"
#include "estimator/model.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/onednn_util.h"
#include "glog/logging.h"

namespace tandem {
namespace {

absl::Status Run(const std::string& config, const std::vector<std::string>& sets, int64_t steps,
                 int64_t warmup) {
  TANDEM_ASSIGN_OR_RETURN(JobConfig job, JobConfig::Load(config, sets));
  ModelRegistry registry;
  TANDEM_RETURN_IF_ERROR(canned::RegisterPremadeEstimators(registry));
  TANDEM_RETURN_IF_ERROR(examples::RegisterExampleModels(registry));
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, registry.Create(job.model.name, job));
  TANDEM_ASSIGN_OR_RETURN(InputData in, model->InputFn(ModeKey::kTrain, InputContext{}, job));
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<data::Iterator> it, in.dataset->MakeIterator());
  std::chrono::steady_clock::time_point start;
  for (int64_t i = 0; i < warmup + steps; ++i) {
    if (i == warmup) start = std::chrono::steady_clock::now();
    TANDEM_ASSIGN_OR_RETURN(std::optional<data::Element> e, it->GetNext());
    if (!e) return absl::OutOfRangeError("the input ended");
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int64_t batch = job.train.batch_size;
  std::printf(
      "input_bench config=%s batch=%lld us_per_batch=%.2f examples_per_second=%.0f isa=%s\n",
      config.c_str(), static_cast<long long>(batch), 1e6 * s / static_cast<double>(steps),
      static_cast<double>(steps * batch) / s, onednn::EffectiveIsaName().c_str());
  return absl::OkStatus();
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  CLI::App app{"Times a job config's training input pipeline alone."};
  std::string config;
  std::vector<std::string> sets;
  int64_t steps = 5000, warmup = 500;
  app.add_option("--config", config, "the TOML job config")->required();
  app.add_option("--set", sets, "override a config value: section.key=value");
  app.add_option("--steps", steps, "timed batches")->capture_default_str();
  app.add_option("--warmup", warmup, "untimed batches first")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  absl::Status s = tandem::Run(config, sets, steps, warmup);
  if (!s.ok()) {
    std::fprintf(stderr, "input_bench: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}

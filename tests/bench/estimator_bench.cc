// estimator_bench: the Estimator's own cost. Trains the job config's model (fashion_mlp,
// 784-256-128-100-10, by default; or fashion_cnn), with its batch size and precision,
// on Fashion-MNIST for the same number of steps twice in one process:
//   bare       a plain DirectSession loop feeding pre-shuffled rows
//              (apps/examples/session_trainer.h)
//   estimator  Estimator::Train with the job config's pipeline (shuffle, batch,
//              prefetch) and every default hook (logging, NaN check, step counter,
//              summaries, checkpoints)
// in interleaved rounds, and prints steady-state examples/second of each (after
// `--warmup` untimed steps per run) and the overhead = 1 - estimator / bare, per round
// and as the median over rounds. `--only pipeline` times the input pipeline alone, and
// the gather of a shuffled batch's rows from huge and from small pages. Run by
// tests/bench/run.sh.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
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

// One Estimator kept across rounds: each Train call resumes from the model_dir's latest
// checkpoint and runs `warmup + steps` more steps, timing the last `steps`.
class EstimatorRunner {
 public:
  static absl::StatusOr<std::unique_ptr<EstimatorRunner>> Create(
      const std::string& config, int threads, const std::vector<std::string>& extra_sets) {
    auto r = std::unique_ptr<EstimatorRunner>(new EstimatorRunner);
    TANDEM_ASSIGN_OR_RETURN(r->dir_, env::MakeTempDir("estimator_bench"));
    std::vector<std::string> sets = {"run.model_dir=\"" + r->dir_ + "\"", "run.inter_op_threads=1",
                                     "run.intra_op_threads=" + std::to_string(threads),
                                     "run.num_gpus=0"};  // The bare loop computes on the CPU.
    sets.insert(sets.end(), extra_sets.begin(), extra_sets.end());
    TANDEM_ASSIGN_OR_RETURN(r->job_, JobConfig::Load(config, sets));
    ModelRegistry registry;
    TANDEM_RETURN_IF_ERROR(examples::RegisterExampleModels(registry));
    TANDEM_ASSIGN_OR_RETURN(r->model_, registry.Create(r->job_.model.name));
    EstimatorOptions eo;
    eo.model_fn = BindModelFn(r->model_.get());
    eo.config = r->job_.run_config();
    eo.params = r->job_.model;
    TANDEM_ASSIGN_OR_RETURN(r->est_, Estimator::Create(eo));
    return r;
  }
  const JobConfig& job() const { return job_; }
  ~EstimatorRunner() {
    if (!dir_.empty()) env::DeleteRecursively(dir_).IgnoreError();
  }

  // Microseconds per training batch of the job's input pipeline alone (no prefetch
  // thread: the producer's own cost), over `batches` after one warm-up epoch's worth.
  absl::StatusOr<double> PipelineMicrosPerBatch(int64_t batches) {
    JobConfig job = job_;
    job.data.prefetch_buffer = 0;
    TANDEM_ASSIGN_OR_RETURN(InputData in, BindInputFn(model_.get(), &job)(ModeKey::kTrain, {}));
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<data::Iterator> it, in.dataset->MakeIterator());
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t b = 0; b < batches; ++b) {
      TANDEM_ASSIGN_OR_RETURN(std::optional<data::Element> e, it->GetNext());
      if (!e) return absl::OutOfRangeError("the training input ended");
    }
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
               .count() /
           static_cast<double>(batches);
  }

  absl::StatusOr<double> Rate(int64_t steps, int64_t warmup) {
    auto timing = std::make_shared<TimingHook>(warmup);
    done_ += warmup + steps;
    TrainOptions to;
    to.max_steps = done_;
    to.hooks.push_back(timing);
    TANDEM_RETURN_IF_ERROR(est_->Train(BindInputFn(model_.get(), &job_), to).status());
    return timing->ExamplesPerSecond(job_.train.batch_size);
  }

 private:
  EstimatorRunner() = default;
  std::string dir_;
  JobConfig job_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Estimator> est_;
  int64_t done_ = 0;
};

// The cost of the page size in a shuffled batch's gather: microseconds per batch of
// `batch` random rows copied out of `source` (float32 [n, d], as the allocator placed it:
// huge pages for a block this large) and out of a copy in memory from malloc (small
// pages unless the system backs all memory with huge ones), alternated batch by batch
// over `batches` batches each. Returns {tensor, malloc copy}.
std::pair<double, double> GatherMicrosPerBatch(const Tensor& source, int64_t batch,
                                               int64_t batches) {
  const int64_t n = source.dim(0), d = source.dim(1);
  const size_t row_bytes = static_cast<size_t>(d) * sizeof(float);
  std::unique_ptr<float, decltype(&std::free)> copy(
      static_cast<float*>(std::malloc(static_cast<size_t>(n) * row_bytes)), &std::free);
  CHECK(copy != nullptr);
  std::memcpy(copy.get(), source.data<float>(), static_cast<size_t>(n) * row_bytes);
  std::vector<float> out(static_cast<size_t>(batch * d));
  std::mt19937_64 rng(1);
  std::vector<int64_t> rows(batch);
  double micros[2] = {0, 0};
  for (int64_t b = 0; b < 2 * batches; ++b) {
    for (int64_t& r : rows) r = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
    const float* from = b % 2 == 0 ? source.data<float>() : copy.get();
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < batch; ++i) std::memcpy(&out[i * d], from + rows[i] * d, row_bytes);
    micros[b % 2] +=
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  }
  return {micros[0] / static_cast<double>(batches), micros[1] / static_cast<double>(batches)};
}

// The pooled rate of runs of equal step counts: total examples over total time, the
// harmonic mean of their rates. Periodic costs (a checkpoint every N steps) land in
// some rounds and not others; pooling charges them at their real frequency.
double PooledRate(const std::vector<double>& rates) {
  double seconds_per_example = 0;
  for (double r : rates) seconds_per_example += 1.0 / r;
  return static_cast<double>(rates.size()) / seconds_per_example;
}

// The bare loop's model, batch and precision: the job's. The bare CNN is
// examples::BuildCnn, fashion_cnn's default shape.
absl::StatusOr<examples::SessionTrainOptions> BareOptionsFor(const JobConfig& job) {
  examples::SessionTrainOptions bare;
  if (job.model.name == "fashion_mlp") {
    bare.model = "mlp";
    TANDEM_ASSIGN_OR_RETURN(bare.hidden, job.model.GetIntList("hidden_units", {256, 128, 100}));
  } else if (job.model.name == "fashion_cnn") {
    bare.model = "cnn";
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "estimator_bench compares fashion_mlp or fashion_cnn, got '", job.model.name, "'"));
  }
  bare.batch_size = job.train.batch_size;
  TANDEM_ASSIGN_OR_RETURN(bare.precision, ParsePrecision(job.run.precision));
  return bare;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "error: %s\n", std::string(s.message()).c_str());
  return 1;
}

int Main(int argc, char** argv) {
  CLI::App app{"Estimator overhead: Estimator::Train vs a bare DirectSession loop."};
  std::string config = "configs/fashion_mlp.toml";
  int64_t steps = 400, warmup = 30;
  int rounds = 7, threads = 0;
  std::string only;
  std::vector<std::string> sets;
  app.add_option("--config", config, "job config (fashion_mlp or fashion_cnn)")
      ->capture_default_str();
  app.add_option("--steps", steps, "timed steps per round and contender")->capture_default_str();
  app.add_option("--warmup", warmup, "untimed steps before each timed run")->capture_default_str();
  app.add_option("--rounds", rounds, "bare/estimator pairs, interleaved")->capture_default_str();
  app.add_option("--threads", threads, "intra-op threads (0 = per core); one inter-op thread")
      ->capture_default_str();
  app.add_option("--set", sets, "config override KEY=VALUE for the Estimator (repeatable)");
  app.add_option(
         "--only", only,
         "run one contender (bare, estimator), or time the input pipeline and its row gather")
      ->check(CLI::IsMember({"bare", "estimator", "pipeline"}));
  CLI11_PARSE(app, argc, argv);
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = 1;  // Warnings and errors only: the bench prints its own lines.
  google::InitGoogleLogging(argv[0]);

  auto data = data::LoadFashionMnist();
  if (!data.ok()) return Fail(data.status());
  auto est = EstimatorRunner::Create(config, threads, sets);
  if (!est.ok()) return Fail(est.status());
  if (only == "pipeline") {
    auto us = (*est)->PipelineMicrosPerBatch(steps);
    if (!us.ok()) return Fail(us.status());
    const int64_t batch = (*est)->job().train.batch_size;
    std::printf("input pipeline: %.1f us per batch of %lld (%lld batches)\n", *us,
                static_cast<long long>(batch), static_cast<long long>(steps));
    const auto [huge, small] = GatherMicrosPerBatch(data->train.images, batch, steps);
    std::printf(
        "row gather: %.1f us per batch of %lld from the tensor (huge pages), %.1f from a "
        "malloc copy (small pages), small_over_huge=%.2f\n",
        huge, static_cast<long long>(batch), small, small / huge);
    return 0;
  }
  auto bare_or = BareOptionsFor((*est)->job());
  if (!bare_or.ok()) return Fail(bare_or.status());
  examples::SessionTrainOptions bare = *bare_or;
  bare.threads = threads;
  bare.log_every = 0;
  bare.evaluate = false;
  bare.max_steps = warmup + steps;
  bare.untimed_steps = warmup;
  // Rounds alternate the two contenders so that drift in the machine's speed (other
  // tenants, frequency) hits both alike; the figure pools each contender's rounds.
  std::vector<double> overheads, bare_rates, est_rates;
  for (int r = 0; r < rounds; ++r) {
    bare.seed = r + 1;
    absl::StatusOr<examples::SessionTrainResult> b = examples::SessionTrainResult{};
    if (only != "estimator") b = examples::TrainFashionModel(*data, bare);
    if (!b.ok()) return Fail(b.status());
    absl::StatusOr<double> e = 0.0;
    if (only != "bare") e = (*est)->Rate(steps, warmup);
    if (!e.ok()) return Fail(e.status());
    bare_rates.push_back(b->examples_per_second);
    est_rates.push_back(*e);
    overheads.push_back(100.0 * (1.0 - *e / b->examples_per_second));
    std::printf("round %d bare=%.0f estimator=%.0f overhead=%.1f%%\n", r + 1,
                b->examples_per_second, *e, overheads.back());
  }
  if (only.empty()) {
    const double bare_rate = PooledRate(bare_rates), est_rate = PooledRate(est_rates);
    std::printf(
        "estimator_overhead bare=%.0f estimator=%.0f overhead=%.1f%% (%d rounds pooled, "
        "per-round %.1f%%..%.1f%%) examples/s\n",
        bare_rate, est_rate, 100.0 * (1.0 - est_rate / bare_rate), rounds,
        *std::min_element(overheads.begin(), overheads.end()),
        *std::max_element(overheads.begin(), overheads.end()));
  }
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) { return tandem::Main(argc, argv); }

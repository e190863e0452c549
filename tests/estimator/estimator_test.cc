// Estimator end to end on a small linear model: train / skip at max_steps / resume,
// evaluate (metrics, eval event files), predict, warm start, train_and_evaluate,
// and the errors of bad specs and inputs.
#include "estimator/estimator.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "checkpoint/checkpoint_reader.h"
#include "estimator/training.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/layers.h"
#include "framework/ops/losses.h"
#include "framework/ops/metrics.h"
#include "framework/ops/optimizers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hooks/summary.h"
#include "tests/estimator/linear_model.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using testing::g_learning_rate;
using ::testing::HasSubstr;
using testing::LinearInput;
using testing::LinearModelFn;

class EstimatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = env::MakeTempDir("estimator_test");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    g_learning_rate = 0.05f;
  }
  void TearDown() override { env::DeleteRecursively(dir_).IgnoreError(); }

  std::unique_ptr<Estimator> Make(const std::string& model_dir, RunConfigOptions ro = {},
                                  WarmStartSettings ws = {}) {
    ro.model_dir = model_dir;
    if (!ro.save_checkpoints_secs)
      ro.save_checkpoints_steps = ro.save_checkpoints_steps.value_or(100);
    ro.tf_random_seed = 7;
    ro.log_step_count_steps = 50;
    auto config = RunConfig::Create(ro, TfConfig());
    EXPECT_TRUE(config.ok()) << config.status();
    EstimatorOptions o;
    o.model_fn = LinearModelFn;
    o.config = *config;
    o.warm_start = ws;
    auto e = Estimator::Create(o);
    EXPECT_TRUE(e.ok()) << e.status();
    return std::move(*e);
  }

  std::string dir_;
};

TEST_F(EstimatorTest, TrainEvaluatePredictAndResume) {
  auto est = Make(env::JoinPath(dir_, "m"));
  TrainOptions to;
  to.max_steps = 200;
  auto step = est->Train(LinearInput(), to);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 200);
  EXPECT_THAT(est->LatestCheckpoint(), HasSubstr("model.ckpt-200"));

  auto eval = est->Evaluate(LinearInput());
  ASSERT_TRUE(eval.ok()) << eval.status();
  EXPECT_EQ(eval->global_step, 200);
  ASSERT_TRUE(eval->metrics.count("mse"));
  ASSERT_TRUE(eval->metrics.count("loss"));
  EXPECT_LT(eval->metrics["mse"], 0.01f);  // A linear target, learned.
  // Every batch has 32 examples, so the mean batch loss equals the streaming MSE.
  EXPECT_NEAR(eval->metrics["loss"], eval->metrics["mse"], 1e-5);
  auto scalars = ReadScalars(est->EvalDir(""));
  ASSERT_TRUE(scalars.ok()) << scalars.status();
  ASSERT_EQ((*scalars)["mse"].size(), 1u);
  EXPECT_EQ((*scalars)["mse"][0].step, 200);
  EXPECT_FLOAT_EQ((*scalars)["mse"][0].value, eval->metrics["mse"]);

  // Already at max_steps: skipped, nothing new saved.
  auto again = est->Train(LinearInput(), to);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 200);
  // Resume: `steps` more from the restored global step.
  TrainOptions more;
  more.steps = 30;
  auto resumed = est->Train(LinearInput(), more);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(*resumed, 230);
  EXPECT_THAT(est->LatestCheckpoint(), HasSubstr("model.ckpt-230"));

  int64_t rows = 0;
  auto s = est->Predict(LinearInput(100), [&](const std::map<std::string, Tensor>& p) {
    EXPECT_EQ(p.size(), 1u);
    const Tensor& y = p.at("y");
    EXPECT_EQ(y.dim(1), 1);
    rows += y.dim(0);
    return absl::OkStatus();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(rows, 512);  // Predict reads the input to its end (last batch of 12).
}

TEST_F(EstimatorTest, TrainingLossGoesDownAndSummariesAreWritten) {
  RunConfigOptions ro;
  ro.save_summary_steps = 20;
  auto est = Make(env::JoinPath(dir_, "m"), ro);
  TrainOptions to;
  to.max_steps = 100;
  ASSERT_TRUE(est->Train(LinearInput(), to).ok());
  auto scalars = ReadScalars(est->model_dir());
  ASSERT_TRUE(scalars.ok()) << scalars.status();
  const auto& loss = (*scalars)["loss"];
  ASSERT_GE(loss.size(), 4u);
  EXPECT_LT(loss.back().value, loss.front().value * 0.1f);
  EXPECT_TRUE(scalars->count("global_step/sec"));
}

TEST_F(EstimatorTest, TraceEveryStepsWritesChromeTimelines) {
  RunConfigOptions ro;
  ro.trace_every_steps = 20;
  auto est = Make(env::JoinPath(dir_, "traced"), ro);
  TrainOptions to;
  to.max_steps = 50;
  ASSERT_TRUE(est->Train(LinearInput(), to).ok());
  std::vector<std::string> timelines;
  for (const auto& entry : std::filesystem::directory_iterator(est->model_dir())) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("timeline-", 0) == 0) timelines.push_back(name);
  }
  std::sort(timelines.begin(), timelines.end());
  // Every 20 steps, named by the global step after the traced step.
  EXPECT_THAT(timelines, ElementsAre("timeline-20.json", "timeline-40.json"));
  absl::StatusOr<std::string> trace =
      env::ReadFile(env::JoinPath(est->model_dir(), "timeline-20.json"));
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_THAT(*trace, HasSubstr("\"traceEvents\""));
  EXPECT_THAT(*trace, HasSubstr("MatMul"));

  RunConfigOptions bad;
  bad.model_dir = dir_;
  bad.trace_every_steps = -1;
  EXPECT_THAT(RunConfig::Create(bad, TfConfig()).status().message(),
              HasSubstr("trace_every_steps should be >= 0"));
}

TEST_F(EstimatorTest, WarmStartCopiesTrainableVariables) {
  auto src = Make(env::JoinPath(dir_, "src"));
  TrainOptions to;
  to.max_steps = 100;
  ASSERT_TRUE(src->Train(LinearInput(), to).ok());
  g_learning_rate = 1e-12f;  // Training barely moves the warm-started values.
  WarmStartSettings ws;
  ws.ckpt_to_initialize_from = src->model_dir();  // A directory: its latest checkpoint.
  auto dst = Make(env::JoinPath(dir_, "dst"), {}, ws);
  TrainOptions one;
  one.steps = 1;
  auto step = dst->Train(LinearInput(), one);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 1);  // The global step is not warm-started.
  auto a = checkpoint::CheckpointReader::Open(src->LatestCheckpoint());
  auto b = checkpoint::CheckpointReader::Open(dst->LatestCheckpoint());
  ASSERT_TRUE(a.ok() && b.ok());
  auto ka = (*a)->Read("dense/kernel");
  auto kb = (*b)->Read("dense/kernel");
  ASSERT_TRUE(ka.ok() && kb.ok()) << ka.status() << kb.status();
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(ka->data<float>()[i], kb->data<float>()[i], 1e-6);

  WarmStartSettings bad;
  bad.ckpt_to_initialize_from = env::JoinPath(dir_, "nowhere");
  auto broken = Make(env::JoinPath(dir_, "broken"), {}, bad);
  auto failed = broken->Train(LinearInput(), one);
  EXPECT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(), HasSubstr("warm start")) << failed.status();
}

// The bytes Python's safetensors writes (no tandem CRCs; {"format": "pt"} metadata;
// header padded with spaces to 8 bytes): fc.weight [2, 1] = (w0, w1), fc.bias [1] = b.
std::string ForeignSafetensors(float w0, float w1, float b) {
  std::string header =
      R"({"__metadata__":{"format":"pt"},"fc.bias":{"dtype":"F32","shape":[1],)"
      R"("data_offsets":[0,4]},"fc.weight":{"dtype":"F32","shape":[2,1],"data_offsets":[4,12]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  bytes += header;
  for (float v : {b, w0, w1}) bytes.append(reinterpret_cast<const char*>(&v), 4);
  return bytes;
}

TEST_F(EstimatorTest, WarmStartFromAForeignSafetensorsFileWithANameMap) {
  const std::string file = env::JoinPath(dir_, "weights.safetensors");
  ASSERT_TRUE(env::WriteFileAtomic(file, ForeignSafetensors(1.5f, -0.25f, 0.75f)).ok());
  g_learning_rate = 1e-12f;  // Training barely moves the warm-started values.
  WarmStartSettings ws;
  ws.ckpt_to_initialize_from = file;
  ws.var_name_to_prev_var_name = {{"dense/kernel", "fc.weight"}, {"dense/bias", "fc.bias"}};
  auto est = Make(env::JoinPath(dir_, "m"), {}, ws);
  TrainOptions one;
  one.steps = 1;
  ASSERT_TRUE(est->Train(LinearInput(), one).ok());
  auto reader = checkpoint::CheckpointReader::Open(est->LatestCheckpoint());
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto kernel = (*reader)->Read("dense/kernel");
  auto bias = (*reader)->Read("dense/bias");
  ASSERT_TRUE(kernel.ok() && bias.ok()) << kernel.status() << bias.status();
  EXPECT_NEAR(kernel->data<float>()[0], 1.5f, 1e-6);
  EXPECT_NEAR(kernel->data<float>()[1], -0.25f, 1e-6);
  EXPECT_NEAR(bias->data<float>()[0], 0.75f, 1e-6);

  auto fails = [&](const WarmStartSettings& w, const std::string& name) {
    auto e = Make(env::JoinPath(dir_, name), {}, w);
    absl::StatusOr<int64_t> r = e->Train(LinearInput(), one);
    EXPECT_FALSE(r.ok()) << name;
    return std::string(r.status().message());
  };
  WarmStartSettings unmapped = ws;  // Without the map the model's names are absent.
  unmapped.var_name_to_prev_var_name.clear();
  EXPECT_THAT(fails(unmapped, "unmapped"), HasSubstr("'dense/kernel'"));
  WarmStartSettings stray = ws;
  stray.var_name_to_prev_var_name["dense/nothing"] = "fc.other";
  EXPECT_THAT(fails(stray, "stray"), HasSubstr("the variable-name map names dense/nothing"));
  // A corrupt file: truncated data, then a damaged header.
  std::string bytes = ForeignSafetensors(1, 2, 3);
  ASSERT_TRUE(env::WriteFileAtomic(file, bytes.substr(0, bytes.size() - 2)).ok());
  EXPECT_THAT(fails(ws, "truncated"), HasSubstr("weights.safetensors"));
  bytes[8] = 'x';  // The header's opening brace.
  ASSERT_TRUE(env::WriteFileAtomic(file, bytes).ok());
  EXPECT_THAT(
      fails(ws, "damaged"),
      HasSubstr("weights.safetensors: corrupt safetensors shard: header is not valid JSON"));
}

TEST_F(EstimatorTest, TrainAndEvaluateEvaluatesAfterCheckpoints) {
  auto est = Make(env::JoinPath(dir_, "m"));  // Checkpoints every 100 steps.
  TrainSpec ts{LinearInput(), 300, {}};
  EvalSpec es;
  es.input_fn = LinearInput();
  es.steps = 4;
  es.throttle_secs = 0;
  auto r = TrainAndEvaluate(*est, ts, es);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->global_step, 300);
  auto scalars = ReadScalars(est->EvalDir(""));
  ASSERT_TRUE(scalars.ok());
  std::vector<int64_t> steps;
  for (const auto& p : (*scalars)["loss"]) steps.push_back(p.step);
  EXPECT_THAT(steps, ElementsAre(100, 200, 300));
}

// An unreadable newest checkpoint: Evaluate and Predict restore the one before it, as
// Train does, and say which they used.
TEST_F(EstimatorTest, EvaluateAndPredictFallBackPastACorruptNewestCheckpoint) {
  auto est = Make(env::JoinPath(dir_, "m"));  // Checkpoints every 100 steps.
  TrainOptions to;
  to.max_steps = 200;
  ASSERT_TRUE(est->Train(LinearInput(), to).ok());
  const std::string shard = env::JoinPath(dir_, "m/model.ckpt-200-00000-of-00001.safetensors");
  absl::StatusOr<std::string> bytes = env::ReadFile(shard);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  std::string flipped = *bytes;
  flipped[flipped.size() - 3] ^= 0x40;
  ASSERT_TRUE(env::WriteFileAtomic(shard, flipped).ok());

  auto eval = est->Evaluate(LinearInput());
  ASSERT_TRUE(eval.ok()) << eval.status();
  EXPECT_EQ(eval->global_step, 100);
  EXPECT_THAT(eval->checkpoint_path, HasSubstr("model.ckpt-100"));
  int64_t rows = 0;
  auto s = est->Predict(LinearInput(100), [&](const std::map<std::string, Tensor>& p) {
    rows += p.at("y").dim(0);
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(rows, 512);
  // Naming the corrupt checkpoint itself is still an error.
  EvalOptions named;
  named.checkpoint_path = env::JoinPath(dir_, "m/model.ckpt-200");
  EXPECT_EQ(est->Evaluate(LinearInput(), named).status().code(), absl::StatusCode::kDataLoss);
}

// The evaluator of a cluster evaluates the newest checkpoint up to max_steps; started
// again (a restart), it finds that evaluation in eval/ and does not repeat it.
TEST_F(EstimatorTest, EvaluatorRoleNeverEvaluatesACheckpointTwice) {
  const std::string model_dir = env::JoinPath(dir_, "m");
  TrainOptions to;
  to.max_steps = 200;
  ASSERT_TRUE(Make(model_dir)->Train(LinearInput(), to).ok());

  absl::StatusOr<TfConfig> tf = ParseTfConfig(
      R"({"cluster": {"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"]},
          "task": {"type": "evaluator", "index": 0}})");
  ASSERT_TRUE(tf.ok()) << tf.status();
  RunConfigOptions ro;
  ro.model_dir = model_dir;
  absl::StatusOr<RunConfig> config = RunConfig::Create(ro, *tf);
  ASSERT_TRUE(config.ok()) << config.status();
  EstimatorOptions eo;
  eo.model_fn = LinearModelFn;
  eo.config = *config;
  absl::StatusOr<std::unique_ptr<Estimator>> evaluator = Estimator::Create(eo);
  ASSERT_TRUE(evaluator.ok()) << evaluator.status();
  TrainSpec ts{LinearInput(), 200, {}};
  EvalSpec es;
  es.input_fn = LinearInput();
  es.steps = 2;
  es.start_delay_secs = 0;
  es.throttle_secs = 0;
  for (int run = 0; run < 2; ++run) {
    absl::StatusOr<TaskResult> r = TrainAndEvaluate(**evaluator, ts, es);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->role, "evaluator");
    EXPECT_EQ(r->evaluation.has_value(), run == 0) << "run " << run;
    auto scalars = ReadScalars((*evaluator)->EvalDir(""));
    ASSERT_TRUE(scalars.ok()) << scalars.status();
    ASSERT_EQ((*scalars)["loss"].size(), 1u) << "run " << run;
    EXPECT_EQ((*scalars)["loss"][0].step, 200);
  }
}

TEST_F(EstimatorTest, EndOfInputEndsTraining) {
  auto est = Make(env::JoinPath(dir_, "m"));
  auto step = est->Train(LinearInput(32, /*repeat=*/false));  // One pass: 16 batches.
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 16);
}

// Passes its input through, recording ScopedStepCpuThreads::Current() when each
// iterator is made.
class StepThreadsProbe : public data::Dataset {
 public:
  StepThreadsProbe(data::DatasetPtr in, std::vector<int>* seen) : in_(std::move(in)), seen_(seen) {}
  absl::StatusOr<std::unique_ptr<data::Iterator>> MakeIterator() const override {
    seen_->push_back(data::ScopedStepCpuThreads::Current());
    return in_->MakeIterator();
  }
  std::string DebugString() const override { return "StepThreadsProbe"; }

 private:
  data::DatasetPtr in_;
  std::vector<int>* seen_;
};

// Train, Evaluate and Predict make their input's iterator knowing the CPU threads their
// steps compute on (the session config's intra-op threads), which decides whether an
// autotuned Prefetch gets a producer thread.
TEST_F(EstimatorTest, InputIteratorsKnowTheStepsCpuThreads) {
  RunConfigOptions ro;
  ro.num_gpus = 0;
  ro.session_config =
      SessionConfig{.inter_op_parallelism_threads = 1, .intra_op_parallelism_threads = 3};
  auto est = Make(env::JoinPath(dir_, "m"), ro);
  std::vector<int> seen;
  auto probed = [&seen](ModeKey mode, const InputContext& context) -> absl::StatusOr<InputData> {
    TANDEM_ASSIGN_OR_RETURN(InputData in, LinearInput(32, /*repeat=*/false)(mode, context));
    in.dataset = std::make_shared<StepThreadsProbe>(in.dataset, &seen);
    return in;
  };
  ASSERT_TRUE(est->Train(probed, TrainOptions{.max_steps = 3}).ok());
  ASSERT_TRUE(est->Evaluate(probed).ok());
  int predictions = 0;
  ASSERT_TRUE(est->Predict(probed,
                           [&](const std::map<std::string, Tensor>&) {
                             ++predictions;
                             return absl::OkStatus();
                           })
                  .ok());
  EXPECT_GT(predictions, 0);
  EXPECT_THAT(seen, ElementsAre(3, 3, 3));
  EXPECT_EQ(data::ScopedStepCpuThreads::Current(), 0) << "the scope ended with each call";
}

TEST_F(EstimatorTest, Errors) {
  auto est = Make(env::JoinPath(dir_, "m"));
  auto no_ckpt = est->Evaluate(LinearInput());
  EXPECT_EQ(no_ckpt.status().code(), absl::StatusCode::kFailedPrecondition);

  TrainOptions both;
  both.steps = 1;
  both.max_steps = 2;
  EXPECT_EQ(est->Train(LinearInput(), both).status().code(), absl::StatusCode::kInvalidArgument);

  InputFn wrong_arity = [](ModeKey, const InputContext&) -> absl::StatusOr<InputData> {
    auto ds = data::FromTensors({Tensor(DType::kFloat, TensorShape({4, 2}))});
    if (!ds.ok()) return ds.status();
    return InputData{(*ds)->Batch(2), {"x"}, true};  // Claims labels it does not have.
  };
  auto s = est->Train(wrong_arity);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("1 components"));

  EstimatorOptions o;
  o.model_fn = [](const Scope& scope, const Features& f, Output labels, ModeKey mode,
                  const ModelSection&) -> absl::StatusOr<EstimatorSpec> {
    EstimatorSpec spec;
    spec.mode = mode;
    spec.loss = ops::MeanSquaredError(scope, labels, ops::Dense(scope, f.at("x"), 1));
    return spec;  // No train_op.
  };
  RunConfigOptions ro;
  ro.model_dir = env::JoinPath(dir_, "n");
  o.config = *RunConfig::Create(ro, TfConfig());
  auto no_train_op = Estimator::Create(o);
  ASSERT_TRUE(no_train_op.ok());
  auto t = (*no_train_op)->Train(LinearInput());
  EXPECT_THAT(t.status().message(), HasSubstr("missing train_op"));
}

TEST(EstimatorSpecTest, ValidateFollowsTensorFlowRules) {
  Scope root = Scope::NewRootScope();
  Output scalar = ops::Const(root, 1.0f);
  Output vector = ops::Const(root, {1.0f, 2.0f}, TensorShape({2}));
  EstimatorSpec spec;
  spec.mode = ModeKey::kEval;
  EXPECT_THAT(spec.Validate().message(), HasSubstr("missing loss"));
  spec.loss = vector;
  EXPECT_THAT(spec.Validate().message(), HasSubstr("must be a scalar"));
  spec.loss = scalar;
  EXPECT_TRUE(spec.Validate().ok());
  spec.mode = ModeKey::kPredict;
  EXPECT_THAT(spec.Validate().message(), HasSubstr("missing predictions"));
  spec.predictions["p"] = scalar;
  EXPECT_THAT(spec.Validate().message(), HasSubstr("batch as its first dimension"));
  spec.predictions["p"] = vector;
  EXPECT_TRUE(spec.Validate().ok());
}

class NullModel : public Model {
  absl::StatusOr<InputData> InputFn(ModeKey, const InputContext&, const JobConfig&) override {
    return absl::UnimplementedError("unused");
  }
  absl::StatusOr<EstimatorSpec> ModelFn(const Scope&, const Features&, Output, ModeKey,
                                        const ModelSection&) override {
    return absl::UnimplementedError("unused");
  }
};

TEST(ModelRegistryTest, RegisterCreateAndSuggest) {
  ModelRegistry registry;
  ASSERT_TRUE(registry.Register("fashion_mlp", [] { return std::make_unique<NullModel>(); }).ok());
  EXPECT_EQ(registry.Register("fashion_mlp", [] { return std::make_unique<NullModel>(); }).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(registry.Create("fashion_mlp").ok());
  auto missing = registry.Create("fashion_mpl");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("did you mean 'fashion_mlp'"));
  EXPECT_THAT(registry.Names(), ElementsAre("fashion_mlp"));
}

}  // namespace
}  // namespace tandem

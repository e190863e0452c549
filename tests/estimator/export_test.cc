// Export from the Estimator: ExportSavedModel of a trained model loads without the
// model code and predicts what Estimator::Predict does; a missing checkpoint is
// refused; exporters in train_and_evaluate (final, latest with keep, best by a metric
// with restart) write model_dir/export/<name>/<version> when their strategy says so.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "estimator/estimator.h"
#include "estimator/exporter.h"
#include "estimator/training.h"
#include "framework/core/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "serving/exported_model.h"
#include "tests/estimator/linear_model.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

class ExportTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = *env::MakeTempDir("export_test"); }
  void TearDown() override { env::DeleteRecursively(dir_).IgnoreError(); }

  std::unique_ptr<Estimator> Make(int64_t save_steps = 50) {
    RunConfigOptions ro;
    ro.model_dir = env::JoinPath(dir_, "m");
    ro.save_checkpoints_steps = save_steps;
    ro.tf_random_seed = 7;
    auto config = RunConfig::Create(ro, TfConfig());
    EXPECT_TRUE(config.ok()) << config.status();
    EstimatorOptions o;
    o.model_fn = testing::LinearModelFn;
    o.config = *config;
    auto e = Estimator::Create(o);
    EXPECT_TRUE(e.ok()) << e.status();
    return std::move(*e);
  }
  std::shared_ptr<Exporter> MakeExporter(ExporterOptions::Strategy strategy, int keep = 5,
                                         const std::string& metric = "loss") {
    ExporterOptions o;
    o.strategy = strategy;
    o.name = "e";
    o.serving_input_fn = testing::LinearInput();
    o.model_name = "linear";
    o.keep = keep;
    o.metric = metric;
    return std::make_shared<Exporter>(o);
  }
  std::string ExportBase() const { return env::JoinPath(dir_, "m/export/e"); }

  std::string dir_;
};

TEST_F(ExportTest, ExportedModelPredictsWhatTheEstimatorPredicts) {
  auto est = Make();
  TrainOptions to;
  to.max_steps = 120;
  ASSERT_TRUE(est->Train(testing::LinearInput(), to).ok());
  absl::StatusOr<ServingInputSpec> inputs =
      Estimator::ServingInputFromInputFn(testing::LinearInput());
  ASSERT_TRUE(inputs.ok()) << inputs.status();
  ASSERT_EQ(inputs->size(), 1u);
  EXPECT_EQ((*inputs)[0].name, "x");
  EXPECT_EQ((*inputs)[0].shape, PartialShape({2}));
  ExportOptions eo;
  eo.model_name = "linear";
  absl::StatusOr<std::string> dir = est->ExportSavedModel(env::JoinPath(dir_, "exp"), *inputs, eo);
  ASSERT_TRUE(dir.ok()) << dir.status();

  auto model = serving::LoadExportedModel(env::JoinPath(dir_, "exp"));
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->signature().model_name, "linear");
  EXPECT_EQ((*model)->signature().global_step, 120);
  EXPECT_EQ((*model)->signature().inputs.at("x").shape, PartialShape({-1, 2}));
  // The first batch of the PREDICT input, fed to the exported model; the estimator's
  // first batch of the same input must agree with it exactly.
  int64_t compared = 0;
  auto input = testing::LinearInput(64)(ModeKey::kPredict, InputContext{});
  ASSERT_TRUE(input.ok());
  auto it = input->dataset->MakeIterator();
  ASSERT_TRUE(it.ok());
  auto batch = (*it)->GetNext();
  ASSERT_TRUE(batch.ok() && batch->has_value());
  const Tensor x = (**batch)[0];
  auto served = (*model)->Predict({{"x", x}});
  ASSERT_TRUE(served.ok()) << served.status();
  bool first = true;
  absl::Status s =
      est->Predict(testing::LinearInput(64), [&](const std::map<std::string, Tensor>& p) {
        if (!first) return absl::OkStatus();
        first = false;
        const Tensor& want = p.at("y");
        const Tensor& got = served->at("y");
        EXPECT_EQ(got.shape(), want.shape());
        for (int64_t i = 0; i < want.NumElements(); ++i, ++compared) {
          EXPECT_EQ(got.data<float>()[i], want.data<float>()[i]) << i;
        }
        return absl::OkStatus();
      });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(compared, 64);
  // The model learned y = 2 x0 - x1 + 0.5.
  for (int64_t r = 0; r < 4; ++r) {
    const float* xr = x.data<float>() + 2 * r;
    EXPECT_NEAR(served->at("y").data<float>()[r], 2 * xr[0] - xr[1] + 0.5f, 0.05f);
  }
}

TEST_F(ExportTest, WithoutACheckpointExportIsRefused) {
  auto est = Make();
  ServingInputSpec inputs = {{"x", DType::kFloat, PartialShape({2})}};
  absl::StatusOr<std::string> dir = est->ExportSavedModel(env::JoinPath(dir_, "exp"), inputs);
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(dir.status().message(), HasSubstr("no checkpoint"));
}

int NumVersions(const std::string& base) {
  absl::StatusOr<std::vector<int64_t>> v = serving::ListVersions(base);
  return v.ok() ? static_cast<int>(v->size()) : 0;
}

TEST_F(ExportTest, FinalAndLatestExportersFollowTheirStrategy) {
  // Checkpoints every 50 steps to 200, evaluated each time (throttle 0): 4 evaluations.
  auto est = Make();
  EvalSpec es;
  es.input_fn = testing::LinearInput();
  es.steps = 2;
  es.throttle_secs = 0;
  es.exporters = {MakeExporter(ExporterOptions::Strategy::kFinal)};
  ExporterOptions lo;  // Exporters never share a directory: this one is "latest".
  lo.strategy = ExporterOptions::Strategy::kLatest;
  lo.name = "latest";
  lo.serving_input_fn = testing::LinearInput();
  lo.keep = 2;
  es.exporters.push_back(std::make_shared<Exporter>(lo));
  absl::StatusOr<TaskResult> r =
      TrainAndEvaluate(*est, TrainSpec{testing::LinearInput(), 200, {}}, es);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(NumVersions(ExportBase()), 1);  // Final: once.
  auto final_model = serving::LoadExportedModel(ExportBase());
  ASSERT_TRUE(final_model.ok()) << final_model.status();
  EXPECT_EQ((*final_model)->signature().global_step, 200);
  EXPECT_TRUE((*final_model)->signature().metrics.contains("mse"));
  const std::string latest_base = env::JoinPath(dir_, "m/export/latest");
  EXPECT_EQ(NumVersions(latest_base), 2);  // Four exports, keep = 2.
  auto newest = serving::LoadExportedModel(latest_base);
  ASSERT_TRUE(newest.ok()) << newest.status();
  EXPECT_EQ((*newest)->signature().global_step, 200);
}

TEST_F(ExportTest, BestExporterExportsOnlyImprovementsAndRemembersAcrossRestarts) {
  auto est = Make();
  auto best = MakeExporter(ExporterOptions::Strategy::kBest);
  auto result = [&](int64_t step, double loss) {
    EvalResult r;
    r.global_step = step;
    r.metrics["loss"] = static_cast<float>(loss);
    r.checkpoint_path = est->LatestCheckpoint();
    return r;
  };
  TrainOptions to;
  to.max_steps = 50;
  ASSERT_TRUE(est->Train(testing::LinearInput(), to).ok());
  auto e1 = best->MaybeExport(*est, result(50, 1.0), false);
  ASSERT_TRUE(e1.ok()) << e1.status();
  EXPECT_TRUE(e1->has_value());  // The first is the best so far.
  to.max_steps = 100;
  ASSERT_TRUE(est->Train(testing::LinearInput(), to).ok());
  auto e2 = best->MaybeExport(*est, result(100, 2.0), false);
  ASSERT_TRUE(e2.ok());
  EXPECT_FALSE(e2->has_value());  // Worse.
  auto e3 = best->MaybeExport(*est, result(100, 0.5), false);
  ASSERT_TRUE(e3.ok());
  EXPECT_TRUE(e3->has_value());  // Better.
  EXPECT_EQ(NumVersions(ExportBase()), 2);
  // A restarted task reads the best (0.5) back from the exports' signatures.
  auto restarted = MakeExporter(ExporterOptions::Strategy::kBest);
  auto e4 = restarted->MaybeExport(*est, result(100, 0.7), false);
  ASSERT_TRUE(e4.ok());
  EXPECT_FALSE(e4->has_value());
  // A step that is already the newest export is not exported again, whatever the
  // strategy (the chief and an evaluator both exporting the final model).
  auto latest = MakeExporter(ExporterOptions::Strategy::kLatest);
  auto e5 = latest->MaybeExport(*est, result(100, 0.1), true);
  ASSERT_TRUE(e5.ok());
  EXPECT_FALSE(e5->has_value());
  EXPECT_EQ(NumVersions(ExportBase()), 2);
  // A metric the evaluation does not have is a config error naming it.
  auto by_auc = MakeExporter(ExporterOptions::Strategy::kBest, 5, "auc");
  auto e6 = by_auc->MaybeExport(*est, result(100, 0.1), false);
  EXPECT_FALSE(e6.ok());
  EXPECT_THAT(e6.status().message(), HasSubstr("metric 'auc' is not an evaluation metric"));
}

}  // namespace
}  // namespace tandem

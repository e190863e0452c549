// The census configs (configs/census_{wide,deep,wide_deep}.toml), trained and evaluated
// through the Estimator as `trainer train_and_evaluate` runs them (model_dir moved to a
// temporary directory): 40 epochs of adult.data, then the whole of adult.test. Each must
// reach TensorFlow's published figure for its census example, a test accuracy over 0.83
// (tensorflow/models official/r1/wide_deep), and beat the AUC of always answering
// "<=50K" (0.5) by far. Prints steps, wall time, accuracy and AUC.
#include <chrono>
#include <cstdio>

#include "estimator/canned/canned_model.h"
#include "estimator/estimator.h"
#include "framework/core/env.h"
#include "gtest/gtest.h"
#include "tests/util/config_estimator.h"

namespace tandem {
namespace {

void TrainCensus(const std::string& name) {
  auto dir = env::MakeTempDir("estimator_census");
  ASSERT_TRUE(dir.ok());
  const std::string root = TANDEM_SOURCE_DIR;
  const std::string data = root + "/data/adult/";
  auto job = JobConfig::Load(root + "/configs/" + name + ".toml",
                             {"run.model_dir=\"" + *dir + "\"",
                              "data.train_path=\"" + data + "adult.data.gz\"",
                              "data.eval_path=\"" + data + "adult.test.gz\""});
  ASSERT_TRUE(job.ok()) << job.status();
  ModelRegistry registry;
  ASSERT_TRUE(canned::RegisterPremadeEstimators(registry).ok());
  auto c = testing::MakeConfiguredEstimator(*std::move(job), registry);
  ASSERT_TRUE(c.ok()) << c.status();
  Estimator* est = (*c)->estimator.get();
  InputFn input = (*c)->input();
  auto start = std::chrono::steady_clock::now();
  TrainOptions to;
  to.max_steps = (*c)->job.train.max_steps;
  auto step = est->Train(input, to);
  ASSERT_TRUE(step.ok()) << step.status();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto r = est->Evaluate(input, EvalOptions{});  // All of adult.test.
  ASSERT_TRUE(r.ok()) << r.status();
  std::printf("%s: steps=%lld train_seconds=%.1f test_accuracy=%.4f auc=%.4f\n", name.c_str(),
              static_cast<long long>(*step), seconds, r->metrics["accuracy"], r->metrics["auc"]);
  EXPECT_GE(r->metrics["accuracy"], 0.83f);
  EXPECT_GE(r->metrics["auc"], 0.85f);
  env::DeleteRecursively(*dir).IgnoreError();
}

TEST(EstimatorCensusTest, WideReachesTensorFlowsFigure) { TrainCensus("census_wide"); }
TEST(EstimatorCensusTest, DeepReachesTensorFlowsFigure) { TrainCensus("census_deep"); }
TEST(EstimatorCensusTest, WideDeepReachesTensorFlowsFigure) { TrainCensus("census_wide_deep"); }

}  // namespace
}  // namespace tandem

// The census configs (configs/census_{wide,deep,wide_deep}.toml), trained and evaluated
// through the Estimator as `trainer train_and_evaluate` runs them (model_dir moved to a
// temporary directory): 40 epochs of adult.data, then the whole of adult.test. Each must
// reach TensorFlow's published figure for its census example, a test accuracy over 0.83
// (tensorflow/models official/r1/wide_deep), and beat the AUC of always answering
// "<=50K" (0.5) by far. Prints steps, wall time, accuracy and AUC.
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
  auto r = testing::TrainThenEvaluate(**c);  // The eval input is all of adult.test.
  ASSERT_TRUE(r.ok()) << r.status();
  auto& m = r->eval.metrics;
  std::printf("%s: steps=%lld train_seconds=%.1f test_accuracy=%.4f auc=%.4f\n", name.c_str(),
              static_cast<long long>(r->global_step), r->train_seconds, m["accuracy"], m["auc"]);
  EXPECT_GE(m["accuracy"], 0.83f);
  EXPECT_GE(m["auc"], 0.85f);
  env::DeleteRecursively(*dir).IgnoreError();
}

TEST(EstimatorCensusTest, WideReachesTensorFlowsFigure) { TrainCensus("census_wide"); }
TEST(EstimatorCensusTest, DeepReachesTensorFlowsFigure) { TrainCensus("census_deep"); }
TEST(EstimatorCensusTest, WideDeepReachesTensorFlowsFigure) { TrainCensus("census_wide_deep"); }

}  // namespace
}  // namespace tandem

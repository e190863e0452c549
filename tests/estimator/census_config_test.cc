// The shipped census configs (configs/census_*.toml) as train_and_evaluate runs them,
// shortened to one epoch of adult.data (814 steps of 40) with one evaluation of the whole
// of adult.test at the end: each must parse, train, and beat the accuracy of always
// answering "<=50K" (0.7638, accuracy_baseline) by a clear margin. The 40-epoch runs
// to TensorFlow's published 0.83 are tests/slow/estimator_census_test.cc.
#include <cstdio>

#include "estimator/canned/canned_model.h"
#include "estimator/estimator.h"
#include "estimator/training.h"
#include "framework/core/env.h"
#include "gtest/gtest.h"
#include "tests/util/config_estimator.h"
#include "tests/util/temp_dir.h"

namespace tandem {
namespace {

class CensusConfigTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CensusConfigTest, OneEpochBeatsTheBaseline) {
  testing::TempDir dir;
  const std::string root = TANDEM_SOURCE_DIR;
  auto job = JobConfig::Load(root + "/configs/" + GetParam() + ".toml",
                             {"run.model_dir=\"" + dir.path() + "\"",
                              "data.train_path=\"" + root + "/data/adult/adult.data.gz\"",
                              "data.eval_path=\"" + root + "/data/adult/adult.test.gz\"",
                              "train.max_steps=814", "run.save_checkpoints_steps=814"});
  ASSERT_TRUE(job.ok()) << job.status();
  ModelRegistry registry;
  ASSERT_TRUE(canned::RegisterPremadeEstimators(registry).ok());
  auto c = testing::MakeConfiguredEstimator(*std::move(job), registry);
  ASSERT_TRUE(c.ok()) << c.status();
  InputFn input = (*c)->input();
  EvalSpec es;
  es.input_fn = input;
  es.steps.reset();  // The whole test file.
  es.start_delay_secs = 0;
  es.throttle_secs = 0;
  auto r = TrainAndEvaluate(*(*c)->estimator, TrainSpec{input, (*c)->job.train.max_steps, {}}, es);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->evaluation.has_value());
  const auto& m = r->evaluation->metrics;
  std::printf("%s, one epoch: accuracy=%.4f auc=%.4f\n", GetParam(), m.at("accuracy"), m.at("auc"));
  EXPECT_NEAR(m.at("accuracy_baseline"), 0.7638, 1e-4);  // 12,435 of 16,281 are "<=50K".
  EXPECT_GE(m.at("accuracy"), 0.80f);
}

INSTANTIATE_TEST_SUITE_P(Shipped, CensusConfigTest,
                         ::testing::Values("census_wide", "census_deep", "census_wide_deep"));

}  // namespace
}  // namespace tandem

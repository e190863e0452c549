// tests/integration/collective_accuracy_test.cc (ctest -L slow)
//
// fashion_mlp to 10000 steps with collective all-reduce, as the done-when asks:
// a chief and two workers, and a chief-less pair of workers (worker 0 leads), each with
// an evaluator; every task exits 0, training ends at max_steps exactly, and the
// evaluator's accuracy at max_steps is at least 0.88, what one process reaches in 10000
// steps of the same batch (README, slow tier).
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/cluster_job.h"

namespace tandem {
namespace {

using testing::Addresses;
using testing::ExpectAllExitZero;
using testing::ExpectFinalCheckpoint;
using testing::Find;
using testing::StartTasks;
using testing::TaskRun;
using testing::TempDir;
using json = nlohmann::json;

constexpr int64_t kSteps = 10000;

void TrainAndScore(const json& cluster, std::vector<std::pair<std::string, int>> tasks) {
  TempDir tmp;
  const std::string model_dir = tmp.path() + "/model";
  std::filesystem::create_directories(model_dir);
  tasks.push_back({"evaluator", 0});
  std::vector<TaskRun> runs = StartTasks(cluster, {{"environment", "cloud"}}, tasks, model_dir, "",
                                         {absl::StrCat("train.max_steps=", kSteps),
                                          "run.save_checkpoints_steps=2500", "eval.steps=10"});
  ExpectAllExitZero(runs);
  ExpectFinalCheckpoint(model_dir, /*num_ps=*/1, kSteps);
  const auto [accuracy, step] =
      testing::FinalEvaluation(Find(runs, "evaluator_0").process->Stdout());
  EXPECT_EQ(step, kSteps);
  EXPECT_GE(accuracy, 0.88);
  std::printf("accuracy at %lld synchronous steps: %.4f\n", static_cast<long long>(step), accuracy);
}

TEST(CollectiveAccuracyTest, ChiefAndTwoWorkers) {
  TrainAndScore({{"chief", Addresses(1)}, {"worker", Addresses(2)}},
                {{"chief", 0}, {"worker", 0}, {"worker", 1}});
}

TEST(CollectiveAccuracyTest, TwoWorkersWithoutAChief) {
  TrainAndScore({{"worker", Addresses(2)}}, {{"worker", 0}, {"worker", 1}});
}

}  // namespace
}  // namespace tandem

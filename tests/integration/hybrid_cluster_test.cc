// tests/integration/hybrid_cluster_test.cc
//
// The hybrid strategy (tables on the ps tasks, everything else mirrored and
// all-reduced) with the stock trainer as real processes on 127.0.0.1, each with its own
// TF_CONFIG, training census wide & deep from its config file:
//   - one replica and a ps follow one process step for step (the tables' FTRL and the
//     dense Adagrad updates run where the variables live, with the same results);
//   - two replicas with synchronous tables and batch B follow one process with batch 2B
//     on the same rows, loss for loss;
//   - two replicas and a ps train to max_steps exactly, compare checksums of their
//     mirrored variables every 10 steps, every task exits 0, and the checkpoint (the
//     tables written by the ps, the rest by the chief) verifies and restores in one
//     process;
//   - a worker killed mid-run and restarted takes the chief's live mirrored variables
//     and the ps's live tables, and training finishes;
//   - a ps killed and restarted gets the tables of the newest checkpoint while the
//     replicas go on from the surviving worker's live mirrored variables;
//   - SIGTERM to a worker stops every replica after the same step, the chief saving
//     the tables and the mirrored variables at that step.
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/census_job.h"
#include "tests/integration/cluster_job.h"
#include "tests/integration/logged_losses.h"
#include "tests/integration/subprocess.h"

namespace tandem {
namespace {

using testing::Addresses;
using testing::CensusArgs;
using ::testing::HasSubstr;
using testing::Hybrid;
using testing::HybridJob;
using testing::LoggedLosses;
using testing::StartCensusTask;
using testing::StartHybridJob;
using testing::Subprocess;
using testing::TempDir;
using json = nlohmann::json;

constexpr auto kDeadline = std::chrono::seconds(240);

std::map<int64_t, double> LossByStep(const std::string& log) {
  std::map<int64_t, double> m;
  for (const auto& [step, loss] : LoggedLosses(log)) m[step] = loss;
  return m;
}

TEST(HybridClusterTest, OneReplicaFollowsOneProcess) {
  TempDir tmp;
  constexpr int kSteps = 40;
  const std::vector<std::string> same = {absl::StrCat("train.max_steps=", kSteps),
                                         "run.save_checkpoints_steps=1000"};
  std::filesystem::create_directories(tmp.path() + "/local");
  Subprocess local(CensusArgs("train", tmp.path() + "/local/model", same),
                   tmp.path() + "/local/trainer");
  json cluster = {{"chief", Addresses(1)}, {"ps", Addresses(1)}};
  std::filesystem::create_directories(tmp.path() + "/hybrid");
  const std::string model_dir = tmp.path() + "/hybrid/model";
  auto ps = StartCensusTask(cluster, "ps", 0, model_dir, Hybrid(same));
  auto chief = StartCensusTask(cluster, "chief", 0, model_dir, Hybrid(same));
  ASSERT_EQ(local.Wait(kDeadline), 0) << local.Stderr();
  ASSERT_EQ(chief->Wait(kDeadline), 0) << chief->Stderr();
  ASSERT_EQ(ps->Wait(kDeadline), 0) << ps->Stderr();

  const auto want = LossByStep(local.Stderr());
  const auto got = LossByStep(chief->Stderr());
  ASSERT_EQ(want.size(), static_cast<size_t>(kSteps)) << local.Stderr();
  ASSERT_EQ(got.size(), want.size()) << chief->Stderr();
  for (const auto& [step, loss] : want) {
    EXPECT_NEAR(got.at(step), loss, 1e-5 * std::abs(loss)) << "global step " << step;
  }
  EXPECT_LT(want.rbegin()->second, want.begin()->second);
  // Every table went to the ps, and the log says so per table.
  EXPECT_THAT(chief->Stderr(), HasSubstr("Training as hybrid replica 0 of 1"));
  EXPECT_THAT(chief->Stderr(),
              HasSubstr("Table linear/linear_model/education_x_occupation/weights/part_0 "
                        "[1000,1] on /job:ps/task:0"));
  EXPECT_THAT(chief->Stderr(),
              HasSubstr("Table dnn/input_from_feature_columns/input_layer/occupation_embedding/"
                        "embedding_weights/part_0 [1000,8] on /job:ps/task:0"));
  // 8 linear tables with FTRL's 2 slots each, 1 embedding with Adagrad's 1.
  EXPECT_THAT(chief->Stderr(), HasSubstr("9 table variable(s) and 17 slot(s) of theirs"));
}

TEST(HybridClusterTest, TwoSyncReplicasFollowOneProcessWithTheDoubleBatch) {
  TempDir tmp;
  constexpr int kSteps = 50, kBatch = 20;
  // No shuffling and no prefetch: replica r's batch k is rows 2(kB + i) + r of the data,
  // so the two replicas' batches make the single process's batch k of 2B rows; the
  // loss is the batch mean, so the mean of the replicas' gradients is the process's.
  // Without the raw capital_gain and capital_loss columns (values up to 99,999, which
  // turn float32 rounding in the order of the sums into visible loss differences).
  const std::vector<std::string> same = {
      absl::StrCat("train.max_steps=", kSteps), "run.save_checkpoints_steps=1000",
      "model.params.loss_reduction=\"sum_over_batch_size\"",
      "model.params.dnn_feature_columns=[\"age\", \"education_num\", \"hours_per_week\", "
      "\"workclass_indicator\", \"education_indicator\", \"marital_status_indicator\", "
      "\"relationship_indicator\", \"occupation_embedding\"]"};
  std::vector<std::string> local_sets = same;
  local_sets.push_back(absl::StrCat("train.batch_size=", 2 * kBatch));
  std::filesystem::create_directories(tmp.path() + "/local");
  Subprocess local(CensusArgs("train", tmp.path() + "/local/model", local_sets),
                   tmp.path() + "/local/trainer");
  std::vector<std::string> replica_sets = same;
  replica_sets.push_back(absl::StrCat("train.batch_size=", kBatch));
  replica_sets.push_back("distribute.sync=true");
  replica_sets.push_back("distribute.check_replicas_steps=10");
  HybridJob job = StartHybridJob(tmp.path(), Hybrid(replica_sets));
  auto& ps = job.ps;
  auto& chief = job.chief;
  auto& worker = job.worker;
  ASSERT_EQ(local.Wait(kDeadline), 0) << local.Stderr();
  ASSERT_EQ(chief->Wait(kDeadline), 0) << chief->Stderr();
  ASSERT_EQ(worker->Wait(kDeadline), 0) << worker->Stderr();
  ASSERT_EQ(ps->Wait(kDeadline), 0) << ps->Stderr();

  const auto want = LossByStep(local.Stderr());
  const auto a = LossByStep(chief->Stderr());
  const auto b = LossByStep(worker->Stderr());
  ASSERT_EQ(want.size(), static_cast<size_t>(kSteps)) << local.Stderr();
  ASSERT_EQ(a.size(), want.size()) << chief->Stderr();
  ASSERT_EQ(b.size(), want.size()) << worker->Stderr();
  double worst = 0;
  for (const auto& [step, loss] : want) {
    const double mean = (a.at(step) + b.at(step)) / 2;
    EXPECT_NEAR(mean, loss, 1e-5 * std::abs(loss)) << "global step " << step;
    worst = std::max(worst, std::abs(mean - loss) / std::abs(loss));
  }
  std::printf("largest relative loss difference over %d steps: %.2e\n", kSteps, worst);
  EXPECT_LT(want.rbegin()->second, want.begin()->second);
  EXPECT_EQ(testing::TrainingFinished(chief->Stderr()).global_step, kSteps);
  EXPECT_EQ(testing::TrainingFinished(worker->Stderr()).global_step, kSteps);
}

TEST(HybridClusterTest, TwoReplicasTrainToMaxStepsAndTheCheckpointRestoresInOneProcess) {
  TempDir tmp;
  constexpr int kSteps = 200;
  const std::vector<std::string> sets =
      Hybrid({absl::StrCat("train.max_steps=", kSteps), "run.save_checkpoints_steps=100",
              "distribute.check_replicas_steps=10"});
  HybridJob job = StartHybridJob(tmp.path(), sets);
  const std::string& model_dir = job.model_dir;
  auto& ps = job.ps;
  auto& chief = job.chief;
  auto& worker = job.worker;
  ASSERT_EQ(chief->Wait(kDeadline), 0) << chief->Stderr();
  ASSERT_EQ(worker->Wait(kDeadline), 0) << worker->Stderr();
  ASSERT_EQ(ps->Wait(kDeadline), 0) << ps->Stderr();
  EXPECT_EQ(testing::TrainingFinished(chief->Stderr()).global_step, kSteps);
  EXPECT_EQ(testing::TrainingFinished(worker->Stderr()).global_step, kSteps);
  EXPECT_THAT(worker->Stderr(), HasSubstr("variables from chief:0 at global step 0"));
  // The worker initialised its own mirrored copies, not the tables.
  EXPECT_THAT(worker->Stderr(), HasSubstr("mirrored variables"));
  // Two shards: the tables from the ps, the mirrored variables from the chief.
  testing::ExpectFinalCheckpoint(model_dir, /*num_ps=*/2, kSteps);

  // One process evaluates the checkpoint: tables and mirrored variables restored.
  Subprocess eval(CensusArgs("evaluate", model_dir, {"eval.steps=20"}), tmp.path() + "/eval");
  ASSERT_EQ(eval.Wait(kDeadline), 0) << eval.Stderr();
  EXPECT_THAT(eval.Stdout() + eval.Stderr(), HasSubstr(absl::StrCat("global_step = ", kSteps)));
}

TEST(HybridClusterTest, AKilledWorkerTakesTheLiveVariablesWhenItReturns) {
  TempDir tmp;
  constexpr int kSteps = 600;
  const std::vector<std::string> sets =
      Hybrid({absl::StrCat("train.max_steps=", kSteps), "run.save_checkpoints_steps=1000",
              "distribute.check_replicas_steps=50"});
  HybridJob job = StartHybridJob(tmp.path(), sets);
  const std::string& model_dir = job.model_dir;
  const json& cluster = job.cluster;
  auto& ps = job.ps;
  auto& chief = job.chief;
  auto& worker = job.worker;
  // Kill the worker once training is under way.
  ASSERT_TRUE(testing::WaitForStep(*worker, 100)) << worker->Stderr();
  worker->Kill(SIGKILL);
  worker->Wait(std::chrono::seconds(10));
  auto again = StartCensusTask(cluster, "worker", 0, model_dir, sets, "_again");
  ASSERT_EQ(chief->Wait(kDeadline), 0) << chief->Stderr();
  ASSERT_EQ(again->Wait(kDeadline), 0) << again->Stderr();
  ASSERT_EQ(ps->Wait(kDeadline), 0) << ps->Stderr();
  EXPECT_EQ(testing::TrainingFinished(chief->Stderr()).global_step, kSteps);
  EXPECT_EQ(testing::TrainingFinished(again->Stderr()).global_step, kSteps);
  // The restarted worker joined at the chief's live step, not at 0 or a checkpoint.
  EXPECT_THAT(again->Stderr(), ::testing::ContainsRegex("variables from chief:0 at global step "
                                                        "[1-9][0-9]+ \\(this replica was at 0\\)"));
  // The chief kept its session's variables: it restored nothing.
  EXPECT_THAT(chief->Stderr(), ::testing::Not(HasSubstr("Restoring parameters from")));
}

// A dead ps: the chief restores the tables from the newest checkpoint onto the new ps,
// and the dense replicas go on from the surviving worker's live variables (newer than
// the checkpoint), not from the checkpoint's.
TEST(HybridClusterTest, AKilledPsIsRestoredWhileTheReplicasKeepTheirLiveVariables) {
  TempDir tmp;
  constexpr int kSteps = 600;
  const std::vector<std::string> sets =
      Hybrid({absl::StrCat("train.max_steps=", kSteps), "run.save_checkpoints_steps=100"});
  HybridJob job = StartHybridJob(tmp.path(), sets);
  const std::string& model_dir = job.model_dir;
  const json& cluster = job.cluster;
  auto& ps = job.ps;
  auto& chief = job.chief;
  auto& worker = job.worker;
  ASSERT_TRUE(testing::WaitForStep(*worker, 150)) << worker->Stderr();
  ps->Kill(SIGKILL);
  ps->Wait(std::chrono::seconds(10));
  auto again = StartCensusTask(cluster, "ps", 0, model_dir, sets, "_again");
  ASSERT_EQ(chief->Wait(kDeadline), 0) << chief->Stderr();
  ASSERT_EQ(worker->Wait(kDeadline), 0) << worker->Stderr();
  ASSERT_EQ(again->Wait(kDeadline), 0) << again->Stderr();
  EXPECT_EQ(testing::TrainingFinished(chief->Stderr()).global_step, kSteps);
  EXPECT_EQ(testing::TrainingFinished(worker->Stderr()).global_step, kSteps);
  const std::string chief_log = chief->Stderr();
  EXPECT_THAT(chief_log, HasSubstr("Restoring parameters from"));
  // The chief went back to a checkpoint's step; the group took the worker's live one.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(chief_log, m,
                                std::regex(R"(variables from worker:0 at global step (\d+) \(this )"
                                           R"(replica was at (\d+)\))")))
      << chief_log;
  EXPECT_GT(std::stoll(m[1]), std::stoll(m[2]));
  EXPECT_EQ(std::stoll(m[2]) % 100, 0);  // A checkpoint's step.
  testing::ExpectFinalCheckpoint(model_dir, /*num_ps=*/2, kSteps);
}

TEST(HybridClusterTest, SigtermToAWorkerStopsEveryReplicaAfterTheSameStep) {
  TempDir tmp;
  const std::vector<std::string> sets =
      Hybrid({"train.max_steps=100000", "run.save_checkpoints_steps=100000"});
  HybridJob job = StartHybridJob(tmp.path(), sets);
  const std::string& model_dir = job.model_dir;
  auto& ps = job.ps;
  auto& chief = job.chief;
  auto& worker = job.worker;
  ASSERT_TRUE(testing::WaitForStep(*chief, 200)) << chief->Stderr();
  worker->Kill(SIGTERM);
  const int64_t stopped = testing::ExpectAgreedStop(*chief, *worker);
  ASSERT_GT(stopped, 0);
  // The chief's checkpoint at that step holds the tables too.
  testing::ExpectFinalCheckpoint(model_dir, /*num_ps=*/2, stopped);
  // The ps keeps serving for the restarted job (training did not reach max_steps).
  EXPECT_TRUE(ps->running());
}

}  // namespace
}  // namespace tandem

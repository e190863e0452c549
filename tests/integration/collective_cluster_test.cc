// tests/integration/collective_cluster_test.cc
//
// The collective strategy (MultiWorkerMirroredStrategy) with the stock trainer as real
// processes on 127.0.0.1, each with its own TF_CONFIG and no ps task:
//   - two replicas with SGD and batch B follow one process with batch 2B on the same
//     examples, loss for loss, and stay bitwise equal (check_replicas_steps);
//   - a chief and two workers, and a chief-less pair of workers, train to max_steps
//     exactly and every task exits 0;
//   - a worker or the chief killed mid-run is named by the others within the timeout;
//     restarted, it takes the survivors' live variables and training finishes;
//   - SIGTERM to a worker stops every replica after the same step, the chief saving it.
#include <signal.h>

#include <chrono>
#include <cmath>
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
#include "tests/integration/cluster_job.h"
#include "tests/integration/logged_losses.h"
#include "tests/integration/subprocess.h"

namespace tandem {
namespace {

using testing::Addresses;
using testing::ExpectAllExitZero;
using testing::ExpectFinalCheckpoint;
using testing::Find;
using ::testing::HasSubstr;
using testing::JobArgs;
using testing::LoggedLosses;
using testing::StartTasks;
using testing::Subprocess;
using testing::TaskRun;
using testing::TempDir;
using json = nlohmann::json;

constexpr auto kDeadline = std::chrono::seconds(240);

// Every replica runs `trainer <command>` with these settings on top of JobArgs.
std::vector<std::string> Collective(std::vector<std::string> sets) {
  sets.push_back("distribute.strategy=\"collective\"");
  sets.push_back("distribute.collective_timeout_secs=20");
  return sets;
}

std::unique_ptr<Subprocess> StartTask(const json& cluster, const std::string& type, int index,
                                      const std::string& command, const std::string& model_dir,
                                      const std::vector<std::string>& sets,
                                      const std::string& log_suffix = "") {
  return testing::StartClusterTask(cluster, type, index, JobArgs(command, model_dir, sets),
                                   model_dir, log_suffix, {{"environment", "cloud"}});
}

// The global step a task's training ended at, or -1.
int64_t FinishedAt(const std::string& log) { return testing::TrainingFinished(log).global_step; }

TEST(CollectiveClusterTest, TwoReplicasFollowOneProcessWithTheDoubleBatch) {
  TempDir tmp;
  constexpr int kSteps = 50, kBatch = 32;
  // No shuffling and no prefetch: replica r's batch k is rows 2(kB + i) + r of the data,
  // so the two replicas' batches make the single process's batch k of 2B rows.
  const std::vector<std::string> same = {
      absl::StrCat("train.max_steps=", kSteps), "run.log_step_count_steps=1",
      "run.save_checkpoints_steps=1000",        "data.shuffle_buffer=1",
      "model.params.optimizer=\"sgd\"",         "model.params.learning_rate=0.1"};
  std::vector<std::string> local_sets = same;
  local_sets.push_back(absl::StrCat("train.batch_size=", 2 * kBatch));
  std::filesystem::create_directories(tmp.path() + "/local");
  Subprocess local(JobArgs("train", tmp.path() + "/local/model", local_sets),
                   tmp.path() + "/local/trainer");
  std::vector<std::string> replica_sets = same;
  replica_sets.push_back(absl::StrCat("train.batch_size=", kBatch));
  replica_sets.push_back("distribute.check_replicas_steps=10");
  json cluster = {{"chief", Addresses(1)}, {"worker", Addresses(1)}};
  std::filesystem::create_directories(tmp.path() + "/replicas");
  const std::string model_dir = tmp.path() + "/replicas/model";
  auto chief = StartTask(cluster, "chief", 0, "train", model_dir, Collective(replica_sets));
  auto worker = StartTask(cluster, "worker", 0, "train", model_dir, Collective(replica_sets));
  ASSERT_EQ(local.Wait(kDeadline), 0) << local.Stderr();
  ASSERT_EQ(chief->Wait(kDeadline), 0) << chief->Stderr();
  ASSERT_EQ(worker->Wait(kDeadline), 0) << worker->Stderr();

  auto by_step = [](const std::string& log) {
    std::map<int64_t, double> m;
    for (const auto& [step, loss] : LoggedLosses(log)) m[step] = loss;
    return m;
  };
  const auto want = by_step(local.Stderr());
  const auto a = by_step(chief->Stderr());
  const auto b = by_step(worker->Stderr());
  ASSERT_EQ(want.size(), static_cast<size_t>(kSteps)) << local.Stderr();
  ASSERT_EQ(a.size(), want.size());
  ASSERT_EQ(b.size(), want.size());
  for (const auto& [step, loss] : want) {
    // The single process's loss is the mean over its 2B rows: the replicas' mean.
    const double mean = (a.at(step) + b.at(step)) / 2;
    EXPECT_NEAR(mean, loss, 1e-5 * std::abs(loss)) << "global step " << step;
  }
  // Training moved: the loss fell from ln(10).
  EXPECT_LT(want.rbegin()->second, want.begin()->second - 0.3);
  // The replicas compared checksums of every variable every 10 steps (a difference
  // would have failed them) and stopped at max_steps exactly.
  EXPECT_EQ(FinishedAt(chief->Stderr()), kSteps);
  EXPECT_EQ(FinishedAt(worker->Stderr()), kSteps);
  EXPECT_THAT(chief->Stderr(), HasSubstr("Collective group formed: replica 0 of 2"));
  EXPECT_THAT(worker->Stderr(), HasSubstr("variables from chief:0 at global step 0"));
}

TEST(CollectiveClusterTest, ChiefAndTwoWorkersTrainToMaxStepsAndTheEvaluatorScores) {
  TempDir tmp;
  const std::string model_dir = tmp.path() + "/model";
  std::filesystem::create_directories(model_dir);
  constexpr int64_t kSteps = 1500;
  const std::vector<std::string> sets =
      Collective({absl::StrCat("train.max_steps=", kSteps), "run.save_checkpoints_steps=500"});
  json cluster = {{"chief", Addresses(1)}, {"worker", Addresses(2)}};
  std::vector<TaskRun> runs = StartTasks(
      cluster, {{"environment", "cloud"}},
      {{"chief", 0}, {"worker", 0}, {"worker", 1}, {"evaluator", 0}}, model_dir, "", sets);
  ExpectAllExitZero(runs);
  for (const char* name : {"chief_0", "worker_0", "worker_1"}) {
    EXPECT_EQ(FinishedAt(Find(runs, name).process->Stderr()), kSteps) << name;
    // Synchronous: every replica ran every step.
    EXPECT_EQ(testing::TrainingFinished(Find(runs, name).process->Stderr()).local_steps, kSteps)
        << name;
  }
  ExpectFinalCheckpoint(model_dir, /*num_ps=*/1, kSteps);
  const auto [accuracy, step] =
      testing::FinalEvaluation(Find(runs, "evaluator_0").process->Stdout());
  EXPECT_EQ(step, kSteps);
  // 1500 synchronous steps of 3 x 128 examples; one process reaches 0.85 in about 3000
  // steps of 128 (cluster_job.h).
  EXPECT_GT(accuracy, 0.84);
  std::printf("accuracy at %lld steps of 3 replicas: %.4f\n", static_cast<long long>(step),
              accuracy);
}

TEST(CollectiveClusterTest, WithoutAChiefWorkerZeroLeads) {
  TempDir tmp;
  const std::string model_dir = tmp.path() + "/model";
  std::filesystem::create_directories(model_dir);
  // Kubeflow's default TFJob: workers only; strategy "auto" picks the collective one.
  const std::vector<std::string> sets = {"train.max_steps=300", "run.save_checkpoints_steps=100"};
  json cluster = {{"worker", Addresses(2)}};
  std::vector<TaskRun> runs = StartTasks(cluster, {{"environment", "cloud"}},
                                         {{"worker", 0}, {"worker", 1}}, model_dir, "", sets);
  ExpectAllExitZero(runs);
  const std::string leader = Find(runs, "worker_0").process->Stderr();
  EXPECT_THAT(leader, HasSubstr("worker 0 (this task) acts as the chief"));
  EXPECT_THAT(leader, HasSubstr("collective all-reduce replica 0 of 2"));
  EXPECT_THAT(leader, HasSubstr("Saving checkpoints for 300"));
  EXPECT_THAT(Find(runs, "worker_1").process->Stderr(),
              ::testing::Not(HasSubstr("Saving checkpoints")));
  ExpectFinalCheckpoint(model_dir, /*num_ps=*/1, 300);
}

// Kills `victim` (SIGKILL) once the chief passed step 500; the survivors must name it
// within the 20 s timeout, and the restarted task must take their live variables (no
// checkpoint exists past step 0) and finish with them.
void KillAndRestart(const std::string& type, int index) {
  TempDir tmp;
  const std::string model_dir = tmp.path() + "/model";
  std::filesystem::create_directories(model_dir);
  constexpr int64_t kSteps = 2000;
  const std::vector<std::string> sets =
      Collective({absl::StrCat("train.max_steps=", kSteps), "run.save_checkpoints_steps=5000"});
  json cluster = {{"chief", Addresses(1)}, {"worker", Addresses(2)}};
  std::map<std::string, std::unique_ptr<Subprocess>> tasks;
  tasks["chief:0"] = StartTask(cluster, "chief", 0, "train", model_dir, sets);
  tasks["worker:0"] = StartTask(cluster, "worker", 0, "train", model_dir, sets);
  tasks["worker:1"] = StartTask(cluster, "worker", 1, "train", model_dir, sets);
  const std::string victim = absl::StrCat(type, ":", index);
  const std::string watcher = type == "chief" ? "worker:0" : "chief:0";
  ASSERT_TRUE(testing::WaitForStep(*tasks[watcher], 500)) << tasks[watcher]->Stderr();
  const auto killed_at = std::chrono::steady_clock::now();
  tasks[victim]->Kill(SIGKILL);
  // Every survivor fails its step naming the victim, within the timeout.
  for (auto& [name, task] : tasks) {
    if (name == victim) continue;
    while (task->Stderr().find("Collective group aborted") == std::string::npos ||
           task->Stderr().find(victim) == std::string::npos) {
      ASSERT_LT(std::chrono::steady_clock::now() - killed_at, std::chrono::seconds(20))
          << name << ":\n"
          << task->Stderr();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  const int64_t before = testing::LastLoggedStep(tasks[watcher]->Stderr());
  std::this_thread::sleep_for(std::chrono::seconds(1));
  tasks[victim] = StartTask(cluster, type, index, "train", model_dir, sets, ".restarted");
  for (auto& [name, task] : tasks) {
    ASSERT_EQ(task->Wait(kDeadline), 0) << name << ":\n" << task->Stderr();
    EXPECT_EQ(FinishedAt(task->Stderr()), kSteps) << name;
  }
  // The restarted task restored the step-0 checkpoint, then took a survivor's live
  // variables at the step it had reached. (Survivors may be a step apart: one whose
  // all-reduce completed before the victim died applied that step, one that still had
  // to send to the victim did not; the newest wins.)
  std::smatch m;
  const std::string log = tasks[victim]->Stderr();
  ASSERT_TRUE(std::regex_search(
      log, m,
      std::regex(R"(variables from (\w+:\d+) at global step (\d+) \(this replica was at 0\))")))
      << log;
  EXPECT_NE(m[1].str(), victim);
  EXPECT_GE(std::stoll(m[2]), before);
  // Nothing went back to the start.
  for (const auto& [step, loss] : LoggedLosses(log)) {
    EXPECT_GE(step, before);
    EXPECT_LT(loss, std::log(10.0) / 2) << "step " << step;
  }
  if (type == "chief") ExpectFinalCheckpoint(model_dir, /*num_ps=*/1, kSteps);
}

TEST(CollectiveClusterTest, AKilledWorkerIsNamedAndTakesTheLiveVariablesWhenItReturns) {
  KillAndRestart("worker", 1);
}

TEST(CollectiveClusterTest, AKilledChiefIsNamedAndTakesTheLiveVariablesWhenItReturns) {
  KillAndRestart("chief", 0);
}

TEST(CollectiveClusterTest, SigtermToAWorkerStopsEveryReplicaAfterTheSameStep) {
  TempDir tmp;
  const std::string model_dir = tmp.path() + "/model";
  std::filesystem::create_directories(model_dir);
  const std::vector<std::string> sets =
      Collective({"train.max_steps=100000", "run.save_checkpoints_steps=100000"});
  json cluster = {{"chief", Addresses(1)}, {"worker", Addresses(1)}};
  auto chief = StartTask(cluster, "chief", 0, "train", model_dir, sets);
  auto worker = StartTask(cluster, "worker", 0, "train", model_dir, sets);
  ASSERT_TRUE(testing::WaitForStep(*chief, 300)) << chief->Stderr();
  worker->Kill(SIGTERM);
  const int64_t stopped = testing::ExpectAgreedStop(*chief, *worker);
  ASSERT_GT(stopped, 0);
  ExpectFinalCheckpoint(model_dir, /*num_ps=*/1, stopped);
}

}  // namespace
}  // namespace tandem

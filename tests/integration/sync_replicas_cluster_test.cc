// tests/integration/sync_replicas_cluster_test.cc
//
// Synchronous replicas on a cluster of trainer processes on 127.0.0.1: chief + 2
// workers + 2 ps train fashion_mlp with [distribute] sync = true.
//   - replicas_to_aggregate = 2 (one backup replica): global_step counts aggregated
//     updates, the backup's late gradients are dropped as stale and counted; a worker
//     killed mid-run and never restarted does not stop training, which reaches
//     max_steps and 0.85 accuracy.
//   - replicas_to_aggregate = 3 (no backup): a killed worker stops the aggregation;
//     the chief names it while it waits, and training resumes and finishes when it is
//     restarted.
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/cluster_job.h"
#include "tests/integration/subprocess.h"

namespace tandem {
namespace {

using testing::Addresses;
using testing::ExpectAllExitZero;
using testing::ExpectFinalCheckpoint;
using testing::FinalEvaluation;
using testing::Find;
using ::testing::HasSubstr;
using testing::StartTasks;
using testing::TaskRun;
using testing::TempDir;
using json = nlohmann::json;

class SyncReplicasClusterTest : public ::testing::Test {};

constexpr int64_t kSyncSteps = 1500;  // Aggregated updates; 0.883 and 0.884 in two runs.

std::vector<std::string> SyncSets(int replicas_to_aggregate) {
  return {absl::StrCat("train.max_steps=", kSyncSteps), "distribute.sync=true",
          absl::StrCat("distribute.replicas_to_aggregate=", replicas_to_aggregate)};
}

// The newest "step = N" the chief's LoggingTensorHook logged, or -1.
int64_t LoggedStep(const std::string& log) {
  static const std::regex re(R"(, step = (\d+))");
  int64_t step = -1;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator();
       ++it) {
    step = std::stoll((*it)[1]);
  }
  return step;
}

// Waits (bounded) until `done(chief's stderr)`.
bool WaitForChief(const std::vector<TaskRun>& runs,
                  const std::function<bool(const std::string&)>& done, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done(Find(runs, "chief_0").process->Stderr())) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

struct Job {
  TempDir tmp;
  std::string model_dir = tmp.path() + "/model";
  json cluster = {{"chief", Addresses(1)}, {"worker", Addresses(2)}, {"ps", Addresses(2)}};
  std::vector<TaskRun> runs;

  void Start(int replicas_to_aggregate) {
    runs = StartTasks(
        cluster, json::object(),
        {{"ps", 0}, {"ps", 1}, {"chief", 0}, {"worker", 0}, {"worker", 1}, {"evaluator", 0}},
        model_dir, "", SyncSets(replicas_to_aggregate));
  }
  // Starts the job; true once the chief logged step 300 (within 180 s).
  bool StartAndTrain(int replicas_to_aggregate) {
    Start(replicas_to_aggregate);
    return WaitForChief(
        runs, [](const std::string& log) { return LoggedStep(log) >= 300; },
        std::chrono::seconds(180));
  }
  // Every task exits 0, the final checkpoint is at max_steps with the usual accuracy,
  // and the chief saw the missing replica come back.
  void ExpectResumedAndFinished() {
    ExpectAllExitZero(runs);
    ExpectFinalCheckpoint(model_dir, 2, kSyncSteps);
    EXPECT_THAT(Find(runs, "chief_0").process->Stderr(),
                HasSubstr("the missing replicas are back after"));
    auto [accuracy, step] = FinalEvaluation(Find(runs, "evaluator_0").process->Stdout());
    EXPECT_GE(step, kSyncSteps);
    EXPECT_GE(accuracy, 0.85);
  }
  void Kill(const std::string& name, int sig = SIGKILL) {
    for (TaskRun& r : runs) {
      if (r.name == name) r.process->Kill(sig);
    }
  }
};

// "Synchronous replicas: U aggregated updates by this chief; S stale gradients dropped".
std::pair<int64_t, int64_t> UpdatesAndStale(const std::string& log) {
  std::smatch m;
  static const std::regex re(
      R"(Synchronous replicas: (\d+) aggregated updates by this chief; (\d+) stale)");
  if (!std::regex_search(log, m, re)) return {-1, -1};
  return {std::stoll(m[1]), std::stoll(m[2])};
}

TEST_F(SyncReplicasClusterTest, BackupReplicaCoversAWorkerKilledForGood) {
  Job job;
  ASSERT_TRUE(job.StartAndTrain(/*replicas_to_aggregate=*/2));
  job.Kill("worker_1");
  std::vector<TaskRun> rest;
  for (TaskRun& r : job.runs) {
    if (r.name != "worker_1") rest.push_back(std::move(r));
  }
  ExpectAllExitZero(rest);
  ExpectFinalCheckpoint(job.model_dir, 2, kSyncSteps);
  auto [accuracy, step] = FinalEvaluation(Find(rest, "evaluator_0").process->Stdout());
  EXPECT_GE(step, kSyncSteps);
  EXPECT_GE(accuracy, 0.85);
  // One global step per aggregated update, all made by this chief (it never restarted).
  auto [updates, stale] = UpdatesAndStale(Find(rest, "chief_0").process->Stderr());
  EXPECT_EQ(updates, step);
  // Three replicas, two aggregated: the third's gradients come late and are dropped.
  EXPECT_GT(stale, 0);
  std::printf("accuracy %.4f at step %lld; %lld stale gradients dropped\n", accuracy,
              static_cast<long long>(step), static_cast<long long>(stale));
}

TEST_F(SyncReplicasClusterTest, WithoutBackupTheChiefNamesTheMissingWorkerAndResumes) {
  Job job;
  ASSERT_TRUE(job.StartAndTrain(/*replicas_to_aggregate=*/3));
  job.Kill("worker_1");
  ASSERT_TRUE(WaitForChief(
      job.runs,
      [](const std::string& log) {
        return log.find(
                   "Synchronous replicas: waiting for 3 replicas' gradients, 2 up; missing "
                   "worker:1") != std::string::npos;
      },
      std::chrono::seconds(60)))
      << Find(job.runs, "chief_0").process->Stderr();
  // Nothing is aggregated while it is missing.
  const int64_t stalled = LoggedStep(Find(job.runs, "chief_0").process->Stderr());
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_LE(LoggedStep(Find(job.runs, "chief_0").process->Stderr()), stalled + 1);

  std::vector<TaskRun> again = StartTasks(job.cluster, json::object(), {{"worker", 1}},
                                          job.model_dir, ".restarted", SyncSets(3));
  for (TaskRun& r : job.runs) {
    if (r.name == "worker_1") r = std::move(again[0]);
  }
  job.ExpectResumedAndFinished();
}

TEST_F(SyncReplicasClusterTest, AFrozenWorkerIsNamedMissingAndResumesWhenThawed) {
  // SIGSTOP: the worker keeps its connections and answers nothing. The chief names it
  // as it names a dead one (its probe times out), and aggregation resumes by itself
  // once it thaws.
  Job job;
  ASSERT_TRUE(job.StartAndTrain(/*replicas_to_aggregate=*/3));
  job.Kill("worker_1", SIGSTOP);
  const bool named = WaitForChief(
      job.runs,
      [](const std::string& log) {
        return log.find("2 up; missing worker:1") != std::string::npos;
      },
      std::chrono::seconds(60));
  job.Kill("worker_1", SIGCONT);
  ASSERT_TRUE(named) << Find(job.runs, "chief_0").process->Stderr();
  job.ExpectResumedAndFinished();
}

}  // namespace
}  // namespace tandem

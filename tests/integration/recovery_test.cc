// tests/integration/recovery_test.cc
//
// A cluster that survives losing any one task: chief + 2 workers + 1 ps + evaluator
// train fashion_mlp asynchronously to kMaxSteps while one task is killed mid-run
// (SIGKILL, or SIGTERM as Kubernetes sends before an eviction) and restarted with the
// same command, as a scheduler does. Every task must exit 0, training must reach
// max_steps and go on from where it was (no task logs a reset global step or an
// untrained model's loss after the disruption), the final accuracy must stay above
// what half the undisturbed job reaches, every listed checkpoint must verify, and
// the evaluator must never evaluate a checkpoint twice. And a ps frozen with SIGSTOP
// for 100 s (PsFrozenAndThawed): named by the chief and the worker within a minute and
// again while frozen, the job finishes once it thaws.
#include <signal.h>

#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/cluster_job.h"
#include "tests/integration/log_events.h"
#include "tests/integration/logged_losses.h"
#include "tests/integration/subprocess.h"

namespace tandem {
namespace {

using testing::Addresses;
using testing::EventAccuracy;
using testing::Events;
using testing::ExpectAllExitZero;
using testing::ExpectFinalCheckpoint;
using testing::FinalEvaluation;
using testing::Find;
using testing::kMaxSteps;
using testing::LogEvent;
using testing::LoggedLosses;
using testing::StartTasks;
using testing::Subprocess;
using testing::TaskRun;
using testing::TempDir;
using json = nlohmann::json;

// The chief's newest "Saving checkpoints for N" step in `log`, or -1.
int64_t SavedStep(const std::string& log) {
  static const std::regex re(R"(Saving checkpoints for (\d+) into)");
  int64_t step = -1;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator();
       ++it) {
    step = std::max<int64_t>(step, std::stoll((*it)[1]));
  }
  return step;
}

// Every "Saving dict for global step N" the evaluator logged, in order.
std::vector<int64_t> EvaluatedSteps(const std::string& log) {
  static const std::regex re(R"(Saving dict for global step (\d+))");
  std::vector<int64_t> steps;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator();
       ++it) {
    steps.push_back(std::stoll((*it)[1]));
  }
  return steps;
}

struct Disruption {
  std::string victim;  // "ps_0", "worker_1", "chief_0" or "evaluator_0".
  int signal = SIGKILL;
};

struct Outcome {
  double accuracy = -1;       // The evaluator's at max_steps.
  std::vector<TaskRun> runs;  // The tasks that ran to the end (restarted ones included).
  std::vector<TaskRun> killed;
  int killed_code = -1;
  // What each task of `runs` logged after the victim was stopped (all of a restarted
  // task's log).
  std::map<std::string, std::string> logged_after;
};

class RecoveryTest : public ::testing::Test {
 protected:
  // Runs the job; once the chief saved a checkpoint at or past kMaxSteps / 3, stops
  // the victim with its signal, waits two seconds and starts it again.
  Outcome Run(const Disruption& d) {
    const std::string model_dir =
        tmp_.path() + "/" + d.victim + "_" + std::to_string(d.signal) + "/model";
    std::filesystem::create_directories(model_dir);
    json cluster = {{"chief", Addresses(1)}, {"worker", Addresses(2)}, {"ps", Addresses(1)}};
    const std::vector<std::pair<std::string, int>> tasks = {
        {"ps", 0}, {"chief", 0}, {"worker", 0}, {"worker", 1}, {"evaluator", 0}};
    Outcome out;
    out.runs = StartTasks(cluster, json::object(), tasks, model_dir);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
    while (SavedStep(Find(out.runs, "chief_0").process->Stderr()) < kMaxSteps / 3) {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "the chief saved no checkpoint past " << kMaxSteps / 3;
        return out;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    auto it = std::find_if(out.runs.begin(), out.runs.end(),
                           [&](const TaskRun& r) { return r.name == d.victim; });
    EXPECT_NE(it, out.runs.end());
    if (it == out.runs.end()) return out;
    std::map<std::string, size_t> logged_before;
    for (const TaskRun& r : out.runs) logged_before[r.name] = r.process->Stderr().size();
    it->process->Kill(d.signal);
    out.killed_code = it->process->Wait(std::chrono::seconds(30));
    const std::string type = d.victim.substr(0, d.victim.find('_'));
    const int index = std::stoi(d.victim.substr(d.victim.find('_') + 1));
    out.killed.push_back(std::move(*it));
    out.runs.erase(it);
    std::this_thread::sleep_for(std::chrono::seconds(2));
    std::vector<TaskRun> again = StartTasks(cluster, json::object(), {{type, index}}, model_dir,
                                            /*log_suffix=*/".restarted");
    out.runs.push_back(std::move(again[0]));
    ExpectAllExitZero(out.runs);
    for (const TaskRun& r : out.runs) {
      const size_t from = r.name == d.victim ? 0 : logged_before.at(r.name);
      out.logged_after[r.name] = r.process->Stderr().substr(from);
    }
    ExpectFinalCheckpoint(model_dir, 1);
    int64_t step;
    std::tie(out.accuracy, step) = FinalEvaluation(Find(out.runs, "evaluator_0").process->Stdout());
    EXPECT_GE(step, kMaxSteps);
    // No checkpoint evaluated twice, across a restart too.
    std::vector<int64_t> evaluated;
    for (const auto* list : {&out.killed, &out.runs}) {
      for (const TaskRun& r : *list) {
        if (r.name != "evaluator_0") continue;
        for (int64_t s : EvaluatedSteps(r.process->Stderr())) evaluated.push_back(s);
      }
    }
    EXPECT_EQ(std::set<int64_t>(evaluated.begin(), evaluated.end()).size(), evaluated.size())
        << ::testing::PrintToString(evaluated);
    EXPECT_EQ(EventAccuracy(model_dir).second, step);
    return out;
  }

  // Training went on from where it was. A task that starts over from fresh variables
  // logs global step 0 and a loss near ln(10) = 2.30 (ten equally likely classes; this
  // job logs 2.3-2.4 at step 0 and at most 0.6 from step 1000 on). So every loss a
  // training task logged after the disruption must be below half of ln(10), at a
  // global step at or past the first checkpoint (a restore goes back at most to the
  // newest complete checkpoint, never to 0), and each training task must have logged
  // at least one.
  //
  // The final accuracy must be above 0.84: what this job reaches undisturbed in half
  // its steps (3000 steps: 0.846-0.872). It is not compared with an undisturbed run:
  // two undisturbed async runs of this job differ by up to 2.6 points on a loaded
  // 2-core machine (0.8585-0.8849 in one CI run, where the evaluator-killed case
  // trains undisturbed), as the imbalance between the workers' input shards follows
  // the scheduler, so one pair of runs cannot resolve a smaller cost. tests/soak/soak.py
  // measures that cost over long runs.
  void ExpectTrainingWentOn(const Outcome& out) {
    EXPECT_GT(out.accuracy, 0.84);
    std::printf("accuracy after the disruption: %.4f\n", out.accuracy);
    for (const TaskRun& r : out.runs) {
      if (r.name.rfind("ps_", 0) == 0 || r.name.rfind("evaluator_", 0) == 0) continue;
      const auto losses = LoggedLosses(out.logged_after.at(r.name));
      EXPECT_FALSE(losses.empty()) << r.name << " logged no loss after the disruption";
      for (const auto& [step, loss] : losses) {
        EXPECT_LT(loss, std::log(10.0) / 2) << r.name << " at global step " << step;
        EXPECT_GE(step, testing::kSaveCheckpointsSteps) << r.name << " (loss " << loss << ")";
      }
    }
  }

  TempDir tmp_;
};

TEST_F(RecoveryTest, PsFrozenAndThawed) {
  // SIGSTOP: the ps keeps its connections open and answers nothing, as a hung VM or a
  // partition without a reset does. Keepalive turns the calls in flight into
  // UNAVAILABLE; the chief's and the worker's watch of the tasks they wait on names
  // the ps while it is frozen; both carry on by themselves once it is thawed.
  const std::string model_dir = tmp_.path() + "/frozen/model";
  std::filesystem::create_directories(model_dir);
  json cluster = {{"chief", Addresses(1)}, {"worker", Addresses(1)}, {"ps", Addresses(1)}};
  std::vector<TaskRun> runs =
      StartTasks(cluster, json::object(), {{"ps", 0}, {"chief", 0}, {"worker", 0}}, model_dir);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  while (SavedStep(Find(runs, "chief_0").process->Stderr()) < kMaxSteps / 3) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no checkpoint past " << kMaxSteps / 3;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::map<std::string, size_t> before;
  for (const TaskRun& r : runs) before[r.name] = r.process->Stderr().size();
  Subprocess* ps = Find(runs, "ps_0").process.get();
  ps->Kill(SIGSTOP);
  // The "event=peer_silent peer=ps:0" lines a task logged since the freeze.
  auto lines_naming_ps = [&](const char* name) {
    const std::string during = Find(runs, name).process->Stderr().substr(before[name]);
    size_t n = 0;
    for (const LogEvent& e : Events(during, "peer_silent")) n += e.Str("peer") == "ps:0";
    return n;
  };
  // Within 60 s of the freeze each training task names the ps ...
  std::this_thread::sleep_for(std::chrono::seconds(60));
  for (const char* name : {"chief_0", "worker_0"}) {
    EXPECT_GE(lines_naming_ps(name), 1u) << name << " did not name the frozen ps within 60 s";
  }
  // ... and again while the freeze lasts (100 s in all).
  std::this_thread::sleep_for(std::chrono::seconds(40));
  for (const char* name : {"chief_0", "worker_0"}) {
    EXPECT_GE(lines_naming_ps(name), 2u) << name << " named the frozen ps only once in 100 s";
  }
  ps->Kill(SIGCONT);
  ExpectAllExitZero(runs);
  ExpectFinalCheckpoint(model_dir, 1);
}

// The "source" of every "event=model_ready" in `log` (how a session creator made the
// model ready: "init", "checkpoint" or "ps"), in order.
std::vector<std::string> ModelReadySources(const std::string& log) {
  std::vector<std::string> sources;
  for (const LogEvent& e : Events(log, "model_ready")) sources.push_back(e.Str("source"));
  return sources;
}

TEST_F(RecoveryTest, PsKilledAndRestarted) {
  Outcome out = Run({"ps_0", SIGKILL});
  EXPECT_EQ(out.killed_code, 128 + SIGKILL);
  // The chief re-created its session and restored the newest checkpoint onto the new
  // ps; the workers waited.
  const std::string chief = out.logged_after.at("chief_0");
  EXPECT_FALSE(Events(chief, "session_recreated").empty()) << chief;
  EXPECT_THAT(ModelReadySources(chief), ::testing::Contains("checkpoint")) << chief;
  ExpectTrainingWentOn(out);
}

TEST_F(RecoveryTest, WorkerKilledAndRestarted) {
  Outcome out = Run({"worker_1", SIGKILL});
  EXPECT_EQ(out.killed_code, 128 + SIGKILL);
  // The restarted worker trained steps of its own until the end.
  const testing::TrainingEnd end =
      testing::TrainingFinished(Find(out.runs, "worker_1").process->Stderr());
  EXPECT_GE(end.global_step, kMaxSteps);
  EXPECT_GE(end.local_steps, 1);
  ExpectTrainingWentOn(out);
}

TEST_F(RecoveryTest, ChiefKilledRestartsWithoutLosingThePsState) {
  Outcome out = Run({"chief_0", SIGKILL});
  EXPECT_EQ(out.killed_code, 128 + SIGKILL);
  // The ps kept training with the workers: the new chief keeps those values.
  const std::string chief = Find(out.runs, "chief_0").process->Stderr();
  EXPECT_THAT(ModelReadySources(chief), ::testing::Contains("ps")) << chief;
  EXPECT_THAT(ModelReadySources(chief), ::testing::Not(::testing::Contains("init"))) << chief;
  ExpectTrainingWentOn(out);
}

TEST_F(RecoveryTest, ChiefTerminatedWritesACheckpointFirst) {
  Outcome out = Run({"chief_0", SIGTERM});
  EXPECT_EQ(out.killed_code, 128 + SIGTERM);
  const std::string log = out.killed[0].process->Stderr();
  const auto stopped = Events(log, "training_stopped");
  ASSERT_EQ(stopped.size(), 1u) << log;
  EXPECT_EQ(stopped[0].Int("signal"), SIGTERM);
  EXPECT_EQ(stopped[0].Str("checkpoint"), "saved");
  // The checkpoint written on the way out is the last one the stopped chief saved: at
  // or after the step it stopped at (the workers train on until the save reads
  // global_step, so it may be a few steps later).
  EXPECT_GE(SavedStep(log), stopped[0].Int("global_step"));
  ExpectTrainingWentOn(out);
}

TEST_F(RecoveryTest, EvaluatorKilledResumesWithoutEvaluatingTwice) {
  Outcome out = Run({"evaluator_0", SIGKILL});
  EXPECT_EQ(out.killed_code, 128 + SIGKILL);
  ExpectTrainingWentOn(out);
}

}  // namespace
}  // namespace tandem

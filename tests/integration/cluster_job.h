// tests/integration/cluster_job.h
//
// A fashion_mlp job on a cluster of trainer processes on 127.0.0.1 (ephemeral
// ports), for the tests that run one: the job's arguments (every task runs the same
// command, only TF_CONFIG differs), starting tasks, waiting for their exits, and
// reading what they report (how training ended, final evaluation, eval events, the final
// checkpoint, which must verify).
#ifndef TANDEM_TESTS_INTEGRATION_CLUSTER_JOB_H_
#define TANDEM_TESTS_INTEGRATION_CLUSTER_JOB_H_

#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/log_events.h"
#include "tests/integration/logged_losses.h"
#include "tests/integration/subprocess.h"
#include "tests/util/free_port.h"
#include "tests/util/hand_decode.h"
#include "tests/util/temp_dir.h"

namespace tandem::testing {

using json = nlohmann::json;

constexpr int64_t kMaxSteps = 6000;  // Async accuracy 0.875-0.881 in four runs; 3000: 0.846-0.872.
constexpr int64_t kSaveCheckpointsSteps = 1000;
constexpr auto kJobDeadline = std::chrono::seconds(300);

inline std::string Config() { return std::string(TANDEM_SOURCE_DIR) + "/configs/fashion_mlp.toml"; }

// The job every task runs: fashion_mlp to kMaxSteps, one thread per task, the
// evaluator without delay or throttle; `sets` ("section.key=value") come last and win.
inline std::vector<std::string> JobArgs(const std::string& command, const std::string& model_dir,
                                        const std::vector<std::string>& sets = {}) {
  std::vector<std::string> args = {
      TANDEM_TRAINER, command,
      "--config",     Config(),
      "--set",        absl::StrCat("run.model_dir=\"", model_dir, "\""),
      "--set",        absl::StrCat("train.max_steps=", kMaxSteps),
      "--set",        absl::StrCat("run.save_checkpoints_steps=", kSaveCheckpointsSteps),
      "--set",        "run.intra_op_threads=1",
      "--set",        "run.inter_op_threads=1",
      "--set",        "eval.start_delay_secs=0",
      "--set",        "eval.throttle_secs=0"};
  for (const std::string& set : sets) {
    args.push_back("--set");
    args.push_back(set);
  }
  return args;
}

inline json Addresses(int n) {
  json list = json::array();
  for (int i = 0; i < n; ++i) list.push_back(absl::StrCat("127.0.0.1:", PickFreePort()));
  return list;
}

struct TaskRun {
  std::string name;
  std::unique_ptr<Subprocess> process;
};

// Starts `args` as task `type`:`index` of `cluster`, with TF_CONFIG {cluster, task,
// extra...} in its environment; its log goes to
// <model_dir>/../<type>_<index><log_suffix>.{out,err}.
inline std::unique_ptr<Subprocess> StartClusterTask(const json& cluster, const std::string& type,
                                                    int index, const std::vector<std::string>& args,
                                                    const std::string& model_dir,
                                                    const std::string& log_suffix = "",
                                                    const json& extra = json::object()) {
  json tf = extra;
  tf["cluster"] = cluster;
  tf["task"]["type"] = type;
  tf["task"]["index"] = index;
  const std::string log =
      (std::filesystem::path(model_dir).parent_path() / absl::StrCat(type, "_", index, log_suffix))
          .string();
  return std::make_unique<Subprocess>(args, log,
                                      std::vector<std::string>{"TF_CONFIG=" + tf.dump()});
}

// Starts one `train_and_evaluate` trainer per {type, index}, as StartClusterTask does.
inline std::vector<TaskRun> StartTasks(const json& cluster, const json& extra,
                                       const std::vector<std::pair<std::string, int>>& tasks,
                                       const std::string& model_dir,
                                       const std::string& log_suffix = "",
                                       const std::vector<std::string>& sets = {}) {
  std::vector<TaskRun> runs;
  for (const auto& [type, index] : tasks) {
    runs.push_back(
        {absl::StrCat(type, "_", index),
         StartClusterTask(cluster, type, index, JobArgs("train_and_evaluate", model_dir, sets),
                          model_dir, log_suffix, extra)});
  }
  return runs;
}

// Waits for every task (bounded); expects each to exit 0.
inline void ExpectAllExitZero(std::vector<TaskRun>& runs) {
  const auto deadline = std::chrono::steady_clock::now() + kJobDeadline;
  for (TaskRun& r : runs) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    int code = r.process->Wait(std::max(left, std::chrono::milliseconds(1)));
    EXPECT_EQ(code, 0) << r.name << " (-1: still running at the deadline)\n"
                       << r.process->Stderr().substr(
                              std::max<size_t>(r.process->Stderr().size(), 4000) - 4000);
  }
}

// A training task's end, from its "event=training_finished" line: the global step it
// ended at and the steps it ran itself; -1 for both when it logged none.
struct TrainingEnd {
  int64_t global_step = -1;
  int64_t local_steps = -1;
};
inline TrainingEnd TrainingFinished(const std::string& log) {
  const std::vector<LogEvent> events = Events(log, "training_finished");
  if (events.empty()) return {};
  return {events.back().Int("global_step"), events.back().Int("local_steps")};
}

// "final evaluation: accuracy = A, ..., global_step = G" -> {A, G}, or {-1, -1}.
inline std::pair<double, int64_t> FinalEvaluation(const std::string& out) {
  std::smatch m;
  static const std::regex re(R"(final evaluation: accuracy = ([0-9.]+).*global_step = (\d+))");
  if (!std::regex_search(out, m, re)) return {-1, -1};
  return {std::stod(m[1]), std::stoll(m[2])};
}

// The accuracy in model_dir/eval_test's events at the highest step, and that step.
inline std::pair<double, int64_t> EventAccuracy(const std::string& model_dir) {
  std::pair<double, int64_t> best{-1, -1};
  for (const Scalar& sc : ScalarsInDir(model_dir + "/eval_test")) {
    if (sc.tag == "accuracy" && sc.step >= best.second) best = {sc.value, sc.step};
  }
  return best;
}

// The newest checkpoint prefix named by model_dir/checkpoint.
inline std::string LatestPrefix(const std::string& model_dir) {
  std::ifstream state(model_dir + "/checkpoint");
  std::string line;
  std::getline(state, line);
  std::smatch m;
  static const std::regex re(R"re(model_checkpoint_path: "([^"]+)")re");
  if (!std::regex_search(line, m, re)) return "";
  const std::string path = m[1];
  return path[0] == '/' ? path : model_dir + "/" + path;
}

// The final checkpoint: at or past max_steps, one shard per ps task, and it verifies.
inline void ExpectFinalCheckpoint(const std::string& model_dir, int num_ps,
                                  int64_t max_steps = kMaxSteps) {
  const std::string prefix = LatestPrefix(model_dir);
  ASSERT_FALSE(prefix.empty()) << "no checkpoint state in " << model_dir;
  const int64_t step = std::stoll(prefix.substr(prefix.rfind('-') + 1));
  EXPECT_GE(step, max_steps);
  for (int k = 0; k < num_ps; ++k) {
    char shard[64];
    std::snprintf(shard, sizeof(shard), "-%05d-of-%05d.safetensors", k, num_ps);
    EXPECT_TRUE(std::filesystem::exists(prefix + shard)) << prefix + shard;
  }
  Subprocess verify({TANDEM_CKPT, "verify", model_dir},
                    (std::filesystem::path(model_dir).parent_path() / "ckpt_verify").string());
  EXPECT_EQ(verify.Wait(std::chrono::seconds(60)), 0) << verify.Stdout() << verify.Stderr();
}

// The highest "step = N" a task logged, or -1.
inline int64_t LastLoggedStep(const std::string& log) {
  int64_t last = -1;
  for (const auto& [step, loss] : LoggedLosses(log)) last = std::max(last, step);
  return last;
}

// Waits until `task` logged a step at or past `step`: false at `timeout` or when the
// task ended first.
inline bool WaitForStep(const Subprocess& task, int64_t step,
                        std::chrono::milliseconds timeout = std::chrono::seconds(240)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (LastLoggedStep(task.Stderr()) < step) {
    if (std::chrono::steady_clock::now() > deadline || !task.running()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

// A replica group's agreed stop after a worker got SIGTERM: the worker exits
// 128 + SIGTERM and the chief 1 (each waited for up to `deadline`), the chief names
// the step at which "another replica" stopped, the worker names the same step, and
// the chief saved a checkpoint there. Returns that step, or -1 after recording a
// failure.
inline int64_t ExpectAgreedStop(Subprocess& chief, Subprocess& worker,
                                std::chrono::seconds deadline = std::chrono::seconds(60)) {
  EXPECT_EQ(worker.Wait(deadline), 128 + SIGTERM) << worker.Stderr();
  EXPECT_EQ(chief.Wait(deadline), 1) << chief.Stderr();
  const std::string chief_log = chief.Stderr();
  std::smatch m;
  if (!std::regex_search(chief_log, m,
                         std::regex(R"(stopped at global step (\d+): another replica)"))) {
    ADD_FAILURE() << "the chief names no agreed stop:\n" << chief_log;
    return -1;
  }
  const int64_t stopped = std::stoll(m[1]);
  EXPECT_NE(worker.Stderr().find(absl::StrCat("at global step ", stopped)), std::string::npos)
      << worker.Stderr();
  EXPECT_NE(chief_log.find(absl::StrCat("Saving checkpoints for ", stopped)), std::string::npos)
      << chief_log;
  return stopped;
}

inline const TaskRun& Find(const std::vector<TaskRun>& runs, const std::string& name) {
  for (const TaskRun& r : runs) {
    if (r.name == name) return r;
  }
  static const TaskRun none{"", nullptr};
  ADD_FAILURE() << "no task " << name;
  return none;
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_INTEGRATION_CLUSTER_JOB_H_

// tests/integration/hybrid_accuracy_test.cc (slow tier)
//
// Census wide & deep under the hybrid strategy (a chief and a worker mirroring the dense
// layers, one ps holding the tables), its worker SIGKILLed a third of the way and
// restarted: every task exits 0 at max_steps, the checkpoint verifies, and one process
// evaluating the last two checkpoints on adult.test finds TensorFlow's published figure
// for its census example, an accuracy over 0.83, at one of them at least. One is not
// enough: this model (raw numeric columns, as TensorFlow's example has them) has
// isolated steps whose weights evaluate far worse than their neighbours' without any
// kill (a hybrid run checkpointed every 250 steps: 0.819 at step 5750 between two at
// 0.855), and the kill moves where the last step lands.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_state.h"
#include "gtest/gtest.h"
#include "tests/integration/census_job.h"
#include "tests/integration/cluster_job.h"
#include "tests/integration/logged_losses.h"

namespace tandem {
namespace {

using testing::CensusArgs;
using testing::Hybrid;
using testing::HybridJob;
using testing::StartCensusTask;
using testing::StartHybridJob;
using testing::Subprocess;
using testing::TempDir;

constexpr auto kDeadline = std::chrono::seconds(1200);

TEST(HybridAccuracyTest, CensusWithAWorkerKilledAndRestartedReachesTensorFlowsFigure) {
  TempDir tmp;
  // 20 epochs of adult.data at a global batch of 2 x 40, shuffled as the config says.
  constexpr int64_t kSteps = 8141;
  const std::vector<std::string> sets =
      Hybrid({absl::StrCat("train.max_steps=", kSteps), "run.save_checkpoints_steps=2000",
              "run.log_step_count_steps=500", "data.shuffle_buffer=32561"});
  HybridJob job = StartHybridJob(tmp.path(), sets);
  const std::string& model_dir = job.model_dir;
  Subprocess& worker = *job.worker;
  ASSERT_TRUE(testing::WaitForStep(worker, kSteps / 3, kDeadline)) << worker.Stderr();
  worker.Kill(SIGKILL);
  worker.Wait(std::chrono::seconds(10));
  auto again = StartCensusTask(job.cluster, "worker", 0, model_dir, sets, "_again");
  ASSERT_EQ(job.chief->Wait(kDeadline), 0) << job.chief->Stderr();
  ASSERT_EQ(again->Wait(kDeadline), 0) << again->Stderr();
  ASSERT_EQ(job.ps->Wait(kDeadline), 0) << job.ps->Stderr();
  EXPECT_EQ(testing::TrainingFinished(job.chief->Stderr()).global_step, kSteps);
  EXPECT_EQ(testing::TrainingFinished(again->Stderr()).global_step, kSteps);
  testing::ExpectFinalCheckpoint(model_dir, /*num_ps=*/2, kSteps);

  // The kept checkpoints' prefixes, oldest first.
  absl::StatusOr<checkpoint::CheckpointState> state = checkpoint::ReadCheckpointState(model_dir);
  ASSERT_TRUE(state.ok()) << state.status();
  const std::vector<std::string>& kept = state->all_model_checkpoint_paths;
  ASSERT_GE(kept.size(), 2u);
  EXPECT_EQ(kept.back(), model_dir + "/model.ckpt-" + std::to_string(kSteps));
  double best = 0;
  for (size_t i = kept.size() - 2; i < kept.size(); ++i) {
    std::vector<std::string> args = CensusArgs("evaluate", model_dir, {"eval.steps=0"});
    args.insert(args.end(), {"--checkpoint", kept[i]});
    Subprocess eval(args, absl::StrCat(tmp.path(), "/eval_", i));
    ASSERT_EQ(eval.Wait(std::chrono::seconds(300)), 0) << eval.Stderr();
    std::smatch m;
    const std::string out = eval.Stdout() + eval.Stderr();
    ASSERT_TRUE(std::regex_search(out, m, std::regex("accuracy = ([0-9.]+)"))) << out;
    const double accuracy = std::stod(m[1]);
    std::printf("test accuracy of %s (%lld hybrid steps in all): %.4f\n", kept[i].c_str(),
                static_cast<long long>(kSteps), accuracy);
    best = std::max(best, accuracy);
  }
  EXPECT_GE(best, 0.83);
}

}  // namespace
}  // namespace tandem

// `trainer train` on the shipped fashion_cnn config with [run] precision =
// "mixed_bfloat16" against the same job in float32: the loss the trainer logs at each
// of the first 20 steps must agree within 2%. The two runs see the same batches and
// dropout masks (seeded), so what differs is bfloat16 arithmetic in the matmuls,
// convolutions and the ops between them.
#include <cmath>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster_job.h"

namespace tandem::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kSteps = 20;
constexpr double kMaxRelativeDifference = 0.02;

// Runs 20 steps of fashion_cnn at `precision`, logging the loss every step. Returns
// the trainer's stderr.
std::string TrainCnn(const std::string& precision, const std::string& dir) {
  std::vector<std::string> args = {
      TANDEM_TRAINER,
      "train",
      "--config",
      std::string(TANDEM_SOURCE_DIR) + "/configs/fashion_cnn.toml",
      "--set",
      absl::StrCat("run.model_dir=\"", dir, "/", precision, "\""),
      "--set",
      absl::StrCat("run.precision=\"", precision, "\""),
      "--set",
      "run.log_step_count_steps=1",
      "--set",
      absl::StrCat("train.max_steps=", kSteps)};
  Subprocess p(args, dir + "/" + precision);
  const int code = p.Wait(std::chrono::seconds(240));
  EXPECT_EQ(code, 0) << precision << ":\n" << p.Stderr();
  return p.Stderr();
}

// step -> loss from the trainer's "loss = X, step = N" lines.
std::map<int, double> Losses(const std::string& log) {
  std::map<int, double> losses;
  static const std::regex line(R"(loss = ([-0-9.e+]+), step = (\d+))");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator();
       ++it) {
    losses[std::stoi((*it)[2])] = std::stod((*it)[1]);
  }
  return losses;
}

TEST(PrecisionTrainerTest, MixedBfloat16LossTracksFloat32ForTheFirst20Steps) {
  TempDir dir;
  const std::string f32_log = TrainCnn("float32", dir.path());
  const std::string bf16_log = TrainCnn("mixed_bfloat16", dir.path());
  EXPECT_THAT(bf16_log, HasSubstr("Precision mixed_bfloat16: "));
  EXPECT_THAT(bf16_log, HasSubstr("Conv2D x2"));
  EXPECT_THAT(f32_log, Not(HasSubstr("Precision mixed_bfloat16")));
  const std::map<int, double> f32 = Losses(f32_log), bf16 = Losses(bf16_log);
  ASSERT_EQ(f32.size(), kSteps) << f32_log;
  ASSERT_EQ(bf16.size(), kSteps) << bf16_log;
  double worst = 0;
  for (const auto& [step, want] : f32) {
    ASSERT_TRUE(bf16.count(step)) << "step " << step;
    const double rel = std::fabs(bf16.at(step) - want) / std::fabs(want);
    worst = std::max(worst, rel);
    EXPECT_LE(rel, kMaxRelativeDifference)
        << "step " << step << ": float32 loss " << want << ", mixed_bfloat16 " << bf16.at(step);
  }
  // The loss falls over the 20 steps in both, and the runs are not the same run.
  EXPECT_LT(f32.rbegin()->second, f32.begin()->second);
  EXPECT_LT(bf16.rbegin()->second, bf16.begin()->second);
  EXPECT_GT(worst, 0.0);
  std::printf("worst per-step relative loss difference over %d steps: %.4f\n", kSteps, worst);
}

}  // namespace
}  // namespace tandem::testing

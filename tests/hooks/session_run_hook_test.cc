// SecondOrStepTimer: TensorFlow's trigger rules for steps and seconds.
#include "hooks/session_run_hook.h"

#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(SecondOrStepTimerTest, StepsTriggerFirstThenEveryN) {
  SecondOrStepTimer timer(std::nullopt, 10);
  EXPECT_TRUE(timer.ShouldTrigger(3));  // The first step asked about.
  EXPECT_FALSE(timer.UpdateLastTriggered(3).has_value());
  EXPECT_EQ(timer.last_triggered_step(), 3);
  EXPECT_FALSE(timer.ShouldTrigger(3));
  EXPECT_FALSE(timer.ShouldTrigger(12));
  EXPECT_TRUE(timer.ShouldTrigger(13));
  EXPECT_TRUE(timer.ShouldTrigger(40));
  std::optional<std::pair<double, int64_t>> elapsed = timer.UpdateLastTriggered(14);
  ASSERT_TRUE(elapsed.has_value());
  EXPECT_EQ(elapsed->second, 11);
  EXPECT_GE(elapsed->first, 0.0);
  EXPECT_FALSE(timer.ShouldTrigger(23));
  EXPECT_TRUE(timer.ShouldTrigger(24));
}

TEST(SecondOrStepTimerTest, SecondsTriggerAfterTheIntervalNotTheSameStep) {
  SecondOrStepTimer timer(0.05, std::nullopt);
  EXPECT_TRUE(timer.ShouldTrigger(0));
  timer.UpdateLastTriggered(0);
  EXPECT_FALSE(timer.ShouldTrigger(1000));  // Steps do not matter, time does.
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  EXPECT_TRUE(timer.ShouldTrigger(1));
  EXPECT_FALSE(timer.ShouldTrigger(0));  // Never twice at the same step.
  std::optional<std::pair<double, int64_t>> elapsed = timer.UpdateLastTriggered(5);
  ASSERT_TRUE(elapsed.has_value());
  EXPECT_GE(elapsed->first, 0.05);
  EXPECT_EQ(elapsed->second, 5);
}

TEST(SecondOrStepTimerTest, NeitherOrBothNeverFire) {
  SecondOrStepTimer neither(std::nullopt, std::nullopt);
  EXPECT_FALSE(neither.ShouldTrigger(0));
  EXPECT_FALSE(neither.ShouldTrigger(100));
  SecondOrStepTimer both(1.0, 1);
  EXPECT_FALSE(both.ShouldTrigger(0));
}

TEST(SecondOrStepTimerTest, ResetMakesTheNextStepTriggerAgain) {
  SecondOrStepTimer timer(std::nullopt, 100);
  timer.UpdateLastTriggered(5);
  EXPECT_FALSE(timer.ShouldTrigger(6));
  timer.Reset();
  EXPECT_FALSE(timer.last_triggered_step().has_value());
  EXPECT_TRUE(timer.ShouldTrigger(6));
  EXPECT_FALSE(timer.UpdateLastTriggered(6).has_value());
}

}  // namespace
}  // namespace tandem

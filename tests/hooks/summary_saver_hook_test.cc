// SummarySaverHook: the graph's scalar summaries written at TensorFlow's steps (the
// first step, then when the timer fires for the expected next step), read back with
// ReadScalars; one event file per directory shared with StepCounterHook.
//
// The global step fetched with the train op may be read before or after the step's
// increment, which shifts TensorFlow's "expected next step" by one; with every 2 steps
// both cases write at the same steps, so the tests use 2.
#include "hooks/summary_saver_hook.h"

#include <set>

#include "framework/ops/summary_ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hooks/logging_hooks.h"
#include "hooks/monitored_session.h"
#include "hooks/stop_hooks.h"
#include "hooks/summary.h"
#include "tests/hooks/hooks_test_util.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using testing_util::TempDir;
using testing_util::TrainGraph;
using testing_util::TrainRequest;

void TrainSteps(TrainGraph& g, std::vector<std::shared_ptr<SessionRunHook>> hooks, int steps) {
  hooks.push_back(std::make_shared<StopAtStepHook>(steps, std::nullopt));
  auto ms = MonitoredSession::Create(
      g.graph(), std::make_unique<ChiefSessionCreator>(SessionCreatorOptions{}), std::move(hooks));
  ASSERT_TRUE(ms.ok()) << ms.status();
  int n = 0;
  while (!(*ms)->ShouldStop() && n < 100) {
    ASSERT_TRUE((*ms)->Run(TrainRequest(g)).ok());
    ++n;
  }
  EXPECT_EQ(n, steps);
  ASSERT_TRUE((*ms)->Close().ok());
}

std::vector<int64_t> Steps(const std::vector<ScalarPoint>& points) {
  std::vector<int64_t> steps;
  for (const ScalarPoint& p : points) steps.push_back(p.step);
  return steps;
}

TEST(SummarySaverHookTest, WritesEveryScalarSummaryAtTheExpectedSteps) {
  TempDir dir;
  TrainGraph g;
  Output loss = *g.graph()->FindOutput(g.loss_tensor);
  ops::summary::Scalar(g.root, "loss", loss);
  ops::summary::Scalar(g.root, "five", ops::Const(g.root, 5.0f));
  ASSERT_TRUE(g.root.ok()) << g.root.status();
  TrainSteps(g, {std::make_shared<SummarySaverHook>(Every::Steps(2), dir.path())}, 6);

  auto scalars = ReadScalars(dir.path());
  ASSERT_TRUE(scalars.ok()) << scalars.status();
  ASSERT_TRUE(scalars->contains("loss"));
  ASSERT_TRUE(scalars->contains("five"));
  // The first step, then every 2 steps: written at the global step after the run.
  EXPECT_THAT(Steps(scalars->at("five")), ElementsAre(1, 3, 5));
  EXPECT_THAT(Steps(scalars->at("loss")), ElementsAre(1, 3, 5));
  for (const ScalarPoint& p : scalars->at("five")) EXPECT_EQ(p.value, 5.0f);
  for (const ScalarPoint& p : scalars->at("loss")) {
    // loss = 2 * w, w = 1 + 0.5 * steps; read before or after this step's update.
    const float before = 2 * (1 + 0.5f * (p.step - 1)), after = 2 * (1 + 0.5f * p.step);
    EXPECT_TRUE(p.value == before || p.value == after) << p.step << ": " << p.value;
  }
}

// Each session's first step writes SessionLog START at the step it began from, so
// TensorBoard drops what an earlier run wrote past it (a restart from a checkpoint).
TEST(SummarySaverHookTest, EverySessionStartsWithASessionLogStart) {
  TempDir dir;
  TrainGraph g;
  ops::summary::Scalar(g.root, "five", ops::Const(g.root, 5.0f));
  ASSERT_TRUE(g.root.ok()) << g.root.status();
  auto hook = std::make_shared<SummarySaverHook>(Every::Steps(2), dir.path());
  TrainSteps(g, {hook}, 3);
  TrainSteps(g, {hook}, 2);  // A new session: its variables start over at step 0.

  std::vector<int64_t> starts;
  auto files = ListEventFiles(dir.path());
  ASSERT_TRUE(files.ok()) << files.status();
  for (const std::string& f : *files) {
    auto events = ReadEventFile(f);
    ASSERT_TRUE(events.ok()) << events.status();
    for (const proto::Event& e : *events) {
      if (e.has_session_log()) {
        EXPECT_EQ(e.session_log().status(), proto::SessionLog::START);
        starts.push_back(e.step());
      }
    }
  }
  EXPECT_THAT(starts, ElementsAre(0, 0));
}

TEST(SummarySaverHookTest, SharesOneEventFileWithStepCounterHook) {
  TempDir dir;
  TrainGraph g;
  ops::summary::Scalar(g.root, "five", ops::Const(g.root, 5.0f));
  ASSERT_TRUE(g.root.ok()) << g.root.status();
  TrainSteps(g,
             {std::make_shared<StepCounterHook>(Every::Steps(2), dir.path()),
              std::make_shared<SummarySaverHook>(Every::Steps(2), dir.path())},
             7);
  auto files = ListEventFiles(dir.path());
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->size(), 1u);
  auto scalars = ReadScalars(dir.path());
  ASSERT_TRUE(scalars.ok()) << scalars.status();
  EXPECT_THAT(Steps(scalars->at("five")), ElementsAre(1, 3, 5, 7));
  EXPECT_THAT(Steps(scalars->at("global_step/sec")), ElementsAre(3, 5, 7));
}

TEST(SummarySaverHookTest, NoDirectoryOrNoSummariesWritesNothing) {
  TrainGraph g;
  // No output dir: runs, writes nothing, no error.
  TrainSteps(g, {std::make_shared<SummarySaverHook>(Every::Steps(1), "")}, 3);
  // No summaries in the graph: the event file has no scalars.
  TempDir dir;
  TrainGraph g2;
  TrainSteps(g2, {std::make_shared<SummarySaverHook>(Every::Steps(1), dir.path())}, 3);
  auto scalars = ReadScalars(dir.path());
  ASSERT_TRUE(scalars.ok()) << scalars.status();
  EXPECT_TRUE(scalars->empty());
}

TEST(SummarySaverHookTest, NeedsAGlobalStep) {
  TrainGraph g(/*with_global_step=*/false);
  EXPECT_EQ(SummarySaverHook(Every::Steps(1), "").Begin(g.graph()).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(MonitoredTrainingSessionSummariesTest, WritesSummariesEverySaveSummariesSteps) {
  TempDir dir;
  TrainGraph g;
  ops::summary::Scalar(g.root, "five", ops::Const(g.root, 5.0f));
  ASSERT_TRUE(g.root.ok()) << g.root.status();
  MonitoredTrainingSessionOptions o;
  o.checkpoint_dir = dir.path();
  o.save_summaries_steps = 2;
  o.log_step_count_steps = 0;
  o.hooks = {std::make_shared<StopAtStepHook>(5, std::nullopt)};
  auto ms = NewMonitoredTrainingSession(g.graph(), o);
  ASSERT_TRUE(ms.ok()) << ms.status();
  while (!(*ms)->ShouldStop()) ASSERT_TRUE((*ms)->Run(TrainRequest(g)).ok());
  ASSERT_TRUE((*ms)->Close().ok());
  auto scalars = ReadScalars(dir.path());
  ASSERT_TRUE(scalars.ok()) << scalars.status();
  EXPECT_THAT(Steps(scalars->at("five")), ElementsAre(1, 3, 5));
  EXPECT_FALSE(scalars->contains("global_step/sec"));  // log_step_count_steps = 0.
}

}  // namespace
}  // namespace tandem

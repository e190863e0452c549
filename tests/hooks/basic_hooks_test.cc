// The hooks of stop_hooks.cc and logging_hooks.cc on real graphs and sessions: StopAtStepHook,
// StepCounterHook, LoggingTensorHook, NanTensorHook, GlobalStepWaiterHook,
// FinalOpsHook, EarlyStoppingHook and the per-directory writer cache.
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hooks/checkpoint_saver_hook.h"
#include "hooks/logging_hooks.h"
#include "hooks/monitored_session.h"
#include "hooks/stop_hooks.h"
#include "hooks/summary.h"
#include "hooks/summary_writer.h"
#include "tests/hooks/hooks_test_util.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using testing_util::TempDir;
using testing_util::TrainGraph;
using testing_util::TrainRequest;

std::unique_ptr<MonitoredSession> NewMonitored(TrainGraph& g,
                                               std::vector<std::shared_ptr<SessionRunHook>> hooks) {
  absl::StatusOr<std::unique_ptr<MonitoredSession>> ms = MonitoredSession::Create(
      g.graph(), std::make_unique<ChiefSessionCreator>(SessionCreatorOptions{}), std::move(hooks));
  EXPECT_TRUE(ms.ok()) << ms.status();
  return ms.ok() ? std::move(ms).value() : nullptr;
}

int64_t ReadStep(MonitoredSession& ms, const TrainGraph& g) {
  absl::StatusOr<std::vector<Tensor>> v = ms.raw_session()->Run({}, {g.step_tensor});
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? (*v)[0].scalar<int64_t>() : -1;
}

// Runs train steps until a hook asks to stop (at most `max_steps`); returns the count.
int RunUntilStop(MonitoredSession& ms, const TrainGraph& g, int max_steps) {
  int steps = 0;
  while (!ms.ShouldStop() && steps < max_steps) {
    absl::StatusOr<std::vector<Tensor>> r = ms.Run(TrainRequest(g));
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) break;
    ++steps;
  }
  return steps;
}

// ---------------------------------------------------------------------------------------

TEST(StopAtStepHookTest, NumStepsStopsExactlyAtLastStep) {
  TrainGraph g;
  auto ms = NewMonitored(g, {std::make_shared<StopAtStepHook>(5, std::nullopt)});
  ASSERT_NE(ms, nullptr);
  EXPECT_EQ(RunUntilStop(*ms, g, 100), 5);
  EXPECT_EQ(ReadStep(*ms, g), 5);
  EXPECT_TRUE(ms->Close().ok());
}

TEST(StopAtStepHookTest, LastStepIsAbsolute) {
  TrainGraph g;
  auto ms = NewMonitored(g, {std::make_shared<StopAtStepHook>(std::nullopt, 7)});
  ASSERT_NE(ms, nullptr);
  EXPECT_EQ(RunUntilStop(*ms, g, 100), 7);
  EXPECT_EQ(ReadStep(*ms, g), 7);
}

TEST(StopAtStepHookTest, NumStepsCountsFromTheRestoredStep) {
  TrainGraph g;
  TempDir dir;
  // First session: 4 steps, saved at the end.
  {
    auto scaffold = std::make_shared<Scaffold>();
    auto ms = MonitoredSession::Create(
        g.graph(),
        std::make_unique<ChiefSessionCreator>(SessionCreatorOptions{.scaffold = scaffold},
                                              dir.path()),
        {std::make_shared<StopAtStepHook>(4, std::nullopt),
         std::make_shared<CheckpointSaverHook>(dir.path(), Every::Steps(1000), scaffold.get())});
    ASSERT_TRUE(ms.ok()) << ms.status();
    EXPECT_EQ(RunUntilStop(**ms, g, 100), 4);
    ASSERT_TRUE((*ms)->Close().ok());
  }
  // Second: restores step 4, runs 3 more.
  TrainGraph g2;
  auto ms = MonitoredSession::Create(
      g2.graph(), std::make_unique<ChiefSessionCreator>(SessionCreatorOptions{}, dir.path()),
      {std::make_shared<StopAtStepHook>(3, std::nullopt)});
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_EQ(ReadStep(**ms, g2), 4);
  EXPECT_EQ(RunUntilStop(**ms, g2, 100), 3);
  EXPECT_EQ(ReadStep(**ms, g2), 7);
}

TEST(StopAtStepHookTest, Errors) {
  TrainGraph g;
  EXPECT_EQ(StopAtStepHook(std::nullopt, std::nullopt).Begin(g.graph()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StopAtStepHook(1, 2).Begin(g.graph()).code(), absl::StatusCode::kInvalidArgument);
  TrainGraph no_step(/*with_global_step=*/false);
  absl::Status s = StopAtStepHook(1, std::nullopt).Begin(no_step.graph());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("StopAtStepHook"));
}

// ---------------------------------------------------------------------------------------

TEST(StepCounterHookTest, WritesStepsPerSecondAtTriggeredSteps) {
  TrainGraph g;
  TempDir dir;
  auto ms = NewMonitored(g, {std::make_shared<StepCounterHook>(Every::Steps(2), dir.path()),
                             std::make_shared<StopAtStepHook>(6, std::nullopt)});
  ASSERT_NE(ms, nullptr);
  EXPECT_EQ(RunUntilStop(*ms, g, 100), 6);
  ASSERT_TRUE(ms->Close().ok());
  absl::StatusOr<std::map<std::string, std::vector<ScalarPoint>>> scalars = ReadScalars(dir.path());
  ASSERT_TRUE(scalars.ok()) << scalars.status();
  ASSERT_TRUE(scalars->contains("global_step/sec"));
  std::vector<int64_t> steps;
  for (const ScalarPoint& p : scalars->at("global_step/sec")) {
    steps.push_back(p.step);
    EXPECT_GT(p.value, 0.0f);
  }
  // Triggered at 1 (starts the clock), then every 2 steps: 3 and 5.
  EXPECT_THAT(steps, ElementsAre(3, 5));
}

TEST(StepCounterHookTest, NeedsAGlobalStep) {
  TrainGraph g(/*with_global_step=*/false);
  EXPECT_EQ(StepCounterHook(Every::Steps(1), "").Begin(g.graph()).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(SummaryWriterForDirTest, OneWriterPerDirectory) {
  TempDir a, b;
  auto w1 = SummaryWriterForDir(a.path());
  auto w2 = SummaryWriterForDir(a.path());
  auto w3 = SummaryWriterForDir(b.path());
  ASSERT_TRUE(w1.ok() && w2.ok() && w3.ok());
  EXPECT_EQ(w1->get(), w2->get());
  EXPECT_NE(w1->get(), w3->get());
}

// ---------------------------------------------------------------------------------------

TEST(LoggingTensorHookTest, LineFormatAndIterationTimer) {
  TrainGraph g;
  auto hook = std::make_shared<LoggingTensorHook>(
      std::vector<std::pair<std::string, std::string>>{{"loss", g.loss_tensor},
                                                       {"step", g.step_tensor}},
      Every::Steps(3));
  auto ms = NewMonitored(g, {hook});
  ASSERT_NE(ms, nullptr);
  // Iteration 0 logs; no "(x sec)" the first time. loss = 2 * w with w = 1 before any
  // update (the fetch may see the value before or after this step's update).
  ASSERT_TRUE(ms->Run(TrainRequest(g)).ok());
  EXPECT_THAT(hook->last_line(), MatchesRegex("loss = (2|3), step = (0|1)"));
  // Iterations 1, 2 do not log; 3 does, with the elapsed time.
  ASSERT_TRUE(ms->Run(TrainRequest(g)).ok());
  ASSERT_TRUE(ms->Run(TrainRequest(g)).ok());
  EXPECT_THAT(hook->last_line(), MatchesRegex("loss = (2|3), step = (0|1)"));
  ASSERT_TRUE(ms->Run(TrainRequest(g)).ok());
  EXPECT_THAT(hook->last_line(),
              MatchesRegex("loss = (5|6), step = (3|4) \\([0-9]+\\.[0-9][0-9][0-9] sec\\)"));
}

TEST(LoggingTensorHookTest, ShortNumbersListsAndAtEnd) {
  Scope root = Scope::NewRootScope();
  Output small = ops::Const(root.WithOpName("small"), 0.0381f);
  Output vec = ops::Const(root.WithOpName("vec"), {1.5f, -2.f, 3.25f}, TensorShape({3}));
  Output mat = ops::Const(root.WithOpName("mat"), {1.f, 2.f, 3.f, 4.f}, TensorShape({2, 2}));
  ops::GetOrCreateGlobalStep(root);
  ASSERT_TRUE(root.ok()) << root.status();
  auto hook = std::make_shared<LoggingTensorHook>(
      std::vector<std::pair<std::string, std::string>>{
          {"small", small.name()}, {"vec", vec.name()}, {"mat", mat.name()}},
      Every{}, /*at_end=*/true);
  auto ms = MonitoredSession::Create(
      root.graph(), std::make_unique<ChiefSessionCreator>(SessionCreatorOptions{}), {hook});
  ASSERT_TRUE(ms.ok()) << ms.status();
  SessionRunRequest request;
  request.fetches = {small.name()};
  ASSERT_TRUE((*ms)->Run(request).ok());
  EXPECT_EQ(hook->last_line(), "");  // Neither secs nor steps: only at the end.
  ASSERT_TRUE((*ms)->Close().ok());
  EXPECT_EQ(hook->last_line(), "small = 0.0381, vec = [1.5, -2, 3.25], mat = [[1, 2], [3, 4]]");
}

// ---------------------------------------------------------------------------------------

struct NanGraph {
  NanGraph() {
    ops::GetOrCreateGlobalStep(root);
    loss = ops::Placeholder(root.WithOpName("loss_in"), DType::kFloat, PartialShape({}));
    EXPECT_TRUE(root.ok()) << root.status();
  }
  SessionRunRequest Feed(float v) const {
    SessionRunRequest r;
    r.feeds = {{loss.name(), Tensor::Scalar<float>(v)}};
    r.fetches = {loss.name()};
    return r;
  }
  Scope root = Scope::NewRootScope();
  Output loss;
};

TEST(NanTensorHookTest, FailsOnNanAndInf) {
  for (float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    NanGraph g;
    auto ms = MonitoredSession::Create(
        g.root.graph(), std::make_unique<ChiefSessionCreator>(SessionCreatorOptions{}),
        {std::make_shared<NanTensorHook>(g.loss.name())});
    ASSERT_TRUE(ms.ok()) << ms.status();
    ASSERT_TRUE((*ms)->Run(g.Feed(0.5f)).ok());
    absl::StatusOr<std::vector<Tensor>> r = (*ms)->Run(g.Feed(bad));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
    EXPECT_THAT(r.status().message(), HasSubstr("NaN loss during training."));
  }
}

TEST(NanTensorHookTest, RequestsStopWhenNotFailing) {
  NanGraph g;
  auto ms = MonitoredSession::Create(
      g.root.graph(), std::make_unique<ChiefSessionCreator>(SessionCreatorOptions{}),
      {std::make_shared<NanTensorHook>(g.loss.name(), /*fail_on_nan_loss=*/false)});
  ASSERT_TRUE(ms.ok()) << ms.status();
  ASSERT_TRUE((*ms)->Run(g.Feed(1.0f)).ok());
  EXPECT_FALSE((*ms)->ShouldStop());
  ASSERT_TRUE((*ms)->Run(g.Feed(std::nanf(""))).ok());
  EXPECT_TRUE((*ms)->ShouldStop());
}

// ---------------------------------------------------------------------------------------

TEST(GlobalStepWaiterHookTest, BlocksUntilTheStepIsReached) {
  TrainGraph g;
  auto waiter = std::make_shared<GlobalStepWaiterHook>(3, /*poll_secs=*/0.01);
  ASSERT_TRUE(waiter->Begin(g.graph()).ok());
  ChiefSessionCreator creator{SessionCreatorOptions{}};
  auto session = creator.CreateSession(g.graph());
  ASSERT_TRUE(session.ok()) << session.status();
  Session* s = session->get();

  // Another "worker" (the chief) advances the step while this one waits. The step
  // reaches 3 during the chief's third run, so the waiter cannot be released before
  // that run has started (counted before it, not after: the waiter may see the new
  // step before the chief's Run returns).
  std::atomic<int> steps_started{0};
  std::thread chief([&] {
    for (int i = 0; i < 3; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      steps_started.fetch_add(1);
      ASSERT_TRUE(s->Run({}, {}, {g.train_op}).ok());
    }
  });
  SessionRunRequest request;
  SessionRunContext context(&request, s);
  absl::StatusOr<SessionRunArgs> args = waiter->BeforeRun(context);
  const int started_when_released = steps_started.load();
  chief.join();
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(started_when_released, 3);
  EXPECT_TRUE(args->fetches.empty());
  // Later steps do not look at the global step again.
  testing_util::ErrorSession unusable;
  SessionRunContext later(&request, &unusable);
  absl::StatusOr<SessionRunArgs> again = waiter->BeforeRun(later);
  EXPECT_TRUE(again.ok()) << again.status();
}

TEST(GlobalStepWaiterHookTest, ZeroDoesNotWait) {
  TrainGraph g;
  auto ms = NewMonitored(g, {std::make_shared<GlobalStepWaiterHook>(0, 100.0)});
  ASSERT_NE(ms, nullptr);
  EXPECT_TRUE(ms->Run(TrainRequest(g)).ok());
}

// ---------------------------------------------------------------------------------------

TEST(FinalOpsHookTest, RunsTensorsAtEndWithFeeds) {
  TrainGraph g;
  Output x = ops::Placeholder(g.root.WithOpName("x"), DType::kFloat, PartialShape({}));
  Output wx = ops::Mul(g.root.WithOpName("wx"), x, g.w_value);
  ASSERT_TRUE(g.root.ok()) << g.root.status();
  auto hook = std::make_shared<FinalOpsHook>(std::vector<std::string>{g.step_tensor, wx.name()},
                                             FeedMap{{x.name(), Tensor::Scalar<float>(10.f)}});
  auto ms = NewMonitored(g, {hook});
  ASSERT_NE(ms, nullptr);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(ms->Run(TrainRequest(g)).ok());
  EXPECT_TRUE(hook->final_values().empty());
  ASSERT_TRUE(ms->Close().ok());
  ASSERT_EQ(hook->final_values().size(), 2u);
  EXPECT_EQ(hook->final_values()[0].scalar<int64_t>(), 4);
  EXPECT_FLOAT_EQ(hook->final_values()[1].scalar<float>(), 10.f * (1.f + 4 * 0.5f));
}

// ---------------------------------------------------------------------------------------

// Writes `metric` at the given steps into `dir` as the evaluator would.
void WriteEvals(const std::string& dir, const std::string& metric,
                const std::vector<std::pair<int64_t, float>>& points) {
  auto writer = SummaryWriter::Create(dir);
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (const auto& [step, value] : points) {
    ASSERT_TRUE((*writer)->AddScalar(metric, value, step).ok());
  }
  ASSERT_TRUE((*writer)->Close().ok());
}

// Drives the hook with a fetched global step value, as the monitored session would.
bool StopsAt(EarlyStoppingHook& hook, int64_t global_step) {
  SessionRunRequest request;
  SessionRunContext context(&request, nullptr);
  EXPECT_TRUE(hook.BeforeRun(context).ok());
  SessionRunValues values;
  values.results.push_back(Tensor::Scalar<int64_t>(global_step));
  EXPECT_TRUE(hook.AfterRun(context, values).ok());
  return context.stop_requested();
}

TEST(EarlyStoppingHookTest, StopsWhenTheBestIsTooOld) {
  TrainGraph g;
  TempDir eval;
  WriteEvals(eval.path(), "loss", {{100, 1.0f}, {200, 0.5f}, {300, 0.6f}, {400, 0.7f}});
  {
    // Best at 200, newest 400: 200 steps without improvement.
    EarlyStoppingHook hook(eval.path(), "loss", /*higher_is_better=*/false, 200, 0,
                           Every::Steps(1));
    ASSERT_TRUE(hook.Begin(g.graph()).ok());
    EXPECT_TRUE(StopsAt(hook, 450));
  }
  {
    EarlyStoppingHook hook(eval.path(), "loss", false, 201, 0, Every::Steps(1));
    ASSERT_TRUE(hook.Begin(g.graph()).ok());
    EXPECT_FALSE(StopsAt(hook, 450));
  }
  {
    // Higher is better: the best is 1.0 at 100, 300 steps ago.
    EarlyStoppingHook hook(eval.path(), "loss", true, 300, 0, Every::Steps(1));
    ASSERT_TRUE(hook.Begin(g.graph()).ok());
    EXPECT_TRUE(StopsAt(hook, 450));
  }
  {
    // Not before min_steps (neither the global step nor evaluations before it count).
    EarlyStoppingHook hook(eval.path(), "loss", false, 200, /*min_steps=*/500, Every::Steps(1));
    ASSERT_TRUE(hook.Begin(g.graph()).ok());
    EXPECT_FALSE(StopsAt(hook, 450));
    EXPECT_FALSE(StopsAt(hook, 600));  // Every evaluation is before step 500.
  }
  {
    // Another metric name, or no eval dir yet: never stops.
    EarlyStoppingHook hook(eval.path(), "accuracy", false, 1, 0, Every::Steps(1));
    ASSERT_TRUE(hook.Begin(g.graph()).ok());
    EXPECT_FALSE(StopsAt(hook, 450));
    EarlyStoppingHook missing(eval.File("nope"), "loss", false, 1, 0, Every::Steps(1));
    ASSERT_TRUE(missing.Begin(g.graph()).ok());
    EXPECT_FALSE(StopsAt(missing, 450));
  }
}

TEST(EarlyStoppingHookTest, ChecksOnlyWhenTheTimerFires) {
  TrainGraph g;
  TempDir eval;
  EarlyStoppingHook hook(eval.path(), "loss", false, 100, 0, Every::Steps(10));
  ASSERT_TRUE(hook.Begin(g.graph()).ok());
  EXPECT_FALSE(StopsAt(hook, 1));  // Fires (first time), no evaluations yet.
  WriteEvals(eval.path(), "loss", {{1, 1.0f}, {200, 2.0f}});
  EXPECT_FALSE(StopsAt(hook, 5));  // Timer not due.
  EXPECT_TRUE(StopsAt(hook, 11));
}

}  // namespace
}  // namespace tandem

// MonitoredSession: the hook lifecycle and call order, stop requests, errors (no End),
// merging of fetches/targets/feeds, recovery from UNAVAILABLE/ABORTED; the chief and
// worker session creators; NewMonitoredTrainingSession's hooks.
#include "hooks/monitored_session.h"

#include <chrono>
#include <thread>

#include "absl/strings/match.h"
#include "checkpoint/checkpoint_state.h"
#include "framework/core/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hooks/checkpoint_saver_hook.h"
#include "hooks/stop_hooks.h"
#include "hooks/summary.h"
#include "tests/hooks/hooks_test_util.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::FlakySession;
using testing_util::RecordingHook;
using testing_util::TempDir;
using testing_util::TrainGraph;
using testing_util::TrainRequest;

using Log = std::shared_ptr<std::vector<std::string>>;

std::unique_ptr<MonitoredSession> NewMonitored(TrainGraph& g,
                                               std::vector<std::shared_ptr<SessionRunHook>> hooks,
                                               SessionCreatorOptions options = {},
                                               const std::string& checkpoint_dir = "",
                                               RecoveryPolicy recovery = {}) {
  absl::StatusOr<std::unique_ptr<MonitoredSession>> ms = MonitoredSession::Create(
      g.graph(), std::make_unique<ChiefSessionCreator>(std::move(options), checkpoint_dir),
      std::move(hooks), std::move(recovery));
  EXPECT_TRUE(ms.ok()) << ms.status();
  return ms.ok() ? std::move(ms).value() : nullptr;
}

int64_t ReadStep(Session* s, const TrainGraph& g) {
  absl::StatusOr<std::vector<Tensor>> v = s->Run({}, {g.step_tensor});
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? (*v)[0].scalar<int64_t>() : -1;
}

// ---------------------------------------------------------------------------------------
// Lifecycle

TEST(MonitoredSessionTest, HooksAreCalledInOrderForEveryPhase) {
  TrainGraph g;
  Log log = std::make_shared<std::vector<std::string>>();
  auto a = std::make_shared<RecordingHook>("a", log);
  auto b = std::make_shared<RecordingHook>("b", log);
  auto ms = NewMonitored(g, {a, b});
  ASSERT_NE(ms, nullptr);
  EXPECT_THAT(*log,
              ElementsAre("a.Begin", "b.Begin", "a.AfterCreateSession", "b.AfterCreateSession"));
  log->clear();
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(ms->Run(TrainRequest(g)).ok());
  EXPECT_THAT(*log, ElementsAre("a.BeforeRun", "b.BeforeRun", "a.AfterRun", "b.AfterRun",
                                "a.BeforeRun", "b.BeforeRun", "a.AfterRun", "b.AfterRun"));
  log->clear();
  EXPECT_FALSE(ms->ShouldStop());
  ASSERT_TRUE(ms->Close().ok());
  EXPECT_THAT(*log, ElementsAre("a.End", "b.End"));
  log->clear();
  ASSERT_TRUE(ms->Close().ok());  // Idempotent: End only once.
  EXPECT_TRUE(log->empty());
  EXPECT_EQ(ms->Run(TrainRequest(g)).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(MonitoredSessionTest, StopRequestFinishesTheStepForEveryHook) {
  TrainGraph g;
  Log log = std::make_shared<std::vector<std::string>>();
  auto stopper = std::make_shared<RecordingHook>("stopper", log);
  stopper->stop_at_after_run = 3;
  auto after = std::make_shared<RecordingHook>("after", log);
  auto ms = NewMonitored(g, {stopper, after});
  ASSERT_NE(ms, nullptr);
  int steps = 0;
  while (!ms->ShouldStop()) {
    ASSERT_TRUE(ms->Run(TrainRequest(g)).ok());
    ++steps;
    ASSERT_LE(steps, 10);
  }
  EXPECT_EQ(steps, 3);
  EXPECT_EQ(after->after_runs, 3);               // The hook after the stopper saw step 3 too.
  EXPECT_EQ(ReadStep(ms->raw_session(), g), 3);  // And the step itself ran.
  log->clear();
  ASSERT_TRUE(ms->Close().ok());
  EXPECT_THAT(*log, ElementsAre("stopper.End", "after.End"));
}

TEST(MonitoredSessionTest, EndIsNotCalledAfterAnError) {
  TrainGraph g;
  Log log = std::make_shared<std::vector<std::string>>();
  auto failing = std::make_shared<RecordingHook>("failing", log);
  failing->fail_at_after_run = 2;
  auto other = std::make_shared<RecordingHook>("other", log);
  auto ms = NewMonitored(g, {failing, other});
  ASSERT_NE(ms, nullptr);
  ASSERT_TRUE(ms->Run(TrainRequest(g)).ok());
  absl::StatusOr<std::vector<Tensor>> r = ms->Run(TrainRequest(g));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(r.status().message(), HasSubstr("failing failed"));
  EXPECT_EQ(other->after_runs, 1);  // The error stopped the AfterRun chain.
  log->clear();
  ASSERT_TRUE(ms->Close().ok());
  EXPECT_TRUE(log->empty()) << (*log)[0];
  EXPECT_EQ(ms->raw_session(), nullptr);
}

TEST(MonitoredSessionTest, FailingBeginStopsCreation) {
  TrainGraph g;
  class FailingBegin : public SessionRunHook {
    absl::Status Begin(Graph*) override { return absl::InvalidArgumentError("bad hook"); }
  };
  Log log = std::make_shared<std::vector<std::string>>();
  auto after = std::make_shared<RecordingHook>("after", log);
  auto ms = MonitoredSession::Create(g.graph(),
                                     std::make_unique<ChiefSessionCreator>(SessionCreatorOptions{}),
                                     {std::make_shared<FailingBegin>(), after});
  EXPECT_EQ(ms.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(log->empty());
}

// ---------------------------------------------------------------------------------------
// Merging the step

class FetchFeedHook : public SessionRunHook {
 public:
  absl::StatusOr<SessionRunArgs> BeforeRun(SessionRunContext& context) override { return args; }
  absl::Status AfterRun(SessionRunContext& context, const SessionRunValues& values) override {
    results = values.results;
    traced_nodes = values.run_metadata.step_stats.nodes.size();
    return absl::OkStatus();
  }
  SessionRunArgs args;
  std::vector<Tensor> results;
  size_t traced_nodes = 0;
};

TEST(MonitoredSessionTest, MergesFetchesTargetsAndFeedsAndDistributesResults) {
  TrainGraph g;
  Output x = ops::Placeholder(g.root.WithOpName("x"), DType::kFloat, PartialShape({}));
  Output y = ops::Mul(g.root.WithOpName("y"), x, ops::Const(g.root, 3.0f));
  Output z = ops::Placeholder(g.root.WithOpName("z"), DType::kFloat, PartialShape({}));
  Output zz = ops::Mul(g.root.WithOpName("zz"), z, z);
  ASSERT_TRUE(g.root.ok()) << g.root.status();
  auto h1 = std::make_shared<FetchFeedHook>();
  h1->args.fetches = {"y", zz.name()};  // "y" is the caller's "y:0" too.
  h1->args.feeds = {{z.name(), Tensor::Scalar<float>(4.f)}};
  auto h2 = std::make_shared<FetchFeedHook>();
  h2->args.fetches = {g.step_tensor};
  h2->args.targets = {g.train_op};  // Also the caller's target: runs once.
  auto ms = NewMonitored(g, {h1, h2});
  ASSERT_NE(ms, nullptr);
  SessionRunRequest request = TrainRequest(g);
  request.feeds = {{x.name(), Tensor::Scalar<float>(2.f)}};
  request.fetches = {y.name(), zz.name()};
  absl::StatusOr<std::vector<Tensor>> r = ms->Run(request);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].scalar<float>(), 6.f);
  EXPECT_EQ((*r)[1].scalar<float>(), 16.f);
  ASSERT_EQ(h1->results.size(), 2u);
  EXPECT_EQ(h1->results[0].scalar<float>(), 6.f);
  EXPECT_EQ(h1->results[1].scalar<float>(), 16.f);
  ASSERT_EQ(h2->results.size(), 1u);
  EXPECT_EQ(ReadStep(ms->raw_session(), g), 1);
  EXPECT_EQ(h1->traced_nodes, 0u);  // Nobody asked for a trace.
}

TEST(MonitoredSessionTest, TraceIsRequestedWhenAnyHookAsks) {
  TrainGraph g;
  auto quiet = std::make_shared<FetchFeedHook>();
  auto tracer = std::make_shared<FetchFeedHook>();
  tracer->args.trace = true;
  auto ms = NewMonitored(g, {quiet, tracer});
  ASSERT_NE(ms, nullptr);
  ASSERT_TRUE(ms->Run(TrainRequest(g)).ok());
  EXPECT_GT(tracer->traced_nodes, 0u);
  EXPECT_EQ(quiet->traced_nodes, tracer->traced_nodes);  // Every hook sees the stats.
}

TEST(MonitoredSessionTest, FeedingATensorTwiceIsAnError) {
  TrainGraph g;
  Output x = ops::Placeholder(g.root.WithOpName("x"), DType::kFloat, PartialShape({}));
  ASSERT_TRUE(g.root.ok());
  auto hook = std::make_shared<FetchFeedHook>();
  hook->args.feeds = {{"x", Tensor::Scalar<float>(1.f)}};
  auto ms = NewMonitored(g, {hook});
  ASSERT_NE(ms, nullptr);
  SessionRunRequest request;
  request.feeds = {{x.name(), Tensor::Scalar<float>(2.f)}};
  request.fetches = {x.name()};
  absl::StatusOr<std::vector<Tensor>> r = ms->Run(request);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("x:0"));
  EXPECT_THAT(r.status().message(), HasSubstr("fed twice"));
}

// ---------------------------------------------------------------------------------------
// Recovery

// A factory making FlakySessions that fail the train op while `failures` > 0.
SessionFactory FlakyFactory(std::shared_ptr<std::atomic<int>> failures, std::string target,
                            absl::StatusCode code, std::shared_ptr<int> created) {
  return [=](const proto::GraphDef& def,
             const SessionOptions& options) -> absl::StatusOr<std::unique_ptr<Session>> {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Session> inner, NewDirectSession(def, options));
    ++*created;
    return std::unique_ptr<Session>(
        std::make_unique<FlakySession>(std::move(inner), failures, target, code));
  };
}

TEST(MonitoredSessionTest, RecoversFromUnavailableByRecreatingAndRestoring) {
  TempDir dir;
  TrainGraph g;
  auto failures = std::make_shared<std::atomic<int>>(0);
  auto created = std::make_shared<int>(0);
  auto scaffold = std::make_shared<Scaffold>();
  Log log = std::make_shared<std::vector<std::string>>();
  auto rec = std::make_shared<RecordingHook>("rec", log);
  auto ms = NewMonitored(
      g, {std::make_shared<CheckpointSaverHook>(dir.path(), Every::Steps(2), scaffold.get()), rec},
      SessionCreatorOptions{
          .scaffold = scaffold,
          .factory = FlakyFactory(failures, g.train_op, absl::StatusCode::kUnavailable, created)},
      dir.path());
  ASSERT_NE(ms, nullptr);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(ms->Run(TrainRequest(g)).ok());  // Saved at 2.
  Session* before = ms->raw_session();
  failures->store(1);
  absl::StatusOr<std::vector<Tensor>> r = ms->Run(TrainRequest(g));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ms->recoveries(), 1);
  EXPECT_EQ(*created, 2);
  EXPECT_NE(ms->raw_session(), before);
  EXPECT_EQ(std::count(log->begin(), log->end(), "rec.AfterCreateSession"), 2);
  // The chief restored the newest checkpoint: the hook saved at step 2 (every 2 steps),
  // not at 3.
  EXPECT_EQ(ReadStep(ms->raw_session(), g), 2);
  ASSERT_TRUE(ms->Run(TrainRequest(g)).ok());
  EXPECT_EQ(ReadStep(ms->raw_session(), g), 3);
  log->clear();
  ASSERT_TRUE(ms->Close().ok());  // A recovered error is no failure: End runs.
  EXPECT_THAT(*log, ElementsAre("rec.End"));
}

TEST(MonitoredSessionTest, AbortedIsRecoverableOtherErrorsAreNot) {
  TrainGraph g;
  auto failures = std::make_shared<std::atomic<int>>(1);
  auto created = std::make_shared<int>(0);
  auto ms = NewMonitored(
      g, {},
      SessionCreatorOptions{
          .factory = FlakyFactory(failures, g.train_op, absl::StatusCode::kAborted, created)});
  ASSERT_NE(ms, nullptr);
  EXPECT_EQ(ms->Run(TrainRequest(g)).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(ms->recoveries(), 1);
  ASSERT_TRUE(ms->Run(TrainRequest(g)).ok());

  TrainGraph g2;
  auto failures2 = std::make_shared<std::atomic<int>>(1);
  auto ms2 = NewMonitored(
      g2, {},
      SessionCreatorOptions{
          .factory = FlakyFactory(failures2, g2.train_op, absl::StatusCode::kInternal, created)});
  ASSERT_NE(ms2, nullptr);
  Session* before = ms2->raw_session();
  EXPECT_EQ(ms2->Run(TrainRequest(g2)).status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(ms2->recoveries(), 0);
  EXPECT_EQ(ms2->raw_session(), before);
}

TEST(MonitoredSessionTest, FailedRecreationIsRetriedByTheNextRun) {
  TrainGraph g;
  auto failures = std::make_shared<std::atomic<int>>(0);
  auto created = std::make_shared<int>(0);
  SessionFactory flaky =
      FlakyFactory(failures, g.train_op, absl::StatusCode::kUnavailable, created);
  auto factory_calls = std::make_shared<int>(0);
  // The second session cannot be created (the cluster is still down); the third can.
  SessionFactory factory =
      [=](const proto::GraphDef& def,
          const SessionOptions& options) -> absl::StatusOr<std::unique_ptr<Session>> {
    if (++*factory_calls == 2) return absl::UnavailableError("ps task 0 is not up yet");
    return flaky(def, options);
  };
  auto ms = NewMonitored(g, {}, SessionCreatorOptions{.factory = factory});
  ASSERT_NE(ms, nullptr);
  ASSERT_TRUE(ms->Run(TrainRequest(g)).ok());
  failures->store(1);
  absl::StatusOr<std::vector<Tensor>> r = ms->Run(TrainRequest(g));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("ps task 0 is not up yet"));
  EXPECT_EQ(ms->raw_session(), nullptr);
  EXPECT_EQ(ms->recoveries(), 0);
  ASSERT_TRUE(ms->Run(TrainRequest(g)).ok());
  EXPECT_EQ(ms->recoveries(), 1);
  EXPECT_EQ(*factory_calls, 3);
  EXPECT_EQ(ReadStep(ms->raw_session(), g), 1);  // No checkpoint: initialised again.
}

// A factory whose first `down` calls fail UNAVAILABLE (the cluster is not up yet).
SessionFactory DownFirst(int down, std::shared_ptr<int> calls, SessionFactory then) {
  return [=](const proto::GraphDef& def,
             const SessionOptions& options) -> absl::StatusOr<std::unique_ptr<Session>> {
    if (++*calls <= down) return absl::UnavailableError("ps task 0 is not up yet");
    return then(def, options);
  };
}

TEST(RecoveryPolicyTest, CreationIsRetriedUpToTheAttempts) {
  TrainGraph g;
  auto calls = std::make_shared<int>(0);
  SessionCreatorOptions options{.factory = DownFirst(2, calls, DefaultSessionFactory())};
  absl::StatusOr<std::unique_ptr<MonitoredSession>> two =
      MonitoredSession::Create(g.graph(), std::make_unique<ChiefSessionCreator>(options), {},
                               RecoveryPolicy{.create_attempts = 2});
  EXPECT_EQ(two.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(*calls, 2);

  *calls = 0;
  absl::StatusOr<std::unique_ptr<MonitoredSession>> three =
      MonitoredSession::Create(g.graph(), std::make_unique<ChiefSessionCreator>(options), {},
                               RecoveryPolicy{.create_attempts = 3});
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(*calls, 3);
  EXPECT_TRUE((*three)->Run(TrainRequest(g)).ok());

  // Other errors are not retried.
  *calls = 0;
  SessionCreatorOptions broken{
      .factory = [&](const proto::GraphDef&,
                     const SessionOptions&) -> absl::StatusOr<std::unique_ptr<Session>> {
        ++*calls;
        return absl::InvalidArgumentError("bad graph");
      }};
  absl::StatusOr<std::unique_ptr<MonitoredSession>> bad =
      MonitoredSession::Create(g.graph(), std::make_unique<ChiefSessionCreator>(broken), {},
                               RecoveryPolicy{.create_attempts = 3});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*calls, 1);
}

TEST(RecoveryPolicyTest, FinishedElsewhereStopsInsteadOfRetrying) {
  TrainGraph g;
  bool ended = true;
  RecoveryPolicy policy{.create_attempts = 5, .finished_elsewhere = [&] { return ended; }};
  // At creation: a stopped session instead of the error, after one try.
  auto calls = std::make_shared<int>(0);
  absl::StatusOr<std::unique_ptr<MonitoredSession>> at_create = MonitoredSession::Create(
      g.graph(),
      std::make_unique<ChiefSessionCreator>(
          SessionCreatorOptions{.factory = DownFirst(100, calls, DefaultSessionFactory())}),
      {}, policy);
  ASSERT_TRUE(at_create.ok()) << at_create.status();
  EXPECT_TRUE((*at_create)->finished_elsewhere());
  EXPECT_TRUE((*at_create)->ShouldStop());
  EXPECT_EQ((*at_create)->raw_session(), nullptr);
  EXPECT_EQ(*calls, 1);
  EXPECT_EQ((*at_create)->Run(TrainRequest(g)).status().code(),
            absl::StatusCode::kFailedPrecondition);

  // After a failed step: stops without re-creating the session.
  ended = false;
  auto failures = std::make_shared<std::atomic<int>>(0);
  auto created = std::make_shared<int>(0);
  auto ms = NewMonitored(
      g, {},
      SessionCreatorOptions{
          .factory = FlakyFactory(failures, g.train_op, absl::StatusCode::kUnavailable, created)},
      "", policy);
  ASSERT_NE(ms, nullptr);
  ASSERT_TRUE(ms->Run(TrainRequest(g)).ok());
  EXPECT_FALSE(ms->finished_elsewhere());
  ended = true;
  failures->store(1);
  EXPECT_EQ(ms->Run(TrainRequest(g)).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(ms->finished_elsewhere());
  EXPECT_TRUE(ms->ShouldStop());
  EXPECT_FALSE(ms->recovered());
  EXPECT_EQ(*created, 1);
  EXPECT_EQ(ms->recoveries(), 0);
}

TEST(RecoveryPolicyTest, ConsecutiveFailuresHaveABudget) {
  TrainGraph g;
  auto failures = std::make_shared<std::atomic<int>>(0);
  auto created = std::make_shared<int>(0);
  auto ms = NewMonitored(
      g, {},
      SessionCreatorOptions{
          .factory = FlakyFactory(failures, g.train_op, absl::StatusCode::kAborted, created)},
      "", RecoveryPolicy{.max_consecutive_failures = 2});
  ASSERT_NE(ms, nullptr);
  // Two failures, a success (which resets the count), two more: each recovered.
  failures->store(2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(ms->Run(TrainRequest(g)).status().code(), absl::StatusCode::kAborted);
    EXPECT_TRUE(ms->recovered());
  }
  ASSERT_TRUE(ms->Run(TrainRequest(g)).ok());
  EXPECT_FALSE(ms->recovered());
  failures->store(3);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(ms->Run(TrainRequest(g)).status().code(), absl::StatusCode::kAborted);
    EXPECT_TRUE(ms->recovered());
  }
  EXPECT_EQ(ms->recoveries(), 4);
  // The third in a row is final: returned, no new session.
  EXPECT_EQ(ms->Run(TrainRequest(g)).status().code(), absl::StatusCode::kAborted);
  EXPECT_FALSE(ms->recovered());
  EXPECT_EQ(ms->raw_session(), nullptr);
  EXPECT_EQ(ms->recoveries(), 4);
  EXPECT_EQ(*created, 5);
}

TEST(RecoveryPolicyTest, APersistentSessionSurvivesARecovery) {
  TrainGraph g;
  auto failures = std::make_shared<std::atomic<int>>(0);
  auto created = std::make_shared<int>(0);
  MonitoredTrainingSessionOptions o;
  o.factory = FlakyFactory(failures, g.train_op, absl::StatusCode::kUnavailable, created);
  o.persistent_session = true;
  o.keep_ready_variables = true;
  o.save_checkpoint_secs.reset();
  o.save_summaries_steps.reset();
  o.log_step_count_steps = 0;
  absl::StatusOr<std::unique_ptr<MonitoredSession>> ms = NewMonitoredTrainingSession(g.graph(), o);
  ASSERT_TRUE(ms.ok()) << ms.status();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*ms)->Run(TrainRequest(g)).ok());
  failures->store(1);
  EXPECT_EQ((*ms)->Run(TrainRequest(g)).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE((*ms)->recovered());
  EXPECT_EQ((*ms)->recoveries(), 1);
  // The one session made by the factory is handed out again, its variables as they were
  // (no checkpoint was written: a new session would start from step 0).
  EXPECT_EQ(*created, 1);
  EXPECT_EQ(ReadStep((*ms)->raw_session(), g), 3);
  ASSERT_TRUE((*ms)->Run(TrainRequest(g)).ok());
  EXPECT_EQ(ReadStep((*ms)->raw_session(), g), 4);
}

TEST(SessionFactoryTest, DefaultFactoryRejectsRemoteTargets) {
  TrainGraph g;
  proto::GraphDef def;
  g.graph()->ToGraphDef(&def);
  SessionOptions options;
  options.target = "grpc://localhost:2222";
  auto s = DefaultSessionFactory()(def, options);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.status().message(), HasSubstr("grpc://localhost:2222"));
  EXPECT_TRUE(DefaultSessionFactory()(def, SessionOptions{}).ok());
}

// ---------------------------------------------------------------------------------------
// ChiefSessionCreator

TEST(ChiefSessionCreatorTest, InitFeedAndInitFnRunOnlyWhenInitializing) {
  TempDir dir;
  auto build = [](Scope& root) {
    Output init_value =
        ops::Placeholder(root.WithOpName("init_value"), DType::kFloat, PartialShape({}));
    ops::Variable v(root, "v", init_value);
    ops::GetOrCreateGlobalStep(root);
    EXPECT_TRUE(root.ok()) << root.status();
    return v.value().name();
  };
  int init_fn_calls = 0;
  auto make_options = [&] {
    ScaffoldOptions o;
    o.init_feed = {{"init_value:0", Tensor::Scalar<float>(5.f)}};
    o.init_fn = [&](Session* s) {
      ++init_fn_calls;
      return absl::OkStatus();
    };
    return SessionCreatorOptions{.scaffold = std::make_shared<Scaffold>(o)};
  };
  std::string v_name;
  {
    Scope root = Scope::NewRootScope();
    v_name = build(root);
    SessionCreatorOptions options = make_options();
    std::shared_ptr<Scaffold> scaffold = options.scaffold;
    ChiefSessionCreator creator(options, dir.path());
    auto session = creator.CreateSession(root.graph());
    ASSERT_TRUE(session.ok()) << session.status();
    EXPECT_EQ(creator.restored_from(), "");
    EXPECT_EQ(init_fn_calls, 1);
    auto v = (*session)->Run({}, {v_name});
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ((*v)[0].scalar<float>(), 5.f);
    ASSERT_TRUE(scaffold->saver()->Save(session->get(), dir.path(), 7).ok());
  }
  Scope root = Scope::NewRootScope();
  build(root);
  ChiefSessionCreator creator(make_options(), dir.path());
  auto session = creator.CreateSession(root.graph());
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ(creator.restored_from(), env::JoinPath(dir.path(), "model.ckpt-7"));
  EXPECT_EQ(init_fn_calls, 1);  // Not again: restored.
}

TEST(ChiefSessionCreatorTest, RestoresAnExplicitCheckpointFile) {
  TempDir dir;
  // Save two checkpoints by hand; restore the older one explicitly.
  TrainGraph g;
  auto scaffold = std::make_shared<Scaffold>();
  ASSERT_TRUE(scaffold->Finalize(g.graph()).ok());
  ChiefSessionCreator init_creator(SessionCreatorOptions{.scaffold = scaffold});
  auto s = init_creator.CreateSession(g.graph());
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->Run({}, {}, {g.train_op}).ok());
  ASSERT_TRUE(scaffold->saver()->Save(s->get(), dir.path(), 1).ok());
  ASSERT_TRUE((*s)->Run({}, {}, {g.train_op}).ok());
  ASSERT_TRUE(scaffold->saver()->Save(s->get(), dir.path(), 2).ok());

  ChiefSessionCreator creator(SessionCreatorOptions{.scaffold = scaffold}, dir.path(),
                              env::JoinPath(dir.path(), "model.ckpt-1"));
  auto restored = creator.CreateSession(g.graph());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(ReadStep(restored->get(), g), 1);
  ChiefSessionCreator latest(SessionCreatorOptions{.scaffold = scaffold}, dir.path());
  auto restored_latest = latest.CreateSession(g.graph());
  ASSERT_TRUE(restored_latest.ok()) << restored_latest.status();
  EXPECT_EQ(ReadStep(restored_latest->get(), g), 2);
}

TEST(ChiefSessionCreatorTest, CheckpointMissingAVariableIsAnErrorNotAFreshStart) {
  TempDir dir;
  {
    TrainGraph g;
    auto scaffold = std::make_shared<Scaffold>();
    ChiefSessionCreator creator(SessionCreatorOptions{.scaffold = scaffold});
    auto s = creator.CreateSession(g.graph());
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE(scaffold->saver()->Save(s->get(), dir.path(), 3).ok());
  }
  TrainGraph g;
  ops::Variable extra(g.root, "extra", ops::Const(g.root, 1.0f));
  ASSERT_TRUE(g.root.ok());
  ChiefSessionCreator creator(SessionCreatorOptions{}, dir.path());
  auto s = creator.CreateSession(g.graph());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("extra"));
}

TEST(ChiefSessionCreatorTest, AllCheckpointsUnreadableIsAnErrorNotAFreshStart) {
  TempDir dir;
  std::string prefix;
  {
    TrainGraph g;
    auto scaffold = std::make_shared<Scaffold>();
    ChiefSessionCreator creator(SessionCreatorOptions{.scaffold = scaffold});
    auto s = creator.CreateSession(g.graph());
    ASSERT_TRUE(s.ok()) << s.status();
    auto saved = scaffold->saver()->Save(s->get(), dir.path(), 3);
    ASSERT_TRUE(saved.ok()) << saved.status();
    prefix = *saved;
  }
  // Truncate the only checkpoint's shard.
  const std::string shard = prefix + "-00000-of-00001.safetensors";
  auto bytes = env::ReadFile(shard);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  ASSERT_TRUE(env::WriteFileAtomic(shard, bytes->substr(0, bytes->size() / 2)).ok());
  TrainGraph g;
  ChiefSessionCreator creator(SessionCreatorOptions{}, dir.path());
  auto s = creator.CreateSession(g.graph());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss) << s.status();
  EXPECT_THAT(s.status().message(), HasSubstr("no readable checkpoint"));
}

// ---------------------------------------------------------------------------------------
// WorkerSessionCreator

TEST(WorkerSessionCreatorTest, TimesOutNamingUninitializedVariables) {
  TrainGraph g;
  WorkerSessionCreator creator(SessionCreatorOptions{}, /*max_wait_secs=*/0.2, /*poll_secs=*/0.05);
  const auto t0 = std::chrono::steady_clock::now();
  auto s = creator.CreateSession(g.graph());
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.status().message(), HasSubstr("w, global_step"));
  EXPECT_GE(waited, 0.2);
  EXPECT_LT(waited, 2.0);
}

TEST(WorkerSessionCreatorTest, WaitsUntilTheChiefInitializesThenRunsLocalInit) {
  TrainGraph g;
  ops::Variable local(g.root, "local_count", ops::Const(g.root, 3.0f),
                      ops::VariableOptions{.trainable = false, .local = true});
  ASSERT_TRUE(g.root.ok());
  auto scaffold = std::make_shared<Scaffold>();
  // The "chief": initialises the global variables 150 ms after the session exists.
  std::thread chief;
  SessionFactory factory =
      [&](const proto::GraphDef& def,
          const SessionOptions& options) -> absl::StatusOr<std::unique_ptr<Session>> {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, NewDirectSession(def, options));
    Session* raw = s.get();
    const std::string init = scaffold->init_op();
    chief = std::thread([raw, init] {
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
      EXPECT_TRUE(raw->Run({}, {}, {init}).ok());
    });
    return s;
  };
  WorkerSessionCreator creator(SessionCreatorOptions{.scaffold = scaffold, .factory = factory},
                               /*max_wait_secs=*/10, /*poll_secs=*/0.02);
  const auto t0 = std::chrono::steady_clock::now();
  auto s = creator.CreateSession(g.graph());
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  chief.join();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_GE(waited, 0.15);
  auto v = (*s)->Run({}, {local.value().name(), g.step_tensor});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)[0].scalar<float>(), 3.f);
  EXPECT_EQ((*v)[1].scalar<int64_t>(), 0);
}

// ---------------------------------------------------------------------------------------
// NewMonitoredTrainingSession

TEST(MonitoredTrainingSessionTest, ChiefAddsDefaultHooksAfterChiefOnlyHooks) {
  TempDir dir;
  TrainGraph g;
  Log log = std::make_shared<std::vector<std::string>>();
  MonitoredTrainingSessionOptions o;
  o.checkpoint_dir = dir.path();
  o.save_checkpoint_secs.reset();
  o.save_checkpoint_steps = 2;
  o.log_step_count_steps = 1;
  o.chief_only_hooks = {std::make_shared<RecordingHook>("chief_only", log)};
  o.hooks = {std::make_shared<RecordingHook>("hook", log),
             std::make_shared<StopAtStepHook>(5, std::nullopt)};
  auto ms = NewMonitoredTrainingSession(g.graph(), o);
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_THAT(*log, ElementsAre("chief_only.Begin", "hook.Begin", "chief_only.AfterCreateSession",
                                "hook.AfterCreateSession"));
  int steps = 0;
  while (!(*ms)->ShouldStop() && steps < 20) {
    ASSERT_TRUE((*ms)->Run(TrainRequest(g)).ok());
    ++steps;
  }
  EXPECT_EQ(steps, 5);
  ASSERT_TRUE((*ms)->Close().ok());
  absl::StatusOr<std::string> latest = checkpoint::LatestCheckpoint(dir.path());
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, env::JoinPath(dir.path(), "model.ckpt-5"));
  absl::StatusOr<std::map<std::string, std::vector<ScalarPoint>>> scalars = ReadScalars(dir.path());
  ASSERT_TRUE(scalars.ok()) << scalars.status();
  EXPECT_TRUE(scalars->contains("global_step/sec"));

  // A second chief session resumes from the checkpoint.
  TrainGraph g2;
  MonitoredTrainingSessionOptions o2;
  o2.checkpoint_dir = dir.path();
  auto ms2 = NewMonitoredTrainingSession(g2.graph(), o2);
  ASSERT_TRUE(ms2.ok()) << ms2.status();
  EXPECT_EQ(ReadStep((*ms2)->raw_session(), g2), 5);
}

TEST(MonitoredTrainingSessionTest, WorkerWaitsAndGetsOnlyItsHooks) {
  TempDir dir;
  TrainGraph g;
  Log log = std::make_shared<std::vector<std::string>>();
  auto scaffold = std::make_shared<Scaffold>();
  MonitoredTrainingSessionOptions o;
  o.is_chief = false;
  o.checkpoint_dir = dir.path();
  o.scaffold = scaffold;
  o.max_wait_secs = 5;
  o.chief_only_hooks = {std::make_shared<RecordingHook>("chief_only", log)};
  o.hooks = {std::make_shared<RecordingHook>("hook", log)};
  // The variables are initialised already (as by the chief) when the session exists.
  o.factory = [&](const proto::GraphDef& def,
                  const SessionOptions& options) -> absl::StatusOr<std::unique_ptr<Session>> {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, NewDirectSession(def, options));
    TANDEM_RETURN_IF_ERROR(s->Run({}, {}, {scaffold->init_op()}).status());
    return s;
  };
  auto ms = NewMonitoredTrainingSession(g.graph(), o);
  ASSERT_TRUE(ms.ok()) << ms.status();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*ms)->Run(TrainRequest(g)).ok());
  ASSERT_TRUE((*ms)->Close().ok());
  EXPECT_THAT(*log, Not(::testing::Contains(HasSubstr("chief_only"))));
  EXPECT_THAT(*log, ::testing::Contains("hook.End"));
  // No checkpoints or summaries from a worker.
  EXPECT_FALSE(checkpoint::LatestCheckpoint(dir.path()).ok());
}

}  // namespace
}  // namespace tandem

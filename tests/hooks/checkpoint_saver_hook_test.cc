// CheckpointSaverHook: saves at session creation, when the timer fires for the real
// global step and at the end; listener calls around each save; a listener stopping
// training; the checkpoints restore into a new graph through ChiefSessionCreator.
#include "hooks/checkpoint_saver_hook.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "checkpoint/checkpoint_state.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hooks/monitored_session.h"
#include "hooks/stop_hooks.h"
#include "tests/hooks/hooks_test_util.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing_util::TempDir;
using testing_util::TrainGraph;
using testing_util::TrainRequest;

std::vector<std::string> CheckpointBaseNames(const std::string& dir) {
  absl::StatusOr<checkpoint::CheckpointState> state = checkpoint::ReadCheckpointState(dir);
  EXPECT_TRUE(state.ok()) << state.status();
  std::vector<std::string> names;
  if (!state.ok()) return names;
  for (const std::string& p : state->all_model_checkpoint_paths) {
    names.push_back(p.substr(p.find_last_of('/') + 1));
  }
  return names;
}

std::vector<std::string> IndexFiles(const std::string& dir) {
  std::vector<std::string> out;
  absl::StatusOr<std::vector<std::string>> names = env::ListDir(dir);
  EXPECT_TRUE(names.ok()) << names.status();
  if (!names.ok()) return out;
  for (const std::string& n : *names) {
    if (absl::EndsWith(n, ".index.json")) out.push_back(n);
  }
  return out;
}

// Trains until the StopAtStepHook stops, then closes.
void Train(TrainGraph& g, const std::shared_ptr<Scaffold>& scaffold,
           std::vector<std::shared_ptr<SessionRunHook>> hooks, int64_t num_steps,
           const std::string& restore_dir = "") {
  hooks.push_back(std::make_shared<StopAtStepHook>(num_steps, std::nullopt));
  auto ms = MonitoredSession::Create(g.graph(),
                                     std::make_unique<ChiefSessionCreator>(
                                         SessionCreatorOptions{.scaffold = scaffold}, restore_dir),
                                     std::move(hooks));
  ASSERT_TRUE(ms.ok()) << ms.status();
  while (!(*ms)->ShouldStop()) ASSERT_TRUE((*ms)->Run(TrainRequest(g)).ok());
  ASSERT_TRUE((*ms)->Close().ok());
}

TEST(CheckpointSaverHookTest, SavesAtCreationEveryNStepsAndAtEnd) {
  TempDir dir;
  TrainGraph g;
  auto scaffold = std::make_shared<Scaffold>();
  Train(g, scaffold,
        {std::make_shared<CheckpointSaverHook>(dir.path(), Every::Steps(5), scaffold.get())}, 12);
  EXPECT_THAT(CheckpointBaseNames(dir.path()),
              ElementsAre("model.ckpt-0", "model.ckpt-5", "model.ckpt-10", "model.ckpt-12"));
  EXPECT_THAT(IndexFiles(dir.path()),
              ElementsAre("model.ckpt-0.index.json", "model.ckpt-10.index.json",
                          "model.ckpt-12.index.json", "model.ckpt-5.index.json"));
}

TEST(CheckpointSaverHookTest, NoEndSaveWhenTheLastStepWasSaved) {
  TempDir dir;
  TrainGraph g;
  auto scaffold = std::make_shared<Scaffold>();
  Train(g, scaffold,
        {std::make_shared<CheckpointSaverHook>(dir.path(), Every::Steps(3), scaffold.get())}, 6);
  EXPECT_THAT(CheckpointBaseNames(dir.path()),
              ElementsAre("model.ckpt-0", "model.ckpt-3", "model.ckpt-6"));
}

TEST(CheckpointSaverHookTest, SecondsTimerSavesAtStartAndEndOnly) {
  TempDir dir;
  TrainGraph g;
  auto scaffold = std::make_shared<Scaffold>();
  Train(g, scaffold,
        {std::make_shared<CheckpointSaverHook>(dir.path(), Every::Secs(3600), scaffold.get())}, 4);
  EXPECT_THAT(CheckpointBaseNames(dir.path()), ElementsAre("model.ckpt-0", "model.ckpt-4"));
}

TEST(CheckpointSaverHookTest, RestoreInANewGraphResumesTheGlobalStep) {
  TempDir dir;
  {
    TrainGraph g;
    auto scaffold = std::make_shared<Scaffold>();
    Train(g, scaffold,
          {std::make_shared<CheckpointSaverHook>(dir.path(), Every::Steps(5), scaffold.get())}, 12);
  }
  TrainGraph g2;
  ChiefSessionCreator creator(SessionCreatorOptions{}, dir.path());
  absl::StatusOr<std::unique_ptr<Session>> session = creator.CreateSession(g2.graph());
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ(creator.restored_from(), env::JoinPath(dir.path(), "model.ckpt-12"));
  absl::StatusOr<std::vector<Tensor>> v = (*session)->Run({}, {g2.step_tensor, g2.w_tensor});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)[0].scalar<int64_t>(), 12);
  EXPECT_FLOAT_EQ((*v)[1].scalar<float>(), 1.0f + 12 * 0.5f);

  // Training goes on from 12 (resume, not restart): saves at 12 (creation) and 16 (end).
  auto scaffold = std::make_shared<Scaffold>();
  Train(g2, scaffold,
        {std::make_shared<CheckpointSaverHook>(dir.path(), Every::Steps(5), scaffold.get())}, 4,
        dir.path());
  std::vector<std::string> names = CheckpointBaseNames(dir.path());
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.back(), "model.ckpt-16");
  EXPECT_TRUE(std::find(names.begin(), names.end(), "model.ckpt-12") != names.end());
  EXPECT_TRUE(std::find(names.begin(), names.end(), "model.ckpt-13") == names.end());
}

class RecordingListener : public CheckpointSaverListener {
 public:
  explicit RecordingListener(std::string name, std::shared_ptr<std::vector<std::string>> log)
      : name_(std::move(name)), log_(std::move(log)) {}
  absl::Status Begin() override {
    log_->push_back(name_ + ".Begin");
    return absl::OkStatus();
  }
  absl::Status BeforeSave(Session* session, int64_t step) override {
    log_->push_back(absl::StrCat(name_, ".BeforeSave ", step));
    return absl::OkStatus();
  }
  absl::StatusOr<bool> AfterSave(Session* session, int64_t step,
                                 const std::string& prefix) override {
    log_->push_back(
        absl::StrCat(name_, ".AfterSave ", step, " ", prefix.substr(prefix.find_last_of('/') + 1)));
    return stop_after_step > 0 && step >= stop_after_step;
  }
  absl::Status End(Session* session, int64_t step) override {
    log_->push_back(absl::StrCat(name_, ".End ", step));
    return absl::OkStatus();
  }
  int64_t stop_after_step = 0;

 private:
  std::string name_;
  std::shared_ptr<std::vector<std::string>> log_;
};

TEST(CheckpointSaverHookTest, ListenersAreCalledAroundEverySaveInOrder) {
  TempDir dir;
  TrainGraph g;
  auto scaffold = std::make_shared<Scaffold>();
  auto log = std::make_shared<std::vector<std::string>>();
  auto a = std::make_shared<RecordingListener>("a", log);
  auto b = std::make_shared<RecordingListener>("b", log);
  Train(g, scaffold,
        {std::make_shared<CheckpointSaverHook>(
            dir.path(), Every::Steps(2), scaffold.get(),
            std::vector<std::shared_ptr<CheckpointSaverListener>>{a, b})},
        3);
  EXPECT_THAT(*log, ElementsAre("a.Begin", "b.Begin",                                        //
                                "a.BeforeSave 0", "b.BeforeSave 0",                          //
                                "a.AfterSave 0 model.ckpt-0", "b.AfterSave 0 model.ckpt-0",  //
                                "a.BeforeSave 2", "b.BeforeSave 2",                          //
                                "a.AfterSave 2 model.ckpt-2", "b.AfterSave 2 model.ckpt-2",  //
                                "a.BeforeSave 3", "b.BeforeSave 3",                          //
                                "a.AfterSave 3 model.ckpt-3", "b.AfterSave 3 model.ckpt-3",  //
                                "a.End 3", "b.End 3"));
}

TEST(CheckpointSaverHookTest, ListenerCanStopTraining) {
  TempDir dir;
  TrainGraph g;
  auto scaffold = std::make_shared<Scaffold>();
  auto log = std::make_shared<std::vector<std::string>>();
  auto listener = std::make_shared<RecordingListener>("l", log);
  listener->stop_after_step = 1;  // Not at the save after creation (step 0).
  auto ms = MonitoredSession::Create(
      g.graph(), std::make_unique<ChiefSessionCreator>(SessionCreatorOptions{.scaffold = scaffold}),
      {std::make_shared<CheckpointSaverHook>(
          dir.path(), Every::Steps(2), scaffold.get(),
          std::vector<std::shared_ptr<CheckpointSaverListener>>{listener})});
  ASSERT_TRUE(ms.ok()) << ms.status();
  int steps = 0;
  while (!(*ms)->ShouldStop() && steps < 10) {
    ASSERT_TRUE((*ms)->Run(TrainRequest(g)).ok());
    ++steps;
  }
  EXPECT_EQ(steps, 2);
}

TEST(CheckpointSaverHookTest, Errors) {
  TempDir dir;
  TrainGraph no_step(/*with_global_step=*/false);
  Scaffold scaffold;
  absl::Status s =
      CheckpointSaverHook(dir.path(), Every::Steps(1), &scaffold).Begin(no_step.graph());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("CheckpointSaverHook"));

  // The hook's scaffold is not the one the session was created with: never finalized.
  TrainGraph g;
  Scaffold unused;
  auto ms = MonitoredSession::Create(
      g.graph(), std::make_unique<ChiefSessionCreator>(SessionCreatorOptions{}),
      {std::make_shared<CheckpointSaverHook>(dir.path(), Every::Steps(1), &unused)});
  EXPECT_EQ(ms.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(ms.status().message(), HasSubstr("no saver"));
}

}  // namespace
}  // namespace tandem

// The `checkpoint` state file (TF CheckpointState text format), LatestCheckpoint and
// retention (max_to_keep, keep_checkpoint_every_n_hours).
#include "checkpoint/checkpoint_state.h"

#include "checkpoint/checkpoint_index.h"
#include "framework/core/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/temp_dir.h"

namespace tandem::checkpoint {
namespace {

using ::tandem::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Fake checkpoint files for `step` in `dir` (an index and two shards).
std::string FakeCheckpoint(const std::string& dir, int64_t step) {
  std::string prefix = env::JoinPath(dir, CheckpointBaseName(step));
  EXPECT_TRUE(env::WriteFileAtomic(IndexPath(prefix), "{}").ok());
  for (int k = 0; k < 2; ++k) {
    EXPECT_TRUE(env::WriteFileAtomic(env::JoinPath(dir, ShardFileName(prefix, k, 2)), "x").ok());
  }
  return prefix;
}

TEST(CheckpointStateTest, TextFormatIsTensorFlows) {
  CheckpointState s;
  s.model_checkpoint_path = "model.ckpt-300";
  s.all_model_checkpoint_paths = {"model.ckpt-200", "model.ckpt-300"};
  s.all_model_checkpoint_timestamps = {1700000000.5, 1700000100.25};
  s.last_preserved_timestamp = 1699999000;
  EXPECT_EQ(SerializeCheckpointState(s),
            "model_checkpoint_path: \"model.ckpt-300\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-200\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-300\"\n"
            "all_model_checkpoint_timestamps: 1700000000.5\n"
            "all_model_checkpoint_timestamps: 1700000100.25\n"
            "last_preserved_timestamp: 1699999000\n");
  absl::StatusOr<CheckpointState> back = ParseCheckpointState("c", SerializeCheckpointState(s));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->model_checkpoint_path, s.model_checkpoint_path);
  EXPECT_EQ(back->all_model_checkpoint_paths, s.all_model_checkpoint_paths);
  EXPECT_EQ(back->all_model_checkpoint_timestamps, s.all_model_checkpoint_timestamps);
  EXPECT_EQ(back->last_preserved_timestamp, s.last_preserved_timestamp);
}

TEST(CheckpointStateTest, ParsesFilesWrittenByTensorFlow) {
  // As TF writes it (absolute path, no timestamps).
  absl::StatusOr<CheckpointState> s =
      ParseCheckpointState("c",
                           "model_checkpoint_path: \"/tmp/m/model.ckpt-5\"\n"
                           "all_model_checkpoint_paths: \"/tmp/m/model.ckpt-5\"\n");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->model_checkpoint_path, "/tmp/m/model.ckpt-5");
  for (const char* bad : {"model_checkpoint_path \"x\"", "model_checkpoint_path: x", "bogus: \"x\"",
                          "last_preserved_timestamp: abc"}) {
    absl::StatusOr<CheckpointState> r = ParseCheckpointState("/d/checkpoint", bad);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("/d/checkpoint:1"));
  }
}

TEST(CheckpointStateTest, LatestCheckpointResolvesRelativePaths) {
  TempDir tmp;
  const std::string& dir = tmp.path();
  EXPECT_EQ(LatestCheckpoint(dir).status().code(), absl::StatusCode::kNotFound);
  CheckpointState s;
  s.model_checkpoint_path = env::JoinPath(dir, "model.ckpt-7");
  s.all_model_checkpoint_paths = {s.model_checkpoint_path};
  s.all_model_checkpoint_timestamps = {1};
  ASSERT_TRUE(WriteCheckpointState(dir, s).ok());
  absl::StatusOr<std::string> text = env::ReadFile(env::JoinPath(dir, "checkpoint"));
  ASSERT_TRUE(text.ok());
  EXPECT_THAT(*text, HasSubstr("model_checkpoint_path: \"model.ckpt-7\"\n"));  // Relative.
  absl::StatusOr<std::string> latest = LatestCheckpoint(dir);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, env::JoinPath(dir, "model.ckpt-7"));
}

TEST(CheckpointStateTest, MaxToKeepDeletesOldest) {
  TempDir tmp;
  const std::string& dir = tmp.path();
  CheckpointRetention retention(/*max_to_keep=*/2, /*keep_every_n_hours=*/10000, /*start=*/0);
  for (int step : {100, 200, 300, 400}) {
    std::string prefix = FakeCheckpoint(dir, step);
    ASSERT_TRUE(retention.RecordSave(dir, prefix, 1000.0 + step).ok());
  }
  absl::StatusOr<std::vector<std::string>> files = env::ListDir(dir);
  ASSERT_TRUE(files.ok());
  EXPECT_THAT(
      *files,
      ElementsAre("checkpoint", "model.ckpt-300-00000-of-00002.safetensors",
                  "model.ckpt-300-00001-of-00002.safetensors", "model.ckpt-300.index.json",
                  "model.ckpt-400-00000-of-00002.safetensors",
                  "model.ckpt-400-00001-of-00002.safetensors", "model.ckpt-400.index.json"));
  absl::StatusOr<CheckpointState> s = ReadCheckpointState(dir);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->model_checkpoint_path, env::JoinPath(dir, "model.ckpt-400"));
  EXPECT_THAT(s->all_model_checkpoint_paths, ElementsAre(env::JoinPath(dir, "model.ckpt-300"),
                                                         env::JoinPath(dir, "model.ckpt-400")));
  EXPECT_THAT(s->all_model_checkpoint_timestamps, ElementsAre(1300.0, 1400.0));
}

TEST(CheckpointStateTest, KeepEveryNHoursPreservesOnePerPeriod) {
  TempDir tmp;
  const std::string& dir = tmp.path();
  // max_to_keep 1, keep one per hour; saves every 20 minutes from t=0.
  CheckpointRetention retention(1, /*keep_every_n_hours=*/1.0, /*start=*/0);
  for (int i = 1; i <= 7; ++i) {
    std::string prefix = FakeCheckpoint(dir, i);
    ASSERT_TRUE(retention.RecordSave(dir, prefix, i * 1200.0).ok());
  }
  // Falling off: 1 (1200 s), 2 (2400), 3 (3600: preserved, >= 0 + 3600), 4, 5, 6 (7200:
  // preserved, >= 3600 + 3600). Listed: 7.
  for (int i = 1; i <= 7; ++i) {
    bool want = i == 3 || i == 6 || i == 7;
    EXPECT_EQ(env::FileExists(IndexPath(env::JoinPath(dir, CheckpointBaseName(i)))), want) << i;
  }
  absl::StatusOr<CheckpointState> s = ReadCheckpointState(dir);
  ASSERT_TRUE(s.ok());
  EXPECT_THAT(s->all_model_checkpoint_paths, ElementsAre(env::JoinPath(dir, "model.ckpt-7")));
  EXPECT_EQ(s->last_preserved_timestamp, 7200.0);
}

TEST(CheckpointStateTest, ResavingAStepMovesItToTheEnd) {
  TempDir tmp;
  const std::string& dir = tmp.path();
  CheckpointRetention retention(5, 10000, 0);
  std::string a = FakeCheckpoint(dir, 1), b = FakeCheckpoint(dir, 2);
  ASSERT_TRUE(retention.RecordSave(dir, a, 1).ok());
  ASSERT_TRUE(retention.RecordSave(dir, b, 2).ok());
  ASSERT_TRUE(retention.RecordSave(dir, a, 3).ok());
  absl::StatusOr<CheckpointState> s = ReadCheckpointState(dir);
  ASSERT_TRUE(s.ok());
  EXPECT_THAT(s->all_model_checkpoint_paths, ElementsAre(b, a));
  EXPECT_EQ(s->model_checkpoint_path, a);
}

// A missing, empty or garbled state file beside checkpoints is rebuilt from the index
// files, so training resumes from the newest instead of starting over.
TEST(CheckpointStateTest, DamagedStateFileIsRebuiltFromIndexFiles) {
  TempDir tmp;
  const std::string& dir = tmp.path();
  EXPECT_TRUE(absl::IsNotFound(LatestCheckpoint(dir).status()));
  FakeCheckpoint(dir, 100);
  std::string newest = FakeCheckpoint(dir, 1000);
  FakeCheckpoint(dir, 300);
  for (const char* state : {static_cast<const char*>(nullptr), "", "garbage {\n"}) {
    if (state != nullptr) {
      ASSERT_TRUE(env::WriteFileAtomic(dir + "/checkpoint", state).ok());
    }
    absl::StatusOr<std::string> latest = LatestCheckpoint(dir);
    ASSERT_TRUE(latest.ok()) << latest.status();
    EXPECT_EQ(*latest, newest);
    absl::StatusOr<CheckpointState> rebuilt = ReadOrRebuildCheckpointState(dir);
    ASSERT_TRUE(rebuilt.ok());
    EXPECT_THAT(rebuilt->all_model_checkpoint_paths,
                ElementsAre(dir + "/model.ckpt-100", dir + "/model.ckpt-300", newest));
  }
  // The next save keeps the rebuilt list and applies retention to it.
  CheckpointRetention retention(3, 10000);
  std::string next = FakeCheckpoint(dir, 1100);
  ASSERT_TRUE(retention.RecordSave(dir, next, 5).ok());
  absl::StatusOr<CheckpointState> state = ReadCheckpointState(dir);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_THAT(state->all_model_checkpoint_paths,
              ElementsAre(dir + "/model.ckpt-300", newest, next));
  EXPECT_FALSE(env::FileExists(dir + "/model.ckpt-100.index.json"));
}

// Retention writes the state file before deleting: when writing it fails, nothing
// listed loses its files.
TEST(CheckpointStateTest, NoFileIsDeletedWhenTheStateFileCannotBeWritten) {
  TempDir tmp;
  const std::string& dir = tmp.path();
  FakeCheckpoint(dir, 1);
  FakeCheckpoint(dir, 2);
  ASSERT_TRUE(env::MakeDirs(dir + "/checkpoint").ok());  // Renaming onto it fails.
  CheckpointRetention retention(2, 10000);
  std::string third = FakeCheckpoint(dir, 3);
  EXPECT_FALSE(retention.RecordSave(dir, third, 10).ok());
  EXPECT_TRUE(env::FileExists(dir + "/model.ckpt-1.index.json"));
  EXPECT_TRUE(env::FileExists(dir + "/model.ckpt-1-00000-of-00002.safetensors"));
}

TEST(CheckpointStateTest, TempFilesOfInterruptedWritesGoAtTheFirstSave) {
  TempDir tmp;
  const std::string& dir = tmp.path();
  for (const char* f : {"model.ckpt-5.index.json.tmp.123", "checkpoint.tmp.9",
                        "model.ckpt-5-00000-of-00001.safetensors.tmp.77", "notes.txt.tmp.1"}) {
    ASSERT_TRUE(env::WriteFileAtomic(env::JoinPath(dir, f), "partial").ok());
  }
  CheckpointRetention retention(5, 10000);
  ASSERT_TRUE(retention.RecordSave(dir, FakeCheckpoint(dir, 10), 1).ok());
  EXPECT_FALSE(env::FileExists(dir + "/model.ckpt-5.index.json.tmp.123"));
  EXPECT_FALSE(env::FileExists(dir + "/checkpoint.tmp.9"));
  EXPECT_FALSE(env::FileExists(dir + "/model.ckpt-5-00000-of-00001.safetensors.tmp.77"));
  EXPECT_TRUE(env::FileExists(dir + "/notes.txt.tmp.1"));  // Not a checkpoint file.
  EXPECT_EQ(RemoveStaleTempFiles(dir), 0);
}

}  // namespace
}  // namespace tandem::checkpoint

// Saver end to end on a DirectSession: round trip, the files on disk read by hand,
// corruption and mismatch errors naming file and tensor, RestoreLatest's fallback,
// retention, and the one-shard-per-device path.
#include "checkpoint/saver.h"

#include <cstring>
#include <fstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "checkpoint/checkpoint_index.h"
#include "checkpoint/checkpoint_state.h"
#include "framework/core/env.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/optimizer.h"
#include "framework/ops/state_ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/checkpoint/checkpoint_files.h"
#include "tests/util/temp_dir.h"

namespace tandem::checkpoint {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

constexpr char kShard100[] = "model.ckpt-100-00000-of-00001.safetensors";

using ::tandem::testing::FlipOneByte;
using ::tandem::testing::TempDir;
using ::tandem::testing::TensorByteRange;

struct ModelOptions {
  TensorShape kernel_shape{3, 2};
  bool extra_variable = false;
  std::string second_device;  // If set, bias lives there (a second shard).
  SaverOptions saver;
};

// dense/kernel, dense/bias and global_step; Train() adds 1 to the kernel, (2, 3) to
// the bias and 50 to the step.
class TinyModel {
 public:
  explicit TinyModel(ModelOptions o = {}) {
    Scope dense = root_.NewSubScope("dense");
    ops::Variable kernel(dense, "kernel",
                         ops::Const(dense, Tensor::Filled(DType::kFloat, o.kernel_shape, 0.5)));
    Scope bias_scope = o.second_device.empty() ? dense : dense.WithDevice(o.second_device);
    ops::Variable bias(bias_scope, "bias", ops::Const(bias_scope, {0.f, 0.f}, TensorShape({2})));
    if (o.extra_variable) ops::Variable extra(dense, "extra", ops::Const(dense, 1.0f));
    ops::Variable step = ops::GetOrCreateGlobalStep(root_);
    train_ = {
        ops::AssignAdd(root_, kernel,
                       ops::Const(root_, Tensor::Filled(DType::kFloat, o.kernel_shape, 1.0)))
            .node->name(),
        ops::AssignAdd(root_, bias, ops::Const(root_, {2.f, 3.f}, TensorShape({2}))).node->name(),
        ops::AssignAdd(root_, step, ops::Const(root_, Tensor::Scalar<int64_t>(50))).node->name()};
    fetches_ = {kernel.value().name(), bias.value().name(), step.value().name()};
    init_ = ops::GlobalVariablesInitializer(root_)->name();
    absl::StatusOr<std::unique_ptr<Saver>> saver = Saver::Create(root_.graph(), o.saver);
    EXPECT_TRUE(saver.ok()) << saver.status();
    saver_ = std::move(saver).value();
    EXPECT_TRUE(root_.ok()) << root_.status();
  }

  // A fresh session with initialised (not trained) variables.
  std::unique_ptr<Session> NewSession() {
    proto::GraphDef def;
    root_.graph()->ToGraphDef(&def);
    auto session = NewDirectSession(def);
    EXPECT_TRUE(session.ok()) << session.status();
    EXPECT_TRUE((*session)->Run({}, {}, {init_}).ok());
    return std::move(session).value();
  }
  void Train(Session* s) { ASSERT_TRUE(s->Run({}, {}, train_).ok()); }
  // kernel, bias, global_step.
  std::vector<Tensor> Values(Session* s) {
    auto out = s->Run({}, fetches_);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : std::vector<Tensor>();
  }
  Saver& saver() { return *saver_; }

 private:
  Scope root_ = Scope::NewRootScope();
  std::vector<std::string> train_;
  std::vector<std::string> fetches_;
  std::string init_;
  std::unique_ptr<Saver> saver_;
};

void ExpectSameValues(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].dtype(), b[i].dtype()) << i;
    ASSERT_EQ(a[i].shape(), b[i].shape()) << i;
    for (int64_t j = 0; j < a[i].NumElements(); ++j) {
      EXPECT_EQ(a[i].ValueAsDouble(j), b[i].ValueAsDouble(j)) << i << "[" << j << "]";
    }
  }
}

// Saves the tiny model after two training steps (global_step 100) at `step`.
std::vector<Tensor> SaveTinyModel(const std::string& dir, int64_t step, int train_steps = 2) {
  TinyModel model;
  auto session = model.NewSession();
  for (int i = 0; i < train_steps; ++i) model.Train(session.get());
  absl::StatusOr<std::string> prefix = model.saver().Save(session.get(), dir, step);
  EXPECT_TRUE(prefix.ok()) << prefix.status();
  return model.Values(session.get());
}

absl::Status RestoreTinyModel(const std::string& dir, ModelOptions o = {}) {
  TinyModel model(o);
  auto session = model.NewSession();
  return model.saver().Restore(session.get(), env::JoinPath(dir, "model.ckpt-100"));
}

TEST(SaverTest, RoundTripRestoresValuesAndGlobalStep) {
  TempDir dir;
  TinyModel model;
  auto session = model.NewSession();
  model.Train(session.get());
  model.Train(session.get());
  absl::StatusOr<std::string> prefix = model.saver().Save(session.get(), dir.path(), 100);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  EXPECT_EQ(*prefix, dir.File("model.ckpt-100"));
  std::vector<Tensor> saved = model.Values(session.get());
  EXPECT_EQ(saved[2].scalar<int64_t>(), 100);
  EXPECT_THAT(*env::ListDir(dir.path()),
              ElementsAre("checkpoint", kShard100, "model.ckpt-100.index.json"));
  EXPECT_EQ(*LatestCheckpoint(dir.path()), *prefix);

  auto fresh = model.NewSession();
  EXPECT_EQ(model.Values(fresh.get())[2].scalar<int64_t>(), 0);
  ASSERT_TRUE(model.saver().Restore(fresh.get(), *prefix).ok());
  ExpectSameValues(model.Values(fresh.get()), saved);

  // A Saver of an identically built graph restores too (a new process).
  TinyModel other;
  auto other_session = other.NewSession();
  absl::StatusOr<std::string> restored =
      other.saver().RestoreLatest(other_session.get(), dir.path());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(*restored, *prefix);
  ExpectSameValues(other.Values(other_session.get()), saved);
}

// A bfloat16 variable is saved as a safetensors BF16 tensor (two bytes per value, the
// bits unchanged) and restored bit for bit into a fresh session.
TEST(SaverTest, Bfloat16VariableRoundTripsAsBF16) {
  TempDir dir;
  // The variable "half", initialised to three values (or to zeros).
  auto build = [](Scope& root, std::string* init, bool zeros) {
    Tensor value(DType::kBFloat16, TensorShape({3}));
    const float values[] = {1.0f / 3.0f, -2.5f, 1e-3f};
    for (int i = 0; i < 3; ++i) value.data<bfloat16>()[i] = bfloat16(zeros ? 0.0f : values[i]);
    ops::Variable v(root, "half", ops::Const(root, value));
    *init = ops::GlobalVariablesInitializer(root)->name();
    return v.value().name();
  };
  Scope root = Scope::NewRootScope();
  std::string init;
  const std::string fetch = build(root, &init, /*zeros=*/false);
  auto saver = Saver::Create(root.graph(), {});
  ASSERT_TRUE(saver.ok()) << saver.status();
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  auto session = NewDirectSession(def);
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE((*session)->Run({}, {}, {init}).ok());
  auto prefix = (*saver)->Save(session->get(), dir.path(), 7);
  ASSERT_TRUE(prefix.ok()) << prefix.status();

  std::ifstream in(dir.File("model.ckpt-7-00000-of-00001.safetensors"), std::ios::binary);
  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 8);
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  json h = json::parse(header);
  EXPECT_EQ(h["half"]["dtype"], "BF16");
  EXPECT_EQ(
      h["half"]["data_offsets"][1].get<int64_t>() - h["half"]["data_offsets"][0].get<int64_t>(), 6);

  Scope root2 = Scope::NewRootScope();
  std::string init2;
  const std::string fetch2 = build(root2, &init2, /*zeros=*/true);
  auto saver2 = Saver::Create(root2.graph(), {});
  ASSERT_TRUE(saver2.ok());
  proto::GraphDef def2;
  root2.graph()->ToGraphDef(&def2);
  auto fresh = NewDirectSession(def2);
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE((*fresh)->Run({}, {}, {init2}).ok());  // Zeros: the restore must change them.
  auto before = (*session)->Run({}, {fetch});
  ASSERT_TRUE((*saver2)->Restore(fresh->get(), *prefix).ok());
  auto after = (*fresh)->Run({}, {fetch2});
  ASSERT_TRUE(before.ok() && after.ok());
  ASSERT_EQ((*after)[0].dtype(), DType::kBFloat16);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ((*after)[0].data<bfloat16>()[i].bits, (*before)[0].data<bfloat16>()[i].bits) << i;
  }
}

// The shard and index read without the reader: the safetensors spec by hand.
TEST(SaverTest, ShardAndIndexParsedByHand) {
  TempDir dir;
  std::vector<Tensor> saved = SaveTinyModel(dir.path(), 100);
  std::string bytes = *env::ReadFile(dir.File(kShard100));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  ASSERT_LE(8 + n, bytes.size());
  json header = json::parse(bytes.substr(8, n), nullptr, false);
  ASSERT_FALSE(header.is_discarded());
  const std::string data = bytes.substr(8 + n);
  struct Want {
    const char* name;
    const char* dtype;
    std::vector<int64_t> shape;
    const Tensor& value;
  };
  for (const Want& w :
       {Want{"dense/kernel", "F32", {3, 2}, saved[0]}, Want{"dense/bias", "F32", {2}, saved[1]},
        Want{"global_step", "I64", {}, saved[2]}}) {
    SCOPED_TRACE(w.name);
    ASSERT_TRUE(header.contains(w.name));
    EXPECT_EQ(header[w.name]["dtype"], w.dtype);
    EXPECT_EQ(header[w.name]["shape"].get<std::vector<int64_t>>(), w.shape);
    size_t begin = header[w.name]["data_offsets"][0], end = header[w.name]["data_offsets"][1];
    ASSERT_EQ(end - begin, w.value.TotalBytes());
    ASSERT_LE(end, data.size());
    EXPECT_EQ(std::memcmp(data.data() + begin, w.value.raw_data(), end - begin), 0);
    EXPECT_TRUE(header["__metadata__"].contains(std::string("crc32c:") + w.name));
  }
  int64_t step;
  size_t step_begin = header["global_step"]["data_offsets"][0];
  std::memcpy(&step, data.data() + step_begin, 8);
  EXPECT_EQ(step, 100);

  json index = json::parse(*env::ReadFile(dir.File("model.ckpt-100.index.json")), nullptr, false);
  ASSERT_FALSE(index.is_discarded());
  EXPECT_EQ(index["metadata"]["global_step"], 100);
  EXPECT_EQ(index["metadata"]["format_version"], 1);
  EXPECT_EQ(
      index["weight_map"],
      json({{"dense/kernel", kShard100}, {"dense/bias", kShard100}, {"global_step", kShard100}}));
}

TEST(SaverTest, FlippedByteIsDetectedAndNamed) {
  TempDir dir;
  SaveTinyModel(dir.path(), /*step=*/100);
  const std::string shard = dir.File(kShard100);
  FlipOneByte(shard, TensorByteRange(shard, "dense/kernel").first + 5);

  absl::Status s = RestoreTinyModel(dir.path());

  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Msg(s), HasSubstr(kShard100));
  EXPECT_THAT(Msg(s), HasSubstr("dense/kernel"));
}

TEST(SaverTest, TruncatedShardIsDataLoss) {
  TempDir dir;
  SaveTinyModel(dir.path(), 100);
  std::string bytes = *env::ReadFile(dir.File(kShard100));
  ASSERT_TRUE(env::WriteFileAtomic(dir.File(kShard100), bytes.substr(0, bytes.size() - 3)).ok());
  absl::Status s = RestoreTinyModel(dir.path());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Msg(s), HasSubstr(kShard100));
  EXPECT_THAT(Msg(s), HasSubstr("truncated"));
}

TEST(SaverTest, MissingVariableIsNamed) {
  TempDir dir;
  SaveTinyModel(dir.path(), 100);
  absl::Status s = RestoreTinyModel(dir.path(), {.extra_variable = true});
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(s), HasSubstr("model.ckpt-100.index.json"));
  EXPECT_THAT(Msg(s), HasSubstr("dense/extra"));
}

TEST(SaverTest, ShapeMismatchIsNamed) {
  TempDir dir;
  SaveTinyModel(dir.path(), 100);
  absl::Status s = RestoreTinyModel(dir.path(), {.kernel_shape = TensorShape({4, 2})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), HasSubstr(kShard100));
  EXPECT_THAT(Msg(s), HasSubstr("dense/kernel has shape [3,2] in the checkpoint but [4,2]"));
}

TEST(SaverTest, MissingCheckpointFilesAreNotFound) {
  TempDir dir;
  SaveTinyModel(dir.path(), 100);
  ASSERT_TRUE(env::DeleteFile(dir.File(kShard100)).ok());
  absl::Status s = RestoreTinyModel(dir.path());
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(s), HasSubstr(kShard100));
}

TEST(SaverTest, RestoreLatestFallsBackFromACorruptNewestCheckpoint) {
  TempDir dir;
  TinyModel model;
  auto session = model.NewSession();
  model.Train(session.get());
  ASSERT_TRUE(model.saver().Save(session.get(), dir.path(), 50).ok());
  model.Train(session.get());
  ASSERT_TRUE(model.saver().Save(session.get(), dir.path(), 100).ok());
  std::vector<Tensor> at_100 = model.Values(session.get());
  model.Train(session.get());
  ASSERT_TRUE(model.saver().Save(session.get(), dir.path(), 150).ok());
  const std::string newest = dir.File("model.ckpt-150-00000-of-00001.safetensors");
  FlipOneByte(newest, TensorByteRange(newest, "dense/bias").first);

  auto fresh = model.NewSession();
  absl::StatusOr<std::string> restored = model.saver().RestoreLatest(fresh.get(), dir.path());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(*restored, dir.File("model.ckpt-100"));
  ExpectSameValues(model.Values(fresh.get()), at_100);

  // A missing shard also falls back; with nothing readable left it is DATA_LOSS (not
  // "no checkpoint", which would let a trainer start over).
  ASSERT_TRUE(env::DeleteFile(dir.File(kShard100)).ok());
  restored = model.saver().RestoreLatest(fresh.get(), dir.path());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(*restored, dir.File("model.ckpt-50"));
  ASSERT_TRUE(env::DeleteFile(dir.File("model.ckpt-50.index.json")).ok());
  absl::Status none = model.saver().RestoreLatest(fresh.get(), dir.path()).status();
  EXPECT_EQ(none.code(), absl::StatusCode::kDataLoss) << none;
  EXPECT_FALSE(IsNoCheckpoint(none));
}

// Replaces the first `from` in `path` by `to` (same length), keeping the file valid
// JSON/safetensors in shape: a name, dtype or file reference changed on disk.
void ReplaceOnce(const std::string& path, const std::string& from, const std::string& to) {
  ASSERT_EQ(from.size(), to.size());
  std::string bytes = *env::ReadFile(path);
  size_t at = bytes.find(from);
  ASSERT_NE(at, std::string::npos) << from << " not in " << path;
  bytes.replace(at, from.size(), to);
  ASSERT_TRUE(env::WriteFileAtomic(path, bytes).ok());
}

// A changed byte in an index key or a shard header is corruption (DATA_LOSS, so
// RestoreLatest falls back), not a model that does not fit the checkpoint.
TEST(SaverTest, ChangedNamesAndDtypesInHeadersAreCorruption) {
  struct Case {
    const char* file;
    const char* from;
    const char* to;
  };
  for (const Case& c : {Case{"model.ckpt-100.index.json", "\"dense/kernel\"", "\"dense/kernes\""},
                        Case{kShard100, "\"dense/kernel\"", "\"dense/kernes\""},
                        Case{kShard100, "\"F32\"", "\"I32\""}}) {
    TempDir dir;
    SaveTinyModel(dir.path(), 50, 1);
    SaveTinyModel(dir.path(), 100);
    ReplaceOnce(dir.File(c.file), c.from, c.to);

    absl::Status s = RestoreTinyModel(dir.path());
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << c.file << " " << c.to << ": " << s;
    EXPECT_THAT(Msg(s), HasSubstr(c.file));
    TinyModel model;
    auto session = model.NewSession();
    absl::StatusOr<std::string> restored = model.saver().RestoreLatest(session.get(), dir.path());
    ASSERT_TRUE(restored.ok()) << restored.status();
    EXPECT_EQ(*restored, dir.File("model.ckpt-50"));
  }
}

// The writer of model_dir sets unreadable newer checkpoints aside when it restores an
// older one, so the save at their step does not overwrite them; readers (evaluation)
// leave the directory alone.
TEST(SaverTest, UnreadableNewerCheckpointsAreSetAsideNotOverwritten) {
  TempDir dir;
  SaveTinyModel(dir.path(), 50, 1);
  SaveTinyModel(dir.path(), 100);
  const std::string shard = dir.File(kShard100);
  FlipOneByte(shard, TensorByteRange(shard, "dense/bias").first);
  const std::string damaged = *env::ReadFile(shard);

  TinyModel model;
  auto session = model.NewSession();
  ASSERT_EQ(*model.saver().RestoreLatest(session.get(), dir.path()), dir.File("model.ckpt-50"));
  EXPECT_EQ(*env::ReadFile(shard), damaged);  // A reader changes nothing.
  ASSERT_EQ(*model.saver().RestoreLatest(session.get(), dir.path(), /*set_aside_unreadable=*/true),
            dir.File("model.ckpt-50"));
  EXPECT_FALSE(env::FileExists(shard));
  EXPECT_EQ(*env::ReadFile(shard + ".unreadable"), damaged);
  EXPECT_TRUE(env::FileExists(dir.File("model.ckpt-100.index.json.unreadable")));
  absl::StatusOr<CheckpointState> state = ReadCheckpointState(dir.path());
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->model_checkpoint_path, dir.File("model.ckpt-50"));
  EXPECT_THAT(state->all_model_checkpoint_paths, ElementsAre(dir.File("model.ckpt-50")));

  // Training goes on and saves step 100 again: the damaged files stay as they were.
  model.Train(session.get());
  ASSERT_TRUE(model.saver().Save(session.get(), dir.path(), 100).ok());
  EXPECT_EQ(*env::ReadFile(shard + ".unreadable"), damaged);
  EXPECT_EQ(*LatestCheckpoint(dir.path()), dir.File("model.ckpt-100"));
}

TEST(SaverTest, RestoreLatestSurvivesACorruptStateFile) {
  TempDir dir;
  SaveTinyModel(dir.path(), 900, /*train_steps=*/1);
  std::vector<Tensor> at_1000 = SaveTinyModel(dir.path(), 1000, /*train_steps=*/3);
  // Garbled, empty or missing: the newest index file is restored, never a fresh start.
  for (const char* state : {"garbage\n", "", static_cast<const char*>(nullptr)}) {
    if (state != nullptr) {
      ASSERT_TRUE(env::WriteFileAtomic(dir.File("checkpoint"), state).ok());
    } else {
      ASSERT_TRUE(env::DeleteFile(dir.File("checkpoint")).ok());
    }
    TinyModel model;
    auto session = model.NewSession();
    absl::StatusOr<std::string> restored = model.saver().RestoreLatest(session.get(), dir.path());
    ASSERT_TRUE(restored.ok()) << restored.status();
    EXPECT_EQ(*restored, dir.File("model.ckpt-1000"));  // Numeric, not lexicographic, order.
    ExpectSameValues(model.Values(session.get()), at_1000);
  }
}

TEST(SaverTest, RestoreLatestReportsMismatchesAndEmptyDirs) {
  TempDir dir;
  TinyModel other({.kernel_shape = TensorShape({4, 2})});
  auto session = other.NewSession();
  absl::Status empty = other.saver().RestoreLatest(session.get(), dir.path()).status();
  EXPECT_EQ(empty.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(IsNoCheckpoint(empty));
  SaveTinyModel(dir.path(), 100);
  // A model that does not fit is an error, not a reason to try older checkpoints.
  EXPECT_EQ(other.saver().RestoreLatest(session.get(), dir.path()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SaverTest, MaxToKeepTwoLeavesTheTwoNewest) {
  TempDir dir;
  TinyModel model({.saver = {.max_to_keep = 2}});
  auto session = model.NewSession();
  for (int step : {100, 200, 300, 400}) {
    model.Train(session.get());
    ASSERT_TRUE(model.saver().Save(session.get(), dir.path(), step).ok());
  }
  EXPECT_THAT(*env::ListDir(dir.path()),
              ElementsAre("checkpoint", "model.ckpt-300-00000-of-00001.safetensors",
                          "model.ckpt-300.index.json", "model.ckpt-400-00000-of-00001.safetensors",
                          "model.ckpt-400.index.json"));
  absl::StatusOr<CheckpointState> state = ReadCheckpointState(dir.path());
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_THAT(state->all_model_checkpoint_paths,
              ElementsAre(dir.File("model.ckpt-300"), dir.File("model.ckpt-400")));
  EXPECT_EQ(state->model_checkpoint_path, dir.File("model.ckpt-400"));
}

TEST(SaverTest, StateFileIsTensorFlowText) {
  TempDir dir;
  TinyModel model;
  auto session = model.NewSession();
  ASSERT_TRUE(model.saver().Save(session.get(), dir.path(), 100).ok());
  ASSERT_TRUE(model.saver().Save(session.get(), dir.path(), 200).ok());
  std::string text = *env::ReadFile(dir.File("checkpoint"));
  std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 6u) << text;
  EXPECT_EQ(lines[0], "model_checkpoint_path: \"model.ckpt-200\"");
  EXPECT_EQ(lines[1], "all_model_checkpoint_paths: \"model.ckpt-100\"");
  EXPECT_EQ(lines[2], "all_model_checkpoint_paths: \"model.ckpt-200\"");
  EXPECT_THAT(lines[3], HasSubstr("all_model_checkpoint_timestamps: "));
  EXPECT_THAT(lines[4], HasSubstr("all_model_checkpoint_timestamps: "));
  EXPECT_THAT(lines[5], HasSubstr("last_preserved_timestamp: "));
  double t;
  EXPECT_TRUE(absl::SimpleAtod(lines[4].substr(lines[4].find(':') + 1), &t));
  EXPECT_GT(t, 1.6e9);  // Seconds since the epoch.
}

// Variables on two devices: one shard each; partition info in the index.
TEST(SaverTest, OneShardPerDeviceAndSlices) {
  TempDir dir;
  ModelOptions o;
  o.second_device = "/job:localhost/replica:0/task:0/device:CPU:0";
  o.saver.partitions["dense/bias"] = {"dense/bias_full", {2}, {0}};
  TinyModel model(o);
  EXPECT_EQ(model.saver().NumShards(), 2);
  auto session = model.NewSession();
  model.Train(session.get());
  ASSERT_TRUE(model.saver().Save(session.get(), dir.path(), 100).ok());
  std::vector<Tensor> saved = model.Values(session.get());
  EXPECT_TRUE(env::FileExists(dir.File("model.ckpt-100-00000-of-00002.safetensors")));
  EXPECT_TRUE(env::FileExists(dir.File("model.ckpt-100-00001-of-00002.safetensors")));
  json index = json::parse(*env::ReadFile(dir.File("model.ckpt-100.index.json")), nullptr, false);
  EXPECT_EQ(index["weight_map"]["dense/bias"], "model.ckpt-100-00001-of-00002.safetensors");
  EXPECT_EQ(index["weight_map"]["dense/kernel"], "model.ckpt-100-00000-of-00002.safetensors");
  EXPECT_EQ(index["slices"]["dense/bias_full"]["full_shape"], json({2}));
  EXPECT_EQ(index["slices"]["dense/bias_full"]["parts"][0]["part"], "dense/bias");
  EXPECT_EQ(index["slices"]["dense/bias_full"]["parts"][0]["offset"], json({0}));
  EXPECT_EQ(index["slices"]["dense/bias_full"]["parts"][0]["shape"], json({2}));
  absl::StatusOr<CheckpointIndex> parsed = ReadIndex(dir.File("model.ckpt-100.index.json"));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->slices.size(), 1u);
  auto fresh = model.NewSession();
  ASSERT_TRUE(model.saver().Restore(fresh.get(), dir.File("model.ckpt-100")).ok());
  ExpectSameValues(model.Values(fresh.get()), saved);
}

TEST(SaverTest, TwoShardsRoundTrip) {
  TempDir dir;
  ModelOptions o;
  o.second_device = "/job:localhost/replica:0/task:0/device:CPU:0";
  TinyModel model(o);
  auto session = model.NewSession();
  model.Train(session.get());
  absl::StatusOr<std::string> prefix = model.saver().Save(session.get(), dir.path(), 100);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  std::vector<Tensor> saved = model.Values(session.get());
  auto fresh = model.NewSession();
  ASSERT_TRUE(model.saver().Restore(fresh.get(), *prefix).ok());
  ExpectSameValues(model.Values(fresh.get()), saved);
}

// Optimizer slots are colocated with their variable and request no device: they are
// saved in that variable's shard (on a cluster, the ps task that holds both).
TEST(SaverTest, ColocatedVariablesShareTheirVariablesShard) {
  TempDir dir;
  Scope root = Scope::NewRootScope();
  const std::string device = "/job:localhost/replica:0/task:0/device:CPU:0";
  Scope on_device = root.WithDevice(device);
  ops::Variable var(on_device, "var", ops::Const(on_device, 1.0f));
  Scope colocated = root.ColocateWith(var.handle().node);
  ops::Variable slot(colocated, "var/slot", ops::Const(colocated, 2.0f));
  ops::Variable other(root, "other", ops::Const(root, 3.0f));
  ASSERT_TRUE(slot.handle().node->requested_device().empty());
  Node* init = ops::GlobalVariablesInitializer(root);
  absl::StatusOr<std::unique_ptr<Saver>> saver = Saver::Create(root.graph(), {});
  ASSERT_TRUE(saver.ok()) << saver.status();
  EXPECT_EQ((*saver)->NumShards(), 2);
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  auto session = NewDirectSession(def);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Run({}, {}, {init->name()}).ok());
  ASSERT_TRUE((*saver)->Save(session->get(), dir.path(), 7).ok());
  json index = json::parse(*env::ReadFile(dir.File("model.ckpt-7.index.json")), nullptr, false);
  EXPECT_EQ(index["weight_map"]["var"], "model.ckpt-7-00001-of-00002.safetensors");
  EXPECT_EQ(index["weight_map"]["var/slot"], "model.ckpt-7-00001-of-00002.safetensors");
  EXPECT_EQ(index["weight_map"]["other"], "model.ckpt-7-00000-of-00002.safetensors");
}

TEST(SaverTest, ConcurrentSavesAreSerialised) {
  TempDir dir;
  TinyModel model({.saver = {.max_to_keep = 10}});
  auto session = model.NewSession();
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(4);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      results[i] = model.saver().Save(session.get(), dir.path(), 10 * (i + 1)).status();
    });
  }
  for (auto& t : threads) t.join();
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  absl::StatusOr<CheckpointState> state = ReadCheckpointState(dir.path());
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->all_model_checkpoint_paths.size(), 4u);
  EXPECT_EQ(state->all_model_checkpoint_timestamps.size(), 4u);
}

TEST(SaverTest, CreateRejectsBadPartitions) {
  Scope root = Scope::NewRootScope();
  ops::Variable v(root, "v", ops::Const(root, 1.0f));
  SaverOptions o;
  o.partitions["nope"] = {"full", {2}, {0}};
  absl::StatusOr<std::unique_ptr<Saver>> saver = Saver::Create(root.graph(), o);
  EXPECT_EQ(saver.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(saver.status()), HasSubstr("nope"));
  // Parts that do not tile their full tensor.
  o.partitions.clear();
  o.partitions["v"] = {"full", {2}, {0}};  // v is a scalar.
  saver = Saver::Create(root.graph(), o);
  EXPECT_EQ(saver.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(saver.status()), HasSubstr("full"));
}

}  // namespace
}  // namespace tandem::checkpoint

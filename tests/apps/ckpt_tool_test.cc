// The ckpt tool's commands on real checkpoints written by checkpoint::Saver (and one
// hand-written partitioned checkpoint): ls of a model directory and of a prefix, verify
// catching a flipped byte and a truncated shard by file and tensor, dump, and export
// round-tripping through the safetensors reader (and a reader that knows only the format).
#include "apps/ckpt/ckpt_tool.h"

#include <cstring>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "checkpoint/checkpoint_index.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/saver.h"
#include "framework/core/env.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/optimizer.h"
#include "framework/ops/state_ops.h"
#include "framework/runtime/direct_session.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/checkpoint/checkpoint_files.h"
#include "tests/util/temp_dir.h"

namespace tandem::ckpt {
namespace {

using checkpoint::CheckpointBaseName;
using checkpoint::CheckpointIndex;
using checkpoint::IndexPath;
using checkpoint::NamedTensor;
using checkpoint::SafetensorsFile;
using checkpoint::ShardFileName;
using checkpoint::WriteIndex;
using checkpoint::WriteSafetensors;
using ::testing::_;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

constexpr char kShard100[] = "model.ckpt-100-00000-of-00001.safetensors";
constexpr char kShard200[] = "model.ckpt-200-00000-of-00001.safetensors";

using ::tandem::testing::FlipOneByte;
using ::tandem::testing::TempDir;
using ::tandem::testing::TensorByteRange;
using ::tandem::testing::WritePartitionedCheckpoint;

// dense/kernel [3,2] (0.5 + steps), dense/bias [2] ((2, 3) * steps) and global_step
// (50 * steps), saved with a Saver on a DirectSession at the given steps.
void SaveModel(const std::string& dir, const std::vector<int64_t>& save_at_steps) {
  Scope root = Scope::NewRootScope();
  Scope dense = root.NewSubScope("dense");
  ops::Variable kernel(dense, "kernel",
                       ops::Const(dense, Tensor::Filled(DType::kFloat, TensorShape({3, 2}), 0.5)));
  ops::Variable bias(dense, "bias", ops::Const(dense, {0.f, 0.f}, TensorShape({2})));
  ops::Variable step = ops::GetOrCreateGlobalStep(root);
  std::vector<std::string> train = {
      ops::AssignAdd(root, kernel,
                     ops::Const(root, Tensor::Filled(DType::kFloat, TensorShape({3, 2}), 1.0)))
          .node->name(),
      ops::AssignAdd(root, bias, ops::Const(root, {2.f, 3.f}, TensorShape({2}))).node->name(),
      ops::AssignAdd(root, step, ops::Const(root, Tensor::Scalar<int64_t>(50))).node->name()};
  std::string init = ops::GlobalVariablesInitializer(root)->name();
  auto saver = checkpoint::Saver::Create(root.graph());
  ASSERT_TRUE(saver.ok()) << saver.status();
  ASSERT_TRUE(root.ok()) << root.status();
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  auto session = NewDirectSession(def);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Run({}, {}, {init}).ok());
  int64_t trained = 0;
  for (int64_t at : save_at_steps) {
    for (; trained < at / 50; ++trained) ASSERT_TRUE((*session)->Run({}, {}, train).ok());
    auto prefix = (*saver)->Save(session->get(), dir, at);
    ASSERT_TRUE(prefix.ok()) << prefix.status();
  }
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

// The first line of `text` starting (after blanks) or ending with `word`, or "".
std::string LineStarting(const std::string& text, const std::string& word) {
  for (const std::string& line : Lines(text)) {
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), word + " ")) return line;
  }
  return "";
}
std::string LineEnding(const std::string& text, const std::string& word) {
  for (const std::string& line : Lines(text)) {
    if (absl::EndsWith(line, " " + word)) return line;
  }
  return "";
}

std::vector<std::string> Words(const std::string& line) {
  return absl::StrSplit(line, ' ', absl::SkipEmpty());
}

TEST(CkptToolTest, ListModelDirMarksLatest) {
  TempDir dir;
  SaveModel(dir.path(), {100, 200});
  std::ostringstream out;
  ASSERT_TRUE(List(dir.path(), out).ok()) << out.str();
  const std::string text = out.str();
  EXPECT_THAT(text, HasSubstr("2 checkpoints (latest model.ckpt-200)"));
  std::string line100 = LineEnding(text, "model.ckpt-100");
  std::string line200 = LineEnding(text, "model.ckpt-200");
  // "*  200  1  1.2 KiB  2026-11-22 07:40:01 UTC  model.ckpt-200"
  EXPECT_THAT(Words(line200), ElementsAre("*", "200", "1", _, _, _, _, "UTC", "model.ckpt-200"));
  EXPECT_THAT(line100, Not(HasSubstr("*")));
  EXPECT_THAT(line100, HasSubstr(" 100 "));
  // The size column is the files on disk (index + shard).
  int64_t size =
      *env::FileSize(dir.File(kShard200)) + *env::FileSize(dir.File("model.ckpt-200.index.json"));
  EXPECT_THAT(line200, HasSubstr(size < 1024 ? absl::StrCat(size, " B") : "KiB"));
}

TEST(CkptToolTest, ListModelDirWithoutStateFileFindsIndexes) {
  TempDir dir;
  SaveModel(dir.path(), {100, 200});
  ASSERT_TRUE(env::DeleteFile(dir.File("checkpoint")).ok());
  absl::StatusOr<ResolvedPath> r = Resolve(dir.path());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->is_model_dir);
  EXPECT_THAT(r->prefixes, ElementsAre(dir.File("model.ckpt-100"), dir.File("model.ckpt-200")));
  EXPECT_EQ(r->latest, dir.File("model.ckpt-200"));
}

TEST(CkptToolTest, ListPrefixShowsTensors) {
  TempDir dir;
  SaveModel(dir.path(), {100});
  std::ostringstream out;
  ASSERT_TRUE(List(dir.File("model.ckpt-100"), out).ok()) << out.str();
  const std::string text = out.str();
  EXPECT_THAT(text, HasSubstr("global_step 100, 1 shard(s), 3 tensor(s)"));
  EXPECT_THAT(Words(LineStarting(text, "dense/kernel")),
              ElementsAre("dense/kernel", "float32", "[3,2]", kShard100));
  EXPECT_THAT(Words(LineStarting(text, "dense/bias")),
              ElementsAre("dense/bias", "float32", "[2]", kShard100));
  EXPECT_THAT(Words(LineStarting(text, "global_step")),
              ElementsAre("global_step", "int64", "[]", kShard100));
  // ".index.json" is accepted too.
  std::ostringstream again;
  ASSERT_TRUE(List(dir.File("model.ckpt-100.index.json"), again).ok());
  EXPECT_EQ(again.str(), text);
}

TEST(CkptToolTest, ListShowsPartitionedTensors) {
  TempDir dir;
  std::string prefix = WritePartitionedCheckpoint(dir.path());
  std::ostringstream out;
  ASSERT_TRUE(List(prefix, out).ok()) << out.str();
  const std::string text = out.str();
  EXPECT_THAT(LineStarting(text, "w/part_1"), HasSubstr("model.ckpt-7-00001-of-00002.safetensors"));
  EXPECT_THAT(text, HasSubstr("Partitioned tensors"));
  std::string w = Lines(text).back();
  EXPECT_THAT(w, ::testing::StartsWith("w "));
  EXPECT_THAT(w, HasSubstr("float32"));
  EXPECT_THAT(w, HasSubstr("[4,3]"));
  EXPECT_THAT(w, HasSubstr("w/part_0 (offset [0,0] shape [2,3])"));
  EXPECT_THAT(w, HasSubstr("w/part_2 (offset [2,2] shape [2,1])"));
}

TEST(CkptToolTest, VerifyOk) {
  TempDir dir;
  SaveModel(dir.path(), {100, 200});
  std::ostringstream out;
  ASSERT_TRUE(Verify(dir.File("model.ckpt-100"), out).ok());
  EXPECT_EQ(out.str(),
            absl::StrCat("OK ", dir.File("model.ckpt-100"), ": 3 tensors in 1 shards\n"));
  std::ostringstream all;
  ASSERT_TRUE(Verify(dir.path(), all).ok());
  EXPECT_THAT(Lines(all.str()), ElementsAre(HasSubstr("OK " + dir.File("model.ckpt-100")),
                                            HasSubstr("OK " + dir.File("model.ckpt-200"))));
}

TEST(CkptToolTest, VerifyNamesFileAndTensorOfFlippedByte) {
  TempDir dir;
  SaveModel(dir.path(), {100, 200});
  auto [begin, end] = TensorByteRange(dir.File(kShard100), "dense/kernel");
  FlipOneByte(dir.File(kShard100), begin + 5);

  std::ostringstream out;
  absl::Status s = Verify(dir.File("model.ckpt-100"), out);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Msg(s), HasSubstr(kShard100));
  EXPECT_THAT(Msg(s), HasSubstr("dense/kernel"));
  EXPECT_THAT(out.str(), Not(HasSubstr("OK")));

  // The model directory: one line per checkpoint, the failure counted.
  std::ostringstream all;
  s = Verify(dir.path(), all);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Msg(s), HasSubstr("1 of 2 checkpoints"));
  std::vector<std::string> lines = Lines(all.str());
  ASSERT_EQ(lines.size(), 2u) << all.str();
  EXPECT_THAT(lines[0], HasSubstr("FAILED " + dir.File("model.ckpt-100")));
  EXPECT_THAT(lines[0], HasSubstr("dense/kernel"));
  EXPECT_THAT(lines[1], HasSubstr("OK " + dir.File("model.ckpt-200")));
}

TEST(CkptToolTest, VerifyNamesTruncatedShard) {
  TempDir dir;
  SaveModel(dir.path(), {100});
  std::string bytes = *env::ReadFile(dir.File(kShard100));
  ASSERT_TRUE(env::WriteFileAtomic(dir.File(kShard100), bytes.substr(0, bytes.size() - 7)).ok());
  std::ostringstream out;
  absl::Status s = Verify(dir.path(), out);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(out.str(), HasSubstr(kShard100));
  s = Verify(dir.File("model.ckpt-100"), out);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Msg(s), HasSubstr(kShard100));
  // ls still lists what it can and reports the problem.
  std::ostringstream ls;
  s = List(dir.File("model.ckpt-100"), ls);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(Msg(s), HasSubstr(kShard100));
}

TEST(CkptToolTest, VerifyMissingShard) {
  TempDir dir;
  SaveModel(dir.path(), {100});
  ASSERT_TRUE(env::DeleteFile(dir.File(kShard100)).ok());
  std::ostringstream out;
  absl::Status s = Verify(dir.File("model.ckpt-100"), out);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(Msg(s), HasSubstr(kShard100));
  std::ostringstream ls;
  s = List(dir.path(), ls);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ls.str(), HasSubstr("missing shard file"));
}

TEST(CkptToolTest, BadPathsAreClearErrors) {
  TempDir dir;
  std::ostringstream out;
  absl::Status s = List(dir.File("nope/model.ckpt-1"), out);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(s), HasSubstr("model.ckpt-1.index.json"));
  s = Dump(dir.path(), "x", 20, out);  // An empty directory.
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(s), HasSubstr("no checkpoints"));
  SaveModel(dir.path(), {100});
  s = List(dir.File(kShard100), out);
  EXPECT_THAT(Msg(s), HasSubstr("not a shard file"));
}

TEST(CkptToolTest, DumpFloatTensor) {
  TempDir dir;
  SaveModel(dir.path(), {100});  // Two steps: kernel 2.5, bias (4, 6), step 100.
  std::ostringstream out;
  ASSERT_TRUE(Dump(dir.path(), "dense/bias", 20, out).ok());
  EXPECT_THAT(Lines(out.str()),
              ElementsAre("dense/bias: float32 [2], 2 values", "[4, 6]", "min 4  max 6  mean 5"));
  std::ostringstream limited;
  ASSERT_TRUE(Dump(dir.File("model.ckpt-100"), "dense/kernel", 2, limited).ok());
  EXPECT_THAT(Lines(limited.str()),
              ElementsAre("dense/kernel: float32 [3,2], 6 values", "[2.5, 2.5, ... (4 more)]",
                          "min 2.5  max 2.5  mean 2.5"));
}

TEST(CkptToolTest, DumpIntegerAndPartitionedTensors) {
  TempDir dir;
  SaveModel(dir.path(), {100});
  std::ostringstream step;
  ASSERT_TRUE(Dump(dir.path(), "global_step", 20, step).ok());
  EXPECT_THAT(Lines(step.str()), ElementsAre("global_step: int64 [], 1 value", "[100]"));

  std::string prefix = WritePartitionedCheckpoint(dir.path());
  std::ostringstream w;
  ASSERT_TRUE(Dump(prefix, "w", -1, w).ok());
  EXPECT_THAT(Lines(w.str()),
              ElementsAre("w: float32 [4,3], 12 values (assembled from 3 parts)",
                          "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]", "min 0  max 11  mean 5.5"));

  std::ostringstream none;
  absl::Status s = Dump(prefix, "nope", 20, none);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(s), HasSubstr("nope"));
}

TEST(CkptToolTest, ExportRoundTripsThroughSafetensorsReader) {
  TempDir dir;
  std::string prefix = WritePartitionedCheckpoint(dir.path());
  const std::string out_path = dir.File("export.safetensors");
  std::ostringstream out;
  ASSERT_TRUE(Export(prefix, out_path, out).ok());
  EXPECT_THAT(out.str(), HasSubstr("Exported 2 tensors"));

  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(out_path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT(file->TensorNames(), ElementsAre("bias", "w"));  // Parts left out.
  absl::StatusOr<Tensor> w = file->Read("w");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->shape(), TensorShape({4, 3}));
  EXPECT_THAT(w->flat<float>(), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
  absl::StatusOr<Tensor> bias = file->Read("bias");
  ASSERT_TRUE(bias.ok()) << bias.status();
  EXPECT_THAT(bias->flat<float>(), ElementsAre(9, 8));
  EXPECT_EQ(file->metadata().at("global_step"), "7");
  EXPECT_EQ(file->metadata().at("source"), prefix);

  // What any safetensors reader sees: header length, JSON header, raw LE data.
  std::string bytes = *env::ReadFile(out_path);
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  json header = json::parse(bytes.substr(8, n));
  EXPECT_EQ(header["w"]["dtype"], "F32");
  EXPECT_EQ(header["w"]["shape"], json({4, 3}));
  auto [begin, end] = TensorByteRange(out_path, "w");
  ASSERT_EQ(end - begin, 12 * sizeof(float));
  std::vector<float> raw(12);
  std::memcpy(raw.data(), bytes.data() + begin, end - begin);
  EXPECT_THAT(raw, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
  EXPECT_EQ(bytes.size(), 8 + n + 14 * sizeof(float));
}

TEST(CkptToolTest, ExportModelDirUsesLatest) {
  TempDir dir;
  SaveModel(dir.path(), {100, 200});
  const std::string out_path = dir.File("model.safetensors");
  std::ostringstream out;
  ASSERT_TRUE(Export(dir.path(), out_path, out).ok());
  EXPECT_THAT(out.str(), HasSubstr(dir.File("model.ckpt-200")));
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(out_path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT(file->TensorNames(), ElementsAre("dense/bias", "dense/kernel", "global_step"));
  absl::StatusOr<Tensor> kernel = file->Read("dense/kernel");
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->flat<float>(), ElementsAre(4.5, 4.5, 4.5, 4.5, 4.5, 4.5));
  absl::StatusOr<Tensor> step = file->Read("global_step");
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->scalar<int64_t>(), 200);
}

TEST(CkptToolTest, FailedExportLeavesOutputUntouched) {
  TempDir dir;
  SaveModel(dir.path(), {100});
  const std::string out_path = dir.File("model.safetensors");
  ASSERT_TRUE(env::WriteFileAtomic(out_path, "previous export").ok());
  auto [begin, end] = TensorByteRange(dir.File(kShard100), "dense/bias");
  FlipOneByte(dir.File(kShard100), begin);
  std::ostringstream out;
  absl::Status s = Export(dir.path(), out_path, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Msg(s), HasSubstr("dense/bias"));
  EXPECT_EQ(*env::ReadFile(out_path), "previous export");
  // No temporary file left behind either.
  EXPECT_THAT(
      *env::ListDir(dir.path()),
      ElementsAre("checkpoint", kShard100, "model.ckpt-100.index.json", "model.safetensors"));
  // Exporting onto the checkpoint's own shard is refused.
  s = Export(dir.path(), dir.File(kShard100), out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::ckpt

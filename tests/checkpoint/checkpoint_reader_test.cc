// CheckpointReader: stored tensors, partitioned tensors reassembled from their parts,
// and Verify catching corruption.
#include "checkpoint/checkpoint_reader.h"

#include "framework/core/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/checkpoint/checkpoint_files.h"

namespace tandem::checkpoint {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using ::tandem::testing::WritePartitionedCheckpoint;

TEST(CheckpointReaderTest, ReadsStoredAndPartitionedTensors) {
  std::string dir = *env::MakeTempDir("ckpt_reader_test");
  std::string prefix = WritePartitionedCheckpoint(dir);
  auto reader = CheckpointReader::Open(prefix);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_THAT((*reader)->TensorNames(), ElementsAre("bias", "w/part_0", "w/part_1", "w/part_2"));
  EXPECT_EQ((*reader)->index().global_step, 7);
  absl::StatusOr<Tensor> w = (*reader)->Read("w");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->shape(), TensorShape({4, 3}));
  EXPECT_THAT(w->flat<float>(), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
  absl::StatusOr<Tensor> bias = (*reader)->Read("bias");
  ASSERT_TRUE(bias.ok()) << bias.status();
  EXPECT_THAT(bias->flat<float>(), ElementsAre(9, 8));
  absl::StatusOr<Tensor> missing = (*reader)->Read("nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("model.ckpt-7.index.json"));
  EXPECT_TRUE((*reader)->Verify().ok());
  ASSERT_TRUE(env::DeleteRecursively(dir).ok());
}

TEST(CheckpointReaderTest, VerifyFindsCorruption) {
  std::string dir = *env::MakeTempDir("ckpt_reader_test");
  std::string prefix = WritePartitionedCheckpoint(dir);
  const std::string shard = env::JoinPath(dir, ShardFileName(prefix, 1, 2));
  std::string bytes = *env::ReadFile(shard);
  bytes[bytes.size() - 1] ^= 0x40;  // The last byte belongs to w/part_2.
  ASSERT_TRUE(env::WriteFileAtomic(shard, bytes).ok());
  auto reader = CheckpointReader::Open(prefix);
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::Status s = (*reader)->Verify();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(s.message()), HasSubstr("model.ckpt-7-00001-of-00002.safetensors"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("w/part_2"));
  EXPECT_EQ((*reader)->Read("w").status().code(), absl::StatusCode::kDataLoss);
  ASSERT_TRUE(env::DeleteRecursively(dir).ok());
}

}  // namespace
}  // namespace tandem::checkpoint

// tests/checkpoint/checkpoint_files.h
//
// Checkpoint files written and damaged by hand, for the tests of the readers that must
// cope with them (CheckpointReader, Saver, the ckpt tool):
// - WritePartitionedCheckpoint: a [4,3] float tensor "w" holding 0..11, split into three
//   parts over two shards (rows 0-1 all columns; rows 2-3 columns 0-1; rows 2-3 column
//   2), plus an unpartitioned "bias" {9, 8}, at global step 7;
// - TensorByteRange: where a tensor's bytes lie in a safetensors file, parsed by hand;
// - FlipOneByte: one byte of a file changed in place.
#ifndef TANDEM_TESTS_CHECKPOINT_CHECKPOINT_FILES_H_
#define TANDEM_TESTS_CHECKPOINT_CHECKPOINT_FILES_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_index.h"
#include "checkpoint/safetensors.h"
#include "framework/core/env.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tandem::testing {

// Returns the checkpoint's prefix in `dir`.
inline std::string WritePartitionedCheckpoint(const std::string& dir) {
  const std::string prefix = env::JoinPath(dir, checkpoint::CheckpointBaseName(7));
  const std::string shard0_file = checkpoint::ShardFileName(prefix, 0, 2);
  const std::string shard1_file = checkpoint::ShardFileName(prefix, 1, 2);
  std::vector<checkpoint::NamedTensor> shard0 = {
      {"w/part_0", Tensor::FromVector<float>({0, 1, 2, 3, 4, 5}, TensorShape({2, 3}))},
      {"bias", Tensor::FromVector<float>({9, 8}, TensorShape({2}))}};
  std::vector<checkpoint::NamedTensor> shard1 = {
      {"w/part_1", Tensor::FromVector<float>({6, 7, 9, 10}, TensorShape({2, 2}))},
      {"w/part_2", Tensor::FromVector<float>({8, 11}, TensorShape({2, 1}))}};
  EXPECT_TRUE(checkpoint::WriteSafetensors(env::JoinPath(dir, shard0_file), shard0).ok());
  EXPECT_TRUE(checkpoint::WriteSafetensors(env::JoinPath(dir, shard1_file), shard1).ok());
  checkpoint::CheckpointIndex index;
  index.global_step = 7;
  index.num_shards = 2;
  index.total_size = (12 + 2) * sizeof(float);
  index.weight_map = {{"w/part_0", shard0_file},
                      {"bias", shard0_file},
                      {"w/part_1", shard1_file},
                      {"w/part_2", shard1_file}};
  index.slices["w"] = {
      {4, 3},
      {{"w/part_0", {0, 0}, {2, 3}}, {"w/part_1", {2, 0}, {2, 2}}, {"w/part_2", {2, 2}, {2, 1}}}};
  EXPECT_TRUE(checkpoint::WriteIndex(checkpoint::IndexPath(prefix), index).ok());
  return prefix;
}

// [begin, end) of `tensor`'s bytes in the safetensors file at `path`: an 8-byte header
// length, the JSON header, then the data its "data_offsets" point into.
inline std::pair<size_t, size_t> TensorByteRange(const std::string& path,
                                                 const std::string& tensor) {
  std::string bytes = *env::ReadFile(path);
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  size_t begin = header[tensor]["data_offsets"][0], end = header[tensor]["data_offsets"][1];
  return {8 + n + begin, 8 + n + end};
}

inline void FlipOneByte(const std::string& path, size_t offset) {
  std::string bytes = *env::ReadFile(path);
  bytes[offset] ^= 0x10;
  ASSERT_TRUE(env::WriteFileAtomic(path, bytes).ok());
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_CHECKPOINT_CHECKPOINT_FILES_H_

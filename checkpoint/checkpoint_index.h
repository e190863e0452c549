// checkpoint/checkpoint_index.h
//
// The index (manifest) of one checkpoint, `<dir>/model.ckpt-<step>.index.json`, and the
// file names of a checkpoint. Its JSON, a superset of the Hugging Face
// "model.safetensors.index.json" layout:
//
//   {
//     "metadata": {"global_step": 100, "format_version": 1, "num_shards": 2,
//                  "total_size": 4096},
//     "weight_map": {"dense/kernel": "model.ckpt-100-00000-of-00002.safetensors", ...},
//     "slices": {                                   // only with partitioned variables
//       "embedding": {"full_shape": [1000, 64],
//                     "parts": [{"part": "embedding/part_0", "offset": [0, 0],
//                                "shape": [500, 64]},
//                               {"part": "embedding/part_1", "offset": [500, 0],
//                                "shape": [500, 64]}]}
//     }
//   }
//
// "weight_map" maps every stored tensor (for a partitioned variable: every part, under
// the part variable's own name) to the shard file (a name relative to the index's
// directory) that holds it. "slices" says how parts tile a full logical tensor: each
// part is the box [offset, offset + shape) of `full_shape`, every part is in the
// weight_map, and the parts are disjoint and cover the full tensor. Readers that do not
// know "slices" (e.g. Hugging Face tools) still see every part as an ordinary tensor.
// "metadata" may carry further string/number keys; unknown keys are kept.
// "metadata"."crc32c", which tandem writes, is the CRC32C of the compact JSON without
// it; when present it must match, so a flipped byte in a variable or file name is
// corruption (DATA_LOSS), not a checkpoint lacking a model variable.
//
// Thread safety: pure functions and value types.
#ifndef TANDEM_CHECKPOINT_CHECKPOINT_INDEX_H_
#define TANDEM_CHECKPOINT_CHECKPOINT_INDEX_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "framework/tensor/tensor_shape.h"

namespace tandem::checkpoint {

inline constexpr int kCheckpointFormatVersion = 1;
inline constexpr char kIndexCrcKey[] = "crc32c";

// One part of a partitioned variable: the box [offset, offset + shape) of the full tensor.
struct SlicePart {
  std::string part;  // The stored tensor's name.
  Dims offset;
  Dims shape;
};

struct SlicedTensor {
  Dims full_shape;
  std::vector<SlicePart> parts;
};

struct CheckpointIndex {
  int64_t global_step = 0;
  int format_version = kCheckpointFormatVersion;
  int num_shards = 0;
  int64_t total_size = 0;  // Bytes of tensor data over all shards.
  // tensor name -> shard file name (relative to the index's directory).
  std::map<std::string, std::string> weight_map;
  // full tensor name -> its parts.
  std::map<std::string, SlicedTensor> slices;
};

// "model.ckpt-100": the base name of the checkpoint of `step`.
std::string CheckpointBaseName(int64_t step);
// "<prefix>.index.json".
std::string IndexPath(absl::string_view prefix);
// "<basename(prefix)>-00003-of-00008.safetensors" (a file name, no directory).
std::string ShardFileName(absl::string_view prefix, int shard, int num_shards);
// True when `file` is a shard or the index of the checkpoint with base name `base`
// ("model.ckpt-100"), e.g. to delete a checkpoint; never matches model.ckpt-1000.
bool IsFileOfCheckpoint(absl::string_view base, absl::string_view file);

// OK when the parts of `t` lie inside full_shape, are disjoint and cover it;
// INVALID_ARGUMENT naming `full_name` and the offending part otherwise.
absl::Status ValidateSlicedTensor(absl::string_view full_name, const SlicedTensor& t);

std::string SerializeIndex(const CheckpointIndex& index);
// Parses and validates an index (untrusted). DATA_LOSS naming `path` on malformed JSON,
// missing or mistyped fields, slices that do not tile their full shape or name parts
// not in the weight_map; UNIMPLEMENTED for a newer format_version.
absl::StatusOr<CheckpointIndex> ParseIndex(absl::string_view path, absl::string_view text);
absl::StatusOr<CheckpointIndex> ReadIndex(const std::string& path);
// The global step the index of checkpoint `prefix` records; -1 when it cannot be read.
int64_t CheckpointGlobalStep(absl::string_view prefix);
absl::Status WriteIndex(const std::string& path, const CheckpointIndex& index);

}  // namespace tandem::checkpoint

#endif  // TANDEM_CHECKPOINT_CHECKPOINT_INDEX_H_

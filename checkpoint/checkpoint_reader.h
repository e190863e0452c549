// checkpoint/checkpoint_reader.h
//
// CheckpointReader reads a checkpoint by prefix without a graph or session: for the
// ckpt tool, for evaluation jobs that inspect a checkpoint, and for verification. It
// lists the stored tensors and the partitioned (sliced) ones, reads a stored tensor,
// reassembles a partitioned tensor from its parts, and verifies every shard's CRCs.
//
// Everything read is untrusted: errors are those of checkpoint_index.h and
// safetensors.h (DATA_LOSS naming the file and tensor), never a crash.
//
// Thread safety: not thread-safe (shards are opened lazily and cached).
#ifndef TANDEM_CHECKPOINT_CHECKPOINT_READER_H_
#define TANDEM_CHECKPOINT_CHECKPOINT_READER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/checkpoint_index.h"
#include "checkpoint/safetensors.h"

namespace tandem::checkpoint {

class CheckpointReader {
 public:
  // Reads and validates the index of `prefix` ("<dir>/model.ckpt-<step>").
  static absl::StatusOr<std::unique_ptr<CheckpointReader>> Open(const std::string& prefix);

  const CheckpointIndex& index() const { return index_; }
  // Stored tensor names (parts of partitioned tensors included), sorted.
  std::vector<std::string> TensorNames() const;
  // dtype and shape of a stored tensor (opens its shard).
  absl::StatusOr<SafetensorsEntry> Info(const std::string& name);
  // A stored tensor, or a partitioned tensor named in the index's "slices" assembled
  // from its parts. NOT_FOUND naming the index when neither.
  absl::StatusOr<Tensor> Read(const std::string& name);
  // The block of shape `shape` at `offset` of the tensor Read(name) gives, which must
  // have shape `full_shape`: a part of a partitioned variable restored from a
  // checkpoint partitioned another way (or not at all). Of a tensor stored in parts it
  // reads only the parts the block overlaps; a tensor stored whole is read whole.
  // INVALID_ARGUMENT naming both shapes when the stored one differs or the block is not
  // inside it.
  absl::StatusOr<Tensor> ReadSlice(const std::string& name, const Dims& full_shape,
                                   const Dims& offset, const Dims& shape);
  // Opens every shard and checks every tensor's CRC and that the weight_map matches
  // the shards' contents.
  absl::Status Verify();

 private:
  CheckpointReader(std::string prefix, CheckpointIndex index)
      : prefix_(std::move(prefix)), index_(std::move(index)) {}
  absl::StatusOr<const SafetensorsFile*> Shard(const std::string& file);
  absl::StatusOr<Tensor> ReadSliced(const std::string& name, const SlicedTensor& sliced);
  // Checks a stored part's shape against the index and its dtype against `dtype` (the
  // other parts'; set from this one when kInvalid): DATA_LOSS naming both otherwise.
  absl::Status CheckPart(const std::string& name, const SlicePart& part, DType* dtype);
  // ReadSlice of a tensor stored in parts: reads only the parts that overlap the block.
  absl::StatusOr<Tensor> ReadBlockOfParts(const std::string& name, const SlicedTensor& sliced,
                                          const Dims& full_shape, const Dims& offset,
                                          const Dims& shape);

  std::string prefix_;
  CheckpointIndex index_;
  std::map<std::string, std::unique_ptr<SafetensorsFile>> shards_;
};

// The block of shape `shape` at `offset` of `full` (a copy); INVALID_ARGUMENT when it is
// not inside, UNIMPLEMENTED for strings.
absl::StatusOr<Tensor> SliceTensor(const Tensor& full, const Dims& offset, const Dims& shape);

}  // namespace tandem::checkpoint

#endif  // TANDEM_CHECKPOINT_CHECKPOINT_READER_H_

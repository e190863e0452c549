// checkpoint/load_variables.h
//
// LoadVariables: the values of some variables from a checkpoint, each by its own name,
// or, for a part of a partitioned variable stored under another layout (N parts into M,
// parts into a whole variable and back), cut from its logical tensor (TensorFlow's
// slice-aware restore). Every dtype and shape is checked against the variable before
// any data is read, and every tensor's CRC as it is read. Saver's restore uses it
// through the RestoreShard op (checkpoint/shard_ops.h), each task loading just the
// variables it holds.
//
// Failures say what kind they are, for RestoreLatest's fallback to older checkpoints:
// the checkpoint cannot be read (DATA_LOSS naming the file; NOT_FOUND for a missing
// file) or does not fit the variables (NOT_FOUND naming the index and the variable it
// lacks; INVALID_ARGUMENT naming the tensor for a dtype or shape mismatch).
//
// Thread safety: pure functions of their arguments and the files.
#ifndef TANDEM_CHECKPOINT_LOAD_VARIABLES_H_
#define TANDEM_CHECKPOINT_LOAD_VARIABLES_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/checkpoint_index.h"
#include "framework/tensor/tensor.h"
#include "framework/tensor/tensor_shape.h"

namespace tandem::checkpoint {

// Where a saved variable lies in a partitioned logical tensor.
struct PartitionInfo {
  std::string full_name;
  Dims full_shape;
  Dims offset;
};

struct VariableToLoad {
  std::string name;
  DType dtype = DType::kInvalid;
  PartialShape shape;
  std::optional<PartitionInfo> part;  // Set for a part of a partitioned variable.
};

enum class LoadFailure { kNone, kUnreadable, kMismatch };

// Checks that the checkpoint of `index` (read from `index_path`) holds every variable,
// by name or through its logical tensor; NOT_FOUND naming both otherwise (a mismatch).
absl::Status CheckVariablesPresent(const CheckpointIndex& index, const std::string& index_path,
                                   const std::vector<VariableToLoad>& vars);

// The values of `vars` from the checkpoint `prefix`, in order. `kind` says what a
// failure is. At most `max_parallel_reads` shard files are read at once.
absl::StatusOr<std::vector<Tensor>> LoadVariables(const std::string& prefix,
                                                  const std::vector<VariableToLoad>& vars,
                                                  int max_parallel_reads, LoadFailure* kind);

}  // namespace tandem::checkpoint

#endif  // TANDEM_CHECKPOINT_LOAD_VARIABLES_H_

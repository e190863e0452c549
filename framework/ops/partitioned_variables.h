// framework/ops/partitioned_variables.h
//
// Partitioned variables, as TensorFlow 1.x's tf.get_variable(..., partitioner=...):
// a logical variable of shape S split along one axis into parts, each its own
// Variable named "<name>/part_<i>", built through the caller's scope, so a device
// function such as the replica device setter
// (framework/distributed/replica_device_setter.h)
// places the parts one by one (round-robin over the ps tasks).
//
// Partitioners return, as TensorFlow's, the number of parts per dimension (1
// everywhere but the partitioned axis):
//   FixedSizePartitioner(n, axis)       min(n, S[axis]) parts.
//   VariableAxisSizePartitioner(b, ...) as many parts as needed for each part to hold
//                                       at most b bytes (at least one slice per part),
//                                       capped by max_shards.
//   MinMaxVariablePartitioner(m, ...)   ceil(bytes / min_slice_size) parts, at least 1,
//                                       at most m and S[axis].
// bytes_per_string_element is kept for TensorFlow's signatures; variables cannot hold
// strings in tandem (string tensors are inputs only), so it is only validated. Invalid partitioner arguments are reported when the partitioner
// is called (the error is recorded in the scope by PartitionedVariable).
//
// Split rule (TensorFlow's): S[axis] rows in n parts gives the first S[axis] % n parts
// one row more: 10 rows in 3 parts = 4, 3, 3.
//
// Initial values: with an Initializer each part is initialised by calling it with the
// part's shape (as TensorFlow; a seeded random initializer therefore restarts its
// sequence in every part). With an initial-value tensor (a fully defined static shape)
// each part gets its slice of it, so AsTensor() equals that value.
//
// Embedding lookup: EmbeddingLookup(parts, ids, "mod" | "div") is tf.nn.embedding_lookup
// over a partitioned table (axis 0). "mod": id lives in part id % n at row id / n.
// "div": the parts hold contiguous ranges of ids laid out by the split rule (TF's div
// rule with the extra rows in the first parts). The parts' row counts must be the ones
// those rules give for their total (as the partitioners produce). The lookup is
// row-exact (embedding_ops.h): the distinct ids (Unique) go each to the one part that
// holds it (PartitionIds), each part gathers only those, and StitchRows and a Gather
// put the rows back in the ids' order; each part's gradient is sparse over its own rows
// (the optimizers' IndexedSlices). An id outside [0, total rows) fails the step naming
// it.
//
// Checkpoints: each part's handle node carries its place in the logical variable as
// attrs (TensorFlow's save_slice_info), so a Saver of the graph writes the index's
// "slices" without being told (GetSaveSliceInfo reads them back). PartitionMap() gives, per part variable name, the logical variable's
// name, full shape and the part's offset: the map checkpoint::SaverOptions::partitions
// takes, so the Saver writes the index's "slices":
//   saver_options.partitions = pv.PartitionMap<checkpoint::PartitionInfo>();
//
// Thread safety: graph building, one thread at a time per graph.
#ifndef TANDEM_FRAMEWORK_OPS_PARTITIONED_VARIABLES_H_
#define TANDEM_FRAMEWORK_OPS_PARTITIONED_VARIABLES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "framework/graph/scope.h"
#include "framework/ops/initializers.h"
#include "framework/ops/state_ops.h"

namespace tandem::ops {

// Parts per dimension of a variable of `shape` and `dtype`.
using Partitioner =
    std::function<absl::StatusOr<std::vector<int>>(const TensorShape& shape, DType dtype)>;

Partitioner FixedSizePartitioner(int num_shards, int axis = 0);
// max_shards <= 0: no cap.
Partitioner VariableAxisSizePartitioner(int64_t max_shard_bytes, int axis = 0,
                                        int64_t bytes_per_string_element = 16, int max_shards = 0);
Partitioner MinMaxVariablePartitioner(int max_partitions = 1, int axis = 0,
                                      int64_t min_slice_size = 256 << 10,
                                      int64_t bytes_per_string_element = 16);

// Rows of each of `num_parts` parts of `dim` rows (TensorFlow's split rule).
std::vector<int64_t> PartitionSizes(int64_t dim, int num_parts);

// Where one part lies in the logical variable.
struct SaveSliceInfo {
  std::string full_name;
  Dims full_shape;
  Dims offset;
};

// The attrs on a part's handle node: its logical variable's name (string), full shape
// and offset (int lists).
inline constexpr char kSliceFullNameAttr[] = "_save_slice_full_name";
inline constexpr char kSliceFullShapeAttr[] = "_save_slice_full_shape";
inline constexpr char kSliceOffsetAttr[] = "_save_slice_offset";
// The slice info of a variable's handle node; nullopt for a whole variable (or attrs
// of the wrong types).
std::optional<SaveSliceInfo> GetSaveSliceInfo(const Node& handle);
// Marks `handle` as a slice of a logical variable (the partitioned variable's parts, and
// the optimizer slots of a part, "<full name>/<slot>", so they restore across layouts).
void SetSaveSliceInfo(Node* handle, const SaveSliceInfo& info);

class PartitionedVariable {
 public:
  PartitionedVariable() = default;
  // Creates "<name>/part_<i>" under the scope's name scope, each part initialised by
  // `initializer` with its own shape, beside the part (on its device: a table's initial
  // value is made on its parameter servers, never sent to them).
  PartitionedVariable(const Scope& scope, absl::string_view name, const TensorShape& shape,
                      DType dtype, const Initializer& initializer, const Partitioner& partitioner,
                      const VariableOptions& options = {});
  // Each part initialised with its slice of `initial_value` (fully defined shape).
  PartitionedVariable(const Scope& scope, absl::string_view name, Output initial_value,
                      const Partitioner& partitioner, const VariableOptions& options = {});

  bool valid() const { return !parts_.empty(); }
  // The logical name, e.g. "embedding" (parts are "embedding/part_0", ...).
  const std::string& name() const { return name_; }
  const TensorShape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int axis() const { return axis_; }
  int num_parts() const { return static_cast<int>(parts_.size()); }
  const std::vector<Variable>& parts() const { return parts_; }
  // Offset of each part in the logical variable (zero except along axis()).
  const std::vector<Dims>& offsets() const { return offsets_; }

  // The whole value: the parts' reads concatenated along axis().
  Output AsTensor(const Scope& scope) const;

  // Part variable name -> {name(), shape(), offset}. `Info` must be constructible as
  // Info{full_name, full_shape, offset}: SaveSliceInfo or checkpoint::PartitionInfo.
  template <typename Info = SaveSliceInfo>
  std::map<std::string, Info> PartitionMap() const {
    std::map<std::string, Info> m;
    for (size_t i = 0; i < parts_.size(); ++i) {
      m[parts_[i].name()] = Info{name_, shape_.dims(), offsets_[i]};
    }
    return m;
  }

 private:
  void Build(const Scope& scope, absl::string_view name, const TensorShape& shape, DType dtype,
             const Partitioner& partitioner,
             const std::function<Output(const Scope&, const TensorShape& part_shape,
                                        const Dims& offset)>& part_init,
             bool colocate_init, const VariableOptions& options);

  std::string name_;
  TensorShape shape_;
  DType dtype_ = DType::kInvalid;
  int axis_ = 0;
  std::vector<Variable> parts_;
  std::vector<Dims> offsets_;
};

// tf.nn.embedding_lookup(params, ids, partition_strategy): rows `ids` (int32/int64, any
// shape) of the table split into `params` along axis 0; the result has shape
// ids.shape + params[0].shape[1:]. partition_strategy is "mod" or "div" (see above).
// Differentiable with respect to the parts' handles.
Output EmbeddingLookup(const Scope& scope, const std::vector<Variable>& params, Output ids,
                       absl::string_view partition_strategy = "mod");
Output EmbeddingLookup(const Scope& scope, const PartitionedVariable& params, Output ids,
                       absl::string_view partition_strategy = "mod");

}  // namespace tandem::ops

#endif  // TANDEM_FRAMEWORK_OPS_PARTITIONED_VARIABLES_H_

// Partitioners, partitioned variables and the partitioned embedding lookup (see
// partitioned_variables.h).
#include "framework/ops/partitioned_variables.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/embedding_ops.h"
#include "framework/ops/math_ops.h"

namespace tandem::ops {
namespace {

absl::Status CheckAxis(const char* who, const TensorShape& shape, int axis) {
  if (axis < 0 || axis >= shape.rank()) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": cannot partition a variable of shape ",
                                                   shape.DebugString(), " along axis ", axis));
  }
  return absl::OkStatus();
}

// Variables cannot hold strings in tandem, so bytes_per_string_element (kept for
// TensorFlow's signatures) never applies.
absl::StatusOr<int64_t> ElementBytes(const char* who, DType dtype) {
  int64_t size = static_cast<int64_t>(DTypeSize(dtype));
  if (size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": variables cannot hold ", DTypeName(dtype)));
  }
  return size;
}

// Parts per dimension: `n` along `axis`, 1 elsewhere.
std::vector<int> AlongAxis(const TensorShape& shape, int axis, int64_t n) {
  std::vector<int> parts(shape.rank(), 1);
  parts[axis] = static_cast<int>(n);
  return parts;
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

Partitioner FixedSizePartitioner(int num_shards, int axis) {
  return [=](const TensorShape& shape, DType) -> absl::StatusOr<std::vector<int>> {
    if (num_shards < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("FixedSizePartitioner: num_shards must be >= 1, got ", num_shards));
    }
    TANDEM_RETURN_IF_ERROR(CheckAxis("FixedSizePartitioner", shape, axis));
    return AlongAxis(shape, axis, std::min<int64_t>(num_shards, shape.dim(axis)));
  };
}

Partitioner VariableAxisSizePartitioner(int64_t max_shard_bytes, int axis,
                                        int64_t bytes_per_string_element, int max_shards) {
  return [=](const TensorShape& shape, DType dtype) -> absl::StatusOr<std::vector<int>> {
    constexpr char kWho[] = "VariableAxisSizePartitioner";
    if (max_shard_bytes < 1 || bytes_per_string_element < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          kWho, ": both max_shard_bytes (", max_shard_bytes, ") and bytes_per_string_element (",
          bytes_per_string_element, ") must be positive"));
    }
    TANDEM_RETURN_IF_ERROR(CheckAxis(kWho, shape, axis));
    TANDEM_ASSIGN_OR_RETURN(int64_t elem, ElementBytes(kWho, dtype));
    const int64_t dim = shape.dim(axis);
    if (dim == 0) return AlongAxis(shape, axis, 1);
    // TF: bytes_per_slice = num_elements / dim * element_size;
    // slices_per_shard = max(1, floor(max_shard_bytes / bytes_per_slice));
    // axis_shards = ceil(dim / slices_per_shard), capped by max_shards.
    const int64_t slice_bytes = shape.num_elements() / dim * elem;
    const int64_t slices_per_shard =
        slice_bytes == 0 ? dim : std::max<int64_t>(1, max_shard_bytes / slice_bytes);
    int64_t shards = CeilDiv(dim, slices_per_shard);
    if (max_shards > 0) shards = std::min<int64_t>(shards, max_shards);
    return AlongAxis(shape, axis, shards);
  };
}

Partitioner MinMaxVariablePartitioner(int max_partitions, int axis, int64_t min_slice_size,
                                      int64_t bytes_per_string_element) {
  return [=](const TensorShape& shape, DType dtype) -> absl::StatusOr<std::vector<int>> {
    constexpr char kWho[] = "MinMaxVariablePartitioner";
    if (min_slice_size < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(kWho, ": min_slice_size must be positive, got ", min_slice_size));
    }
    TANDEM_RETURN_IF_ERROR(CheckAxis(kWho, shape, axis));
    TANDEM_ASSIGN_OR_RETURN(int64_t elem, ElementBytes(kWho, dtype));
    // TF: max(1, min(shape[axis], max_partitions, ceil(total_bytes / min_slice_size))).
    const int64_t wanted = CeilDiv(shape.num_elements() * elem, min_slice_size);
    const int64_t n = std::max<int64_t>(
        1, std::min<int64_t>({shape.dim(axis), static_cast<int64_t>(max_partitions), wanted}));
    return AlongAxis(shape, axis, n);
  };
}

std::optional<SaveSliceInfo> GetSaveSliceInfo(const Node& handle) {
  const AttrMap& attrs = handle.attrs();
  auto name = attrs.find(kSliceFullNameAttr);
  auto shape = attrs.find(kSliceFullShapeAttr);
  auto offset = attrs.find(kSliceOffsetAttr);
  if (name == attrs.end() || shape == attrs.end() || offset == attrs.end()) return std::nullopt;
  const auto* n = std::get_if<std::string>(&name->second);
  const auto* sh = std::get_if<std::vector<int64_t>>(&shape->second);
  const auto* off = std::get_if<std::vector<int64_t>>(&offset->second);
  if (n == nullptr || sh == nullptr || off == nullptr) return std::nullopt;
  return SaveSliceInfo{*n, Dims(sh->begin(), sh->end()), Dims(off->begin(), off->end())};
}

void SetSaveSliceInfo(Node* handle, const SaveSliceInfo& info) {
  handle->SetAttr(kSliceFullNameAttr, info.full_name);
  handle->SetAttr(kSliceFullShapeAttr, std::vector<int64_t>(info.full_shape));
  handle->SetAttr(kSliceOffsetAttr, std::vector<int64_t>(info.offset));
}

std::vector<int64_t> PartitionSizes(int64_t dim, int num_parts) {
  std::vector<int64_t> sizes;
  if (num_parts < 1) return sizes;
  for (int i = 0; i < num_parts; ++i) sizes.push_back(dim / num_parts + (i < dim % num_parts));
  return sizes;
}

PartitionedVariable::PartitionedVariable(const Scope& scope, absl::string_view name,
                                         const TensorShape& shape, DType dtype,
                                         const Initializer& initializer,
                                         const Partitioner& partitioner,
                                         const VariableOptions& options) {
  if (!scope.ok()) return;
  if (!initializer) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat("partitioned variable '", name, "': no initializer")));
    return;
  }
  Build(
      scope, name, shape, dtype, partitioner,
      [&](const Scope& s, const TensorShape& part_shape, const Dims&) {
        return initializer(s, part_shape, dtype);
      },
      /*colocate_init=*/true, options);
}

PartitionedVariable::PartitionedVariable(const Scope& scope, absl::string_view name,
                                         Output initial_value, const Partitioner& partitioner,
                                         const VariableOptions& options) {
  if (!scope.ok()) return;
  if (!initial_value.valid()) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat("partitioned variable '", name, "': invalid initial value")));
    return;
  }
  absl::StatusOr<TensorShape> shape = initial_value.shape().ToTensorShape();
  if (!shape.ok() || !initial_value.shape().IsFullyDefined()) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat("partitioned variable '", name, "': the initial value's shape ",
                     initial_value.shape().DebugString(), " must be fully defined")));
    return;
  }
  Build(
      scope, name, *shape, initial_value.dtype(), partitioner,
      [&](const Scope& s, const TensorShape& part_shape, const Dims& offset) {
        std::vector<int64_t> begin(offset.begin(), offset.end());
        return Slice(s, initial_value, ConstInt64(s.WithOpName("begin"), begin),
                     ConstInt64(s.WithOpName("size"), part_shape.dims()));
      },
      /*colocate_init=*/false, options);
}

void PartitionedVariable::Build(
    const Scope& scope, absl::string_view name, const TensorShape& shape, DType dtype,
    const Partitioner& partitioner,
    const std::function<Output(const Scope&, const TensorShape&, const Dims&)>& part_init,
    bool colocate_init, const VariableOptions& options) {
  auto fail = [&](const absl::Status& s) {
    scope.UpdateStatus(AnnotateStatus(s, absl::StrCat("partitioned variable '", name, "'")));
  };
  if (!partitioner) return fail(absl::InvalidArgumentError("no partitioner"));
  absl::StatusOr<std::vector<int>> partitions = partitioner(shape, dtype);
  if (!partitions.ok()) return fail(partitions.status());
  if (static_cast<int>(partitions->size()) != shape.rank()) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("the partitioner returned ", partitions->size(),
                     " dimensions for a variable of shape ", shape.DebugString())));
  }
  int axis = -1;
  for (int d = 0; d < shape.rank(); ++d) {
    int n = (*partitions)[d];
    if (n < 1 || n > std::max<int64_t>(1, shape.dim(d))) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("the partitioner asked for ", n, " parts of dimension ", d, " of shape ",
                       shape.DebugString(), "; need 1 to ", std::max<int64_t>(1, shape.dim(d)))));
    }
    if (n > 1) {
      if (axis >= 0) {
        return fail(absl::InvalidArgumentError(
            "the partitioner partitions more than one dimension; only one is supported"));
      }
      axis = d;
    }
  }
  if (axis < 0) axis = 0;  // One part (rank >= 1) or a scalar.
  const int num_parts = shape.rank() == 0 ? 1 : (*partitions)[axis];
  // Reserve the logical name ("emb", or "emb_1" when taken) under the name scope.
  const std::string full = scope.GetUniqueNameForOp(name);
  const std::string rel =
      scope.name_scope().empty() ? full : full.substr(scope.name_scope().size() + 1);
  std::vector<int64_t> sizes =
      shape.rank() == 0 ? std::vector<int64_t>{} : PartitionSizes(shape.dim(axis), num_parts);
  std::vector<Variable> parts;
  std::vector<Dims> offsets;
  int64_t start = 0;
  for (int i = 0; i < num_parts; ++i) {
    TensorShape part_shape = shape;
    Dims offset(shape.rank(), 0);
    if (shape.rank() > 0) {
      part_shape.set_dim(axis, sizes[i]);
      offset[axis] = start;
      start += sizes[i];
    }
    const std::string part_name = absl::StrCat(rel, "/part_", i);
    Variable v;
    if (colocate_init) {
      // Built beside the part (on its ps): no initial value crosses the network.
      v = Variable(scope, part_name, dtype, part_shape,
                   [&](const Scope& s) { return part_init(s, part_shape, offset); }, options);
    } else {
      // A slice of the caller's value, cut where that value is, outside the caller's
      // control dependencies (TensorFlow's init_scope): only the slice moves.
      Output init = part_init(
          scope.WithNoControlDependencies().NewSubScope(absl::StrCat(part_name, "/Initializer")),
          part_shape, offset);
      if (!scope.ok()) return;
      if (!init.valid()) return fail(absl::InternalError(absl::StrCat("initializing ", part_name)));
      v = Variable(scope, part_name, init, options);
    }
    if (!scope.ok() || !v.valid()) return;
    SetSaveSliceInfo(v.handle().node, SaveSliceInfo{full, shape.dims(), offset});
    parts.push_back(v);
    offsets.push_back(std::move(offset));
  }
  name_ = full;
  shape_ = shape;
  dtype_ = dtype;
  axis_ = axis;
  parts_ = std::move(parts);
  offsets_ = std::move(offsets);
}

Output PartitionedVariable::AsTensor(const Scope& scope) const {
  if (!valid()) {
    scope.UpdateStatus(absl::InvalidArgumentError("AsTensor of an invalid PartitionedVariable"));
    return Output();
  }
  Scope s = scope.NewSubScope(absl::StrCat(name_, "/ConcatPartitions"));
  if (parts_.size() == 1) return Identity(s, parts_[0].value());
  std::vector<Output> values;
  for (const Variable& v : parts_) values.push_back(v.value());
  return Concat(s, values, axis_);
}

Output EmbeddingLookup(const Scope& scope, const PartitionedVariable& params, Output ids,
                       absl::string_view partition_strategy) {
  if (params.valid() && params.axis() != 0) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat("EmbeddingLookup: ", params.name(), " is partitioned along axis ",
                     params.axis(), "; an embedding table must be partitioned along axis 0")));
    return Output();
  }
  return EmbeddingLookup(scope, params.parts(), ids, partition_strategy);
}

Output EmbeddingLookup(const Scope& scope, const std::vector<Variable>& params, Output ids,
                       absl::string_view partition_strategy) {
  if (!scope.ok()) return Output();
  auto fail = [&](const std::string& why) {
    scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat("EmbeddingLookup: ", why)));
    return Output();
  };
  if (params.empty()) return fail("no params");
  if (!ids.valid()) return fail("invalid ids");
  if (ids.dtype() != DType::kInt32 && ids.dtype() != DType::kInt64) {
    return fail(absl::StrCat("ids must be int32 or int64, got ", DTypeName(ids.dtype())));
  }
  if (partition_strategy != "mod" && partition_strategy != "div") {
    return fail(absl::StrCat("partition_strategy must be \"mod\" or \"div\", got \"",
                             partition_strategy, "\""));
  }
  // Static row counts and row shape of the parts.
  const int n = static_cast<int>(params.size());
  std::vector<int64_t> rows;
  Dims row_shape;
  for (int p = 0; p < n; ++p) {
    if (!params[p].valid()) return fail(absl::StrCat("params[", p, "] is not a variable"));
    const PartialShape& s = params[p].shape();
    if (!s.IsFullyDefined() || s.rank() < 1 || s.dim(0) < 1) {
      return fail(absl::StrCat("params[", p, "] (", params[p].name(), ") has shape ",
                               s.DebugString(), "; need a fully defined shape with rows"));
    }
    Dims tail(s.dims().begin() + 1, s.dims().end());
    if (p == 0) {
      row_shape = tail;
    } else if (tail != row_shape || params[p].dtype() != params[0].dtype()) {
      return fail(absl::StrCat("params[", p, "] (", params[p].name(), ") has shape ",
                               s.DebugString(), " and dtype ", DTypeName(params[p].dtype()),
                               "; params[0] has rows of shape ",
                               PartialShape(absl::MakeConstSpan(row_shape)).DebugString(),
                               " and dtype ", DTypeName(params[0].dtype())));
    }
    rows.push_back(s.dim(0));
  }
  const DType dtype = params[0].dtype();
  Scope s = scope.NewSubScope("embedding_lookup");
  if (n == 1)
    return ResourceGather(s.ColocateWith(params[0].handle().node), params[0].handle(), ids, dtype);
  // The row counts the strategy assumes.
  int64_t total = 0;
  for (int64_t r : rows) total += r;
  std::vector<int64_t> expected;
  if (partition_strategy == "div") {
    expected = PartitionSizes(total, n);
  } else {
    for (int p = 0; p < n; ++p) expected.push_back(CeilDiv(total - p, n));
  }
  if (rows != expected) {
    std::string got, want;
    for (int p = 0; p < n; ++p) {
      absl::StrAppend(&got, p ? "," : "", rows[p]);
      absl::StrAppend(&want, p ? "," : "", expected[p]);
    }
    return fail(absl::StrCat("parts of ", got, " rows do not follow the \"", partition_strategy,
                             "\" layout of ", total, " rows in ", n, " parts (", want, ")"));
  }
  // Each distinct id once, to the part that holds it (embedding_ops.h), then back to
  // every id's place.
  Output flat = Reshape(s.WithOpName("flat_ids"), ids, std::vector<int64_t>{-1});
  std::vector<Output> unique = Unique(s.WithOpName("unique_ids"), flat, DType::kInt32);
  if (unique.size() != 2) return Output();
  Output distinct_rows = PartitionedRows(s, params, unique[0], partition_strategy);
  Output result = Gather(s.WithOpName("rows_of_ids"), distinct_rows, unique[1]);
  if (!scope.ok()) return Output();
  // Back to ids.shape + row shape: a constant (so the result's static shape is known)
  // when at most one dim of ids is unknown, else computed at run time.
  const PartialShape& id_shape = ids.shape();
  if (id_shape.known_rank() &&
      std::count(id_shape.dims().begin(), id_shape.dims().end(), int64_t{-1}) <= 1) {
    std::vector<int64_t> dims = id_shape.dims();
    dims.insert(dims.end(), row_shape.begin(), row_shape.end());
    return Reshape(s.WithOpName("result"), result, dims);
  }
  Output shape = Concat(
      s.WithOpName("result_shape"),
      {Shape(s, ids), ConstInt32(s, std::vector<int32_t>(row_shape.begin(), row_shape.end()))}, 0);
  return Reshape(s.WithOpName("result"), result, shape);
}

}  // namespace tandem::ops

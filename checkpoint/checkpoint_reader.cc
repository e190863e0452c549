#include "checkpoint/checkpoint_reader.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/env.h"
#include "framework/core/status.h"

namespace tandem::checkpoint {
namespace {

// Copies the block of shape `block` at `src_offset` in `src` (of `src_shape`) to
// `dst_offset` in `dst` (of `dst_shape`), innermost rows at a time. The caller checked
// that the block lies inside both.
void CopyBlock(const char* src, const Dims& src_shape, const Dims& src_offset, char* dst,
               const Dims& dst_shape, const Dims& dst_offset, const Dims& block, size_t elem) {
  const int rank = static_cast<int>(block.size());
  if (rank == 0) {
    std::memcpy(dst, src, elem);
    return;
  }
  int64_t rows = 1;
  for (int d = 0; d + 1 < rank; ++d) rows *= block[d];
  const int64_t row = block[rank - 1];
  if (rows == 0 || row == 0) return;
  std::vector<int64_t> idx(rank, 0);  // Index into the block, innermost fixed at 0.
  for (int64_t r = 0; r < rows; ++r) {
    int64_t from = 0, to = 0;
    for (int d = 0; d < rank; ++d) {
      from = from * src_shape[d] + src_offset[d] + idx[d];
      to = to * dst_shape[d] + dst_offset[d] + idx[d];
    }
    std::memcpy(dst + to * elem, src + from * elem, row * elem);
    for (int d = rank - 2; d >= 0; --d) {
      if (++idx[d] < block[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<CheckpointReader>> CheckpointReader::Open(
    const std::string& prefix) {
  TANDEM_ASSIGN_OR_RETURN(CheckpointIndex index, ReadIndex(IndexPath(prefix)));
  return std::unique_ptr<CheckpointReader>(new CheckpointReader(prefix, std::move(index)));
}

std::vector<std::string> CheckpointReader::TensorNames() const {
  std::vector<std::string> names;
  for (const auto& [name, file] : index_.weight_map) names.push_back(name);
  return names;
}

absl::StatusOr<const SafetensorsFile*> CheckpointReader::Shard(const std::string& file) {
  auto it = shards_.find(file);
  if (it != shards_.end()) return it->second.get();
  TANDEM_ASSIGN_OR_RETURN(SafetensorsFile shard,
                          SafetensorsFile::Open(env::JoinPath(env::Dirname(prefix_), file)));
  auto owned = std::make_unique<SafetensorsFile>(std::move(shard));
  const SafetensorsFile* raw = owned.get();
  shards_.emplace(file, std::move(owned));
  return raw;
}

absl::StatusOr<SafetensorsEntry> CheckpointReader::Info(const std::string& name) {
  auto it = index_.weight_map.find(name);
  if (it == index_.weight_map.end()) {
    return absl::NotFoundError(
        absl::StrCat(IndexPath(prefix_), ": no tensor ", name, " in the checkpoint"));
  }
  TANDEM_ASSIGN_OR_RETURN(const SafetensorsFile* shard, Shard(it->second));
  absl::StatusOr<SafetensorsEntry> info = shard->Info(name);
  if (!info.ok()) {
    return absl::DataLossError(absl::StrCat(shard->path(), ": tensor ", name,
                                            " is missing although the index maps it here"));
  }
  return info;
}

absl::StatusOr<Tensor> CheckpointReader::Read(const std::string& name) {
  if (auto it = index_.weight_map.find(name); it != index_.weight_map.end()) {
    TANDEM_RETURN_IF_ERROR(Info(name).status());
    TANDEM_ASSIGN_OR_RETURN(const SafetensorsFile* shard, Shard(it->second));
    return shard->Read(name);
  }
  if (auto it = index_.slices.find(name); it != index_.slices.end()) {
    return ReadSliced(name, it->second);
  }
  return absl::NotFoundError(
      absl::StrCat(IndexPath(prefix_), ": no tensor ", name, " in the checkpoint"));
}

absl::Status CheckpointReader::CheckPart(const std::string& name, const SlicePart& part,
                                         DType* dtype) {
  TANDEM_ASSIGN_OR_RETURN(SafetensorsEntry info, Info(part.part));
  if (info.shape.dims() != part.shape) {
    return absl::DataLossError(absl::StrCat(
        IndexPath(prefix_), ": part ", part.part, " of ", name, " is stored with shape ",
        info.shape.DebugString(), " but the index says ", TensorShape(part.shape).DebugString()));
  }
  if (*dtype != DType::kInvalid && info.dtype != *dtype) {
    return absl::DataLossError(
        absl::StrCat(IndexPath(prefix_), ": parts of ", name, " have different dtypes"));
  }
  *dtype = info.dtype;
  return absl::OkStatus();
}

absl::StatusOr<Tensor> CheckpointReader::ReadSliced(const std::string& name,
                                                    const SlicedTensor& sliced) {
  // ParseIndex checked that the parts tile full_shape; the parts' files are checked here.
  TANDEM_ASSIGN_OR_RETURN(TensorShape full_shape, TensorShape::Create(sliced.full_shape));
  // Check every part's stored dtype and shape first, so the full tensor allocated below
  // is no larger than the data actually on disk.
  DType dtype = DType::kInvalid;
  for (const SlicePart& part : sliced.parts) {
    TANDEM_RETURN_IF_ERROR(CheckPart(name, part, &dtype));
  }
  Tensor full(dtype, full_shape);
  const Dims zeros(full_shape.rank(), 0);
  for (const SlicePart& part : sliced.parts) {
    TANDEM_ASSIGN_OR_RETURN(Tensor value, Read(part.part));
    if (value.NumElements() == 0) continue;
    CopyBlock(value.raw_data(), part.shape, zeros, full.raw_data(), full_shape.dims(), part.offset,
              part.shape, DTypeSize(dtype));
  }
  return full;
}

absl::StatusOr<Tensor> CheckpointReader::ReadSlice(const std::string& name, const Dims& full_shape,
                                                   const Dims& offset, const Dims& shape) {
  auto sliced = index_.slices.find(name);
  if (sliced != index_.slices.end())
    return ReadBlockOfParts(name, sliced->second, full_shape, offset, shape);
  TANDEM_ASSIGN_OR_RETURN(Tensor full, Read(name));
  const Dims& dims = full.shape().dims();
  if (dims != full_shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        IndexPath(prefix_), ": ", name, " has shape ", full.shape().DebugString(),
        " in the checkpoint but ", TensorShape(full_shape).DebugString(), " in the model"));
  }
  absl::StatusOr<Tensor> part = SliceTensor(full, offset, shape);
  if (!part.ok())
    return AnnotateStatus(part.status(), absl::StrCat(IndexPath(prefix_), ": ", name));
  return part;
}

absl::StatusOr<Tensor> CheckpointReader::ReadBlockOfParts(const std::string& name,
                                                          const SlicedTensor& sliced,
                                                          const Dims& full_shape,
                                                          const Dims& offset, const Dims& shape) {
  if (sliced.full_shape != full_shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        IndexPath(prefix_), ": ", name, " has shape ", TensorShape(sliced.full_shape).DebugString(),
        " in the checkpoint but ", TensorShape(full_shape).DebugString(), " in the model"));
  }
  bool inside = offset.size() == full_shape.size() && shape.size() == full_shape.size();
  for (size_t d = 0; inside && d < full_shape.size(); ++d) {
    inside = offset[d] >= 0 && shape[d] >= 0 && offset[d] + shape[d] <= full_shape[d];
  }
  if (!inside) {
    return absl::InvalidArgumentError(absl::StrCat(
        IndexPath(prefix_), ": ", name, " of shape ", TensorShape(full_shape).DebugString(),
        " has no slice of shape ", TensorShape(shape).DebugString(), " at offset [",
        absl::StrJoin(offset, ","), "]"));
  }
  // The parts that overlap the block, each checked against the index before any is read.
  std::vector<const SlicePart*> overlapping;
  DType dtype = DType::kInvalid;
  for (const SlicePart& part : sliced.parts) {
    bool overlaps = true;
    for (size_t d = 0; overlaps && d < shape.size(); ++d) {
      overlaps =
          part.offset[d] < offset[d] + shape[d] && offset[d] < part.offset[d] + part.shape[d];
    }
    if (!overlaps) continue;
    TANDEM_RETURN_IF_ERROR(CheckPart(name, part, &dtype));
    if (dtype == DType::kString) return absl::UnimplementedError("slices of string tensors");
    overlapping.push_back(&part);
  }
  if (dtype == DType::kInvalid) {  // An empty block: no part overlaps it.
    for (const SlicePart& part : sliced.parts) {
      TANDEM_ASSIGN_OR_RETURN(SafetensorsEntry info, Info(part.part));
      dtype = info.dtype;
      break;
    }
  }
  Tensor block(dtype, TensorShape(shape));
  // The parts tile the full shape (ParseIndex checked), so they cover the block.
  for (const SlicePart* part : overlapping) {
    TANDEM_ASSIGN_OR_RETURN(Tensor value, Read(part->part));
    Dims lo(shape.size()), extent(shape.size()), src(shape.size()), dst(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) {
      lo[d] = std::max(part->offset[d], offset[d]);
      extent[d] = std::min(part->offset[d] + part->shape[d], offset[d] + shape[d]) - lo[d];
      src[d] = lo[d] - part->offset[d];
      dst[d] = lo[d] - offset[d];
    }
    CopyBlock(value.raw_data(), part->shape, src, block.raw_data(), shape, dst, extent,
              DTypeSize(dtype));
  }
  return block;
}

absl::StatusOr<Tensor> SliceTensor(const Tensor& full, const Dims& offset, const Dims& shape) {
  const Dims& dims = full.shape().dims();
  bool inside = offset.size() == dims.size() && shape.size() == dims.size();
  for (size_t d = 0; inside && d < dims.size(); ++d) {
    inside = offset[d] >= 0 && shape[d] >= 0 && offset[d] + shape[d] <= dims[d];
  }
  if (!inside) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a tensor of shape ", full.shape().DebugString(), " has no slice of shape ",
        TensorShape(shape).DebugString(), " at offset [", absl::StrJoin(offset, ","), "]"));
  }
  if (full.dtype() == DType::kString) {
    return absl::UnimplementedError("slices of string tensors");
  }
  Tensor part(full.dtype(), TensorShape(shape));
  CopyBlock(full.raw_data(), dims, offset, part.raw_data(), shape, Dims(dims.size(), 0), shape,
            DTypeSize(full.dtype()));
  return part;
}

absl::Status CheckpointReader::Verify() {
  std::map<std::string, std::vector<std::string>> by_file;
  for (const auto& [name, file] : index_.weight_map) by_file[file].push_back(name);
  for (const auto& [file, names] : by_file) {
    TANDEM_ASSIGN_OR_RETURN(const SafetensorsFile* shard, Shard(file));
    for (const std::string& name : names) {
      TANDEM_RETURN_IF_ERROR(Info(name).status());
      TANDEM_RETURN_IF_ERROR(shard->Read(name).status());
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::checkpoint

// checkpoint/safetensors.h
//
// One checkpoint shard in the safetensors format (https://github.com/huggingface/safetensors):
//
//   [8 bytes]  N, the header length, little-endian uint64
//   [N bytes]  JSON header: {"<tensor>": {"dtype": "F32", "shape": [2, 3],
//                                         "data_offsets": [begin, end]}, ...,
//                            "__metadata__": {"<key>": "<string value>", ...}}
//              padded with spaces to a multiple of 8 bytes
//   [rest]     raw little-endian tensor bytes; offsets are relative to the start of
//              this block, contiguous, in order, and cover it exactly.
//
// tandem stores a CRC32C of every tensor's bytes in __metadata__ as
// "crc32c:<tensor name>": "<decimal uint32>" and requires it when reading its own
// files (checkpoints, exports), so a flipped
// bit anywhere in the data is reported as DATA_LOSS naming the file and the tensor,
// and a CRC32C of the header ("header_crc32c"), checked when present, so a flipped
// byte in a tensor's name, dtype, shape or offsets is DATA_LOSS as well.
// Supported dtypes: F32, BF16, I32, I64, U8, BOOL. Any safetensors reader can load a
// tandem shard (it ignores __metadata__ contents).
//
// SafetensorsFile treats the bytes as untrusted: a header length beyond the file, a
// header that is not JSON or has the wrong shape, an unknown dtype, a shape that does
// not match its byte range, overlapping / out-of-range / non-contiguous offsets,
// truncated data and CRC mismatches are DATA_LOSS errors naming the file (and the tensor
// where there is one). It never crashes and never allocates more than the file's size
// plus the tensors it returns (which are bounded by the file's size).
//
// Thread safety: EncodeSafetensors / WriteSafetensors are pure functions of their
// arguments (WriteSafetensors writes atomically through env::WriteFileAtomic). A
// SafetensorsFile is immutable after Open/Parse; its const methods may be called
// concurrently.
#ifndef TANDEM_CHECKPOINT_SAFETENSORS_H_
#define TANDEM_CHECKPOINT_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "framework/tensor/tensor.h"

namespace tandem::checkpoint {

using NamedTensor = std::pair<std::string, Tensor>;

// Largest header we accept (as the reference implementation does): 100 MB.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;
// Key prefix of the per-tensor CRC32C entries in __metadata__.
inline constexpr char kCrcMetadataPrefix[] = "crc32c:";
// __metadata__ key of the CRC32C of the header itself (its compact JSON without this
// key), checked when present.
inline constexpr char kHeaderCrcKey[] = "header_crc32c";

// "F32", "BF16", "I32", "I64", "U8", "BOOL"; INVALID_ARGUMENT for other dtypes.
absl::StatusOr<std::string> SafetensorsDTypeName(DType dtype);
// The inverse; INVALID_ARGUMENT naming `name` for anything else.
absl::StatusOr<DType> ParseSafetensorsDType(absl::string_view name);

// Returns the bytes of a shard holding `tensors` (laid out in name order) and
// `metadata` plus a "crc32c:<name>" entry per tensor. Names must be unique, non-empty,
// printable ASCII, not "__metadata__"; tensors must be initialized with a supported
// dtype. Errors are INVALID_ARGUMENT naming the tensor.
absl::StatusOr<std::string> EncodeSafetensors(
    absl::Span<const NamedTensor> tensors, const std::map<std::string, std::string>& metadata = {});

// EncodeSafetensors, then env::WriteFileAtomic(path) (temp file, fsync, rename).
absl::Status WriteSafetensors(const std::string& path, absl::Span<const NamedTensor> tensors,
                              const std::map<std::string, std::string>& metadata = {});

// Where one tensor lies in a shard.
struct SafetensorsEntry {
  DType dtype = DType::kInvalid;
  TensorShape shape;
  uint64_t begin = 0;  // Relative to the start of the data block.
  uint64_t end = 0;
};

class SafetensorsFile {
 public:
  // Reads and validates the whole file at `path` (header and layout; CRCs are checked
  // by Read). NOT_FOUND if the file is missing, DATA_LOSS naming `path` if malformed.
  static absl::StatusOr<SafetensorsFile> Open(const std::string& path);
  // Validates `bytes` as a shard; `path` is only used in messages.
  static absl::StatusOr<SafetensorsFile> Parse(std::string path, std::string bytes);

  SafetensorsFile(SafetensorsFile&&) = default;
  SafetensorsFile& operator=(SafetensorsFile&&) = default;

  const std::string& path() const { return path_; }
  // Tensor names, sorted.
  std::vector<std::string> TensorNames() const;
  bool Contains(const std::string& name) const { return entries_.contains(name); }
  // NOT_FOUND naming the file and tensor if absent.
  absl::StatusOr<SafetensorsEntry> Info(const std::string& name) const;
  // Whether Read insists on a tensor's CRC32C. kWhenPresent is for files from other
  // writers (Python's safetensors, PyTorch, JAX): they carry no CRCs, and everything
  // else (header bounds, dtypes, shapes, offsets) is validated all the same.
  enum class CrcCheck { kRequired, kWhenPresent };
  // Copies the tensor out after checking its CRC32C. NOT_FOUND if absent; DATA_LOSS
  // naming the file and the tensor if its CRC is wrong, missing (under kRequired) or
  // malformed, or a BOOL byte is not 0 or 1.
  absl::StatusOr<Tensor> Read(const std::string& name, CrcCheck check = CrcCheck::kRequired) const;
  // __metadata__, including the crc32c entries.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;

  std::string path_;
  std::string bytes_;
  size_t data_start_ = 0;
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace tandem::checkpoint

#endif  // TANDEM_CHECKPOINT_SAFETENSORS_H_

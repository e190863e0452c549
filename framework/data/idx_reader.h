// framework/data/idx_reader.h
//
// Reads IDX files (the MNIST / Fashion-MNIST format), plain or gzip-compressed: a
// big-endian header (magic 0x0000TTRR: type TT, rank RR; RR dimension sizes) and the
// raw elements. Only unsigned-byte data (type 0x08) is supported, which is what the
// MNIST family uses. Malformed files (bad magic, truncated data, sizes that overflow
// or disagree with the file length) are INVALID_ARGUMENT / DATA_LOSS naming the file.
//
// Thread safety: pure functions.
#ifndef TANDEM_FRAMEWORK_DATA_IDX_READER_H_
#define TANDEM_FRAMEWORK_DATA_IDX_READER_H_

#include <string>

#include "absl/status/statusor.h"
#include "framework/tensor/tensor.h"

namespace tandem::data {

// Returns a uint8 tensor with the file's shape.
absl::StatusOr<Tensor> ReadIdxFile(const std::string& path);
// Decodes IDX bytes already in memory (after decompression); `name` is for errors.
absl::StatusOr<Tensor> DecodeIdx(absl::string_view bytes, const std::string& name);
// Decompresses gzip bytes (or returns plain bytes unchanged when not gzip).
// RESOURCE_EXHAUSTED naming `name` when the data inflates past a quarter of the
// memory this process may use (env::MemoryLimitBytes) or 8 GiB: a gzip bomb.
absl::StatusOr<std::string> MaybeGunzip(absl::string_view bytes, const std::string& name);

}  // namespace tandem::data

#endif  // TANDEM_FRAMEWORK_DATA_IDX_READER_H_

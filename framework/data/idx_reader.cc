#include "framework/data/idx_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "framework/core/env.h"
#include "framework/core/status.h"

namespace tandem::data {

absl::StatusOr<std::string> MaybeGunzip(absl::string_view bytes, const std::string& name) {
  if (bytes.size() < 2 || static_cast<unsigned char>(bytes[0]) != 0x1f ||
      static_cast<unsigned char>(bytes[1]) != 0x8b) {
    return std::string(bytes);
  }
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
    return absl::InternalError(absl::StrCat(name, ": inflateInit failed"));
  }
  static const size_t max_out = static_cast<size_t>(
      std::min(env::MemoryLimitBytes() / 4, static_cast<double>(size_t{1} << 33)));
  std::string out;
  char buf[1 << 16];
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  zs.avail_in = static_cast<uInt>(bytes.size());
  int rc;
  do {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&zs);
      return absl::DataLossError(absl::StrCat(name, ": corrupt gzip data (zlib error ", rc, ")"));
    }
    if (!env::AppendBounded(&out, absl::string_view(buf, sizeof(buf) - zs.avail_out), max_out)) {
      inflateEnd(&zs);
      return absl::ResourceExhaustedError(
          absl::StrCat(name, ": decompresses to more than ", max_out >> 20,
                       " MiB (a quarter of the memory this process may use, at most 8 GiB)"));
    }
  } while (rc != Z_STREAM_END && (zs.avail_in > 0 || zs.avail_out == 0));
  inflateEnd(&zs);
  if (rc != Z_STREAM_END) {
    return absl::DataLossError(absl::StrCat(name, ": gzip stream is truncated"));
  }
  return out;
}

absl::StatusOr<Tensor> DecodeIdx(absl::string_view b, const std::string& name) {
  auto be32 = [&](size_t off) {
    return (static_cast<uint32_t>(static_cast<unsigned char>(b[off])) << 24) |
           (static_cast<uint32_t>(static_cast<unsigned char>(b[off + 1])) << 16) |
           (static_cast<uint32_t>(static_cast<unsigned char>(b[off + 2])) << 8) |
           static_cast<uint32_t>(static_cast<unsigned char>(b[off + 3]));
  };
  if (b.size() < 4) return absl::InvalidArgumentError(absl::StrCat(name, ": too short for IDX"));
  uint32_t magic = be32(0);
  if ((magic >> 16) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": not an IDX file (bad magic)"));
  }
  int type = (magic >> 8) & 0xff, rank = magic & 0xff;
  if (type != 0x08) {
    return absl::UnimplementedError(absl::StrCat(name, ": IDX element type 0x", absl::Hex(type),
                                                 " is not supported (only unsigned bytes)"));
  }
  if (rank < 1 || rank > 8) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": IDX rank ", rank, " out of range"));
  }
  size_t header = 4 + 4 * static_cast<size_t>(rank);
  if (b.size() < header) {
    return absl::DataLossError(absl::StrCat(name, ": truncated IDX header"));
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < rank; ++i) dims.push_back(be32(4 + 4 * i));
  TANDEM_ASSIGN_OR_RETURN(TensorShape shape, TensorShape::Create(dims));
  if (static_cast<uint64_t>(shape.num_elements()) != b.size() - header) {
    return absl::DataLossError(absl::StrCat(name, ": IDX header promises ", shape.num_elements(),
                                            " bytes of data, file has ", b.size() - header));
  }
  Tensor t(DType::kUInt8, shape);
  if (shape.num_elements() > 0) std::memcpy(t.raw_data(), b.data() + header, b.size() - header);
  return t;
}

absl::StatusOr<Tensor> ReadIdxFile(const std::string& path) {
  TANDEM_ASSIGN_OR_RETURN(std::string raw, env::ReadFile(path));
  TANDEM_ASSIGN_OR_RETURN(std::string bytes, MaybeGunzip(raw, path));
  return DecodeIdx(bytes, path);
}

}  // namespace tandem::data

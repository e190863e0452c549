#include "checkpoint/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <tuple>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "framework/core/crc32c.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "nlohmann/json.hpp"

namespace tandem::checkpoint {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors shards are little-endian; tandem writes host bytes as they are");

using json = nlohmann::json;

// Deepest JSON nesting a valid header has is 3 (root > tensor > shape); we allow some
// slack but refuse pathological nesting before handing the text to the parser.
constexpr int kMaxJsonDepth = 16;
// Header key of the string->string metadata map.
constexpr char kMetadataKey[] = "__metadata__";

bool IsPrintableAscii(absl::string_view s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

// Max bracket nesting of `text`, ignoring brackets inside strings.
int JsonDepth(absl::string_view text) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
      if (max_depth > kMaxJsonDepth) return max_depth;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

absl::Status Corrupt(absl::string_view path, absl::string_view what) {
  return absl::DataLossError(absl::StrCat(path, ": corrupt safetensors shard: ", what));
}

absl::Status CorruptTensor(absl::string_view path, absl::string_view name, absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat(path, ": corrupt safetensors shard: tensor ", name, ": ", what));
}

// Reads a non-negative integer that fits in uint64 from a JSON number.
bool GetUnsigned(const json& j, uint64_t* out) {
  if (j.is_number_unsigned()) {
    *out = j.get<uint64_t>();
    return true;
  }
  if (j.is_number_integer()) {
    int64_t v = j.get<int64_t>();
    if (v < 0) return false;
    *out = static_cast<uint64_t>(v);
    return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::string> SafetensorsDTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat:
      return std::string("F32");
    case DType::kBFloat16:
      return std::string("BF16");
    case DType::kInt32:
      return std::string("I32");
    case DType::kInt64:
      return std::string("I64");
    case DType::kUInt8:
      return std::string("U8");
    case DType::kBool:
      return std::string("BOOL");
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("dtype ", DTypeName(dtype), " cannot be stored in a safetensors shard"));
  }
}

absl::StatusOr<DType> ParseSafetensorsDType(absl::string_view name) {
  if (name == "F32") return DType::kFloat;
  if (name == "BF16") return DType::kBFloat16;
  if (name == "I32") return DType::kInt32;
  if (name == "I64") return DType::kInt64;
  if (name == "U8") return DType::kUInt8;
  if (name == "BOOL") return DType::kBool;
  return absl::InvalidArgumentError(
      absl::StrCat("unsupported safetensors dtype \"", IsPrintableAscii(name) ? name : "<binary>",
                   "\" (tandem reads F32, BF16, I32, I64, U8, BOOL)"));
}

// When __metadata__ has kHeaderCrcKey (tandem writes it), the CRC32C of the header's
// compact JSON without that key must match it: a flipped byte in a tensor's name,
// dtype or shape is then corruption, not a model/checkpoint mismatch.
absl::Status CheckHeaderCrc(const std::string& path, const json& header) {
  auto meta = header.find(kMetadataKey);
  if (meta == header.end() || !meta->is_object()) return absl::OkStatus();
  auto crc = meta->find(kHeaderCrcKey);
  if (crc == meta->end()) return absl::OkStatus();
  uint32_t want;
  if (!crc->is_string() || !absl::SimpleAtoi(crc->get<std::string>(), &want)) {
    return Corrupt(path, absl::StrCat("__metadata__ ", kHeaderCrcKey, " is not a uint32"));
  }
  json rest = header;
  rest[kMetadataKey].erase(kHeaderCrcKey);
  const uint32_t got = crc32c::Value(rest.dump());
  if (got != want) {
    return Corrupt(path, absl::StrCat("header crc32c mismatch: the header has ", got,
                                      ", __metadata__ says ", want));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> EncodeSafetensors(absl::Span<const NamedTensor> tensors,
                                              const std::map<std::string, std::string>& metadata) {
  std::map<std::string, const Tensor*> sorted;
  for (const auto& [name, tensor] : tensors) {
    if (name.empty() || name == kMetadataKey || !IsPrintableAscii(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor name \"", absl::CEscape(name),
                       "\" cannot be saved: names must be non-empty printable ASCII"));
    }
    if (!tensor.IsInitialized()) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", name, " is uninitialized"));
    }
    if (!sorted.emplace(name, &tensor).second) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", name, " is listed twice"));
    }
  }
  json header = json::object();
  json meta = json::object();
  for (const auto& [k, v] : metadata) {
    if (!IsPrintableAscii(k) || !IsPrintableAscii(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("metadata entry \"", absl::CEscape(k), "\" is not printable ASCII"));
    }
    meta[k] = v;
  }
  uint64_t offset = 0;
  for (const auto& [name, tensor] : sorted) {
    absl::StatusOr<std::string> dtype = SafetensorsDTypeName(tensor->dtype());
    if (!dtype.ok()) return AnnotateStatus(dtype.status(), absl::StrCat("tensor ", name));
    const uint64_t bytes = tensor->TotalBytes();
    json entry = json::object();
    entry["dtype"] = *dtype;
    entry["shape"] = tensor->shape().dims();
    entry["data_offsets"] = json::array({offset, offset + bytes});
    header[name] = std::move(entry);
    meta[absl::StrCat(kCrcMetadataPrefix, name)] =
        absl::StrCat(crc32c::Value(tensor->raw_data(), bytes));
    offset += bytes;
  }
  header[kMetadataKey] = meta;
  header[kMetadataKey][kHeaderCrcKey] = absl::StrCat(crc32c::Value(header.dump()));
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');

  std::string out;
  out.reserve(8 + header_text.size() + offset);
  uint64_t n = header_text.size();
  char len[8];
  std::memcpy(len, &n, 8);
  out.append(len, 8);
  out.append(header_text);
  for (const auto& [name, tensor] : sorted) {
    if (tensor->TotalBytes() > 0) out.append(tensor->raw_data(), tensor->TotalBytes());
  }
  return out;
}

absl::Status WriteSafetensors(const std::string& path, absl::Span<const NamedTensor> tensors,
                              const std::map<std::string, std::string>& metadata) {
  absl::StatusOr<std::string> bytes = EncodeSafetensors(tensors, metadata);
  if (!bytes.ok()) return AnnotateStatus(bytes.status(), path);
  return env::WriteFileAtomic(path, *bytes);
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  TANDEM_ASSIGN_OR_RETURN(std::string bytes, env::ReadFile(path));
  return Parse(path, std::move(bytes));
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::Parse(std::string path, std::string bytes) {
  if (bytes.size() < 8) {
    return Corrupt(path, absl::StrCat("the file is ", bytes.size(),
                                      " bytes, shorter than the 8-byte header length"));
  }
  uint64_t header_len;
  std::memcpy(&header_len, bytes.data(), 8);
  const uint64_t available = bytes.size() - 8;
  if (header_len > available || header_len > kMaxSafetensorsHeaderBytes) {
    return Corrupt(path, absl::StrCat("header length ", header_len, " exceeds the ", available,
                                      " bytes after the length field (truncated?) or the ",
                                      kMaxSafetensorsHeaderBytes, "-byte limit"));
  }
  absl::string_view header_text(bytes.data() + 8, header_len);
  if (JsonDepth(header_text) > kMaxJsonDepth) {
    return Corrupt(path, "header JSON is nested too deeply");
  }
  json header = json::parse(header_text.begin(), header_text.end(), nullptr,
                            /*allow_exceptions=*/false);
  if (header.is_discarded()) return Corrupt(path, "header is not valid JSON");
  if (!header.is_object()) return Corrupt(path, "header is not a JSON object");

  TANDEM_RETURN_IF_ERROR(CheckHeaderCrc(path, header));

  SafetensorsFile file;
  file.data_start_ = 8 + header_len;
  const uint64_t data_len = bytes.size() - file.data_start_;
  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      if (!value.is_object()) return Corrupt(path, "__metadata__ is not an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) {
          return Corrupt(path, absl::StrCat("__metadata__ value of \"", absl::CEscape(k),
                                            "\" is not a string"));
        }
        file.metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    if (!value.is_object()) return CorruptTensor(path, name, "entry is not an object");
    auto dtype_it = value.find("dtype");
    auto shape_it = value.find("shape");
    auto offsets_it = value.find("data_offsets");
    if (dtype_it == value.end() || !dtype_it->is_string() || shape_it == value.end() ||
        !shape_it->is_array() || offsets_it == value.end() || !offsets_it->is_array() ||
        offsets_it->size() != 2) {
      return CorruptTensor(path, name,
                           "entry needs \"dtype\" (string), \"shape\" (array) and "
                           "\"data_offsets\" ([begin, end])");
    }
    SafetensorsEntry entry;
    absl::StatusOr<DType> dtype = ParseSafetensorsDType(dtype_it->get<std::string>());
    if (!dtype.ok()) return CorruptTensor(path, name, dtype.status().message());
    entry.dtype = *dtype;
    if (shape_it->size() > static_cast<size_t>(TensorShape::kMaxRank)) {
      return CorruptTensor(path, name, absl::StrCat("rank ", shape_it->size(), " is too large"));
    }
    Dims dims;
    for (const json& d : *shape_it) {
      uint64_t v;
      if (!GetUnsigned(d, &v) || v > static_cast<uint64_t>(TensorShape::kMaxElements)) {
        return CorruptTensor(path, name, "shape has a negative, huge or non-integer dimension");
      }
      dims.push_back(static_cast<int64_t>(v));
    }
    absl::StatusOr<TensorShape> shape = TensorShape::Create(dims);
    if (!shape.ok()) return CorruptTensor(path, name, shape.status().message());
    entry.shape = *shape;
    if (!GetUnsigned((*offsets_it)[0], &entry.begin) ||
        !GetUnsigned((*offsets_it)[1], &entry.end) || entry.begin > entry.end) {
      return CorruptTensor(path, name, "data_offsets are not two ascending non-negative integers");
    }
    // num_elements <= 2^40 and element size <= 8, so this cannot overflow.
    const uint64_t want =
        static_cast<uint64_t>(entry.shape.num_elements()) * DTypeSize(entry.dtype);
    if (entry.end - entry.begin != want) {
      return CorruptTensor(
          path, name,
          absl::StrCat("data_offsets [", entry.begin, ", ", entry.end, "] span ",
                       entry.end - entry.begin, " bytes but ", dtype_it->get<std::string>(),
                       entry.shape.DebugString(), " needs ", want));
    }
    if (entry.end > data_len) {
      return CorruptTensor(path, name,
                           absl::StrCat("data_offsets [", entry.begin, ", ", entry.end,
                                        "] extend past the end of the data (", data_len,
                                        " bytes); the file is truncated"));
    }
    file.entries_.emplace(name, std::move(entry));
  }

  // Offsets must tile [0, data_len) exactly, in order.
  std::vector<std::pair<const std::string*, const SafetensorsEntry*>> by_offset;
  for (const auto& [name, entry] : file.entries_) by_offset.emplace_back(&name, &entry);
  std::sort(by_offset.begin(), by_offset.end(), [](const auto& a, const auto& b) {
    return std::tie(a.second->begin, a.second->end) < std::tie(b.second->begin, b.second->end);
  });
  uint64_t expected = 0;
  const std::string* previous = nullptr;
  for (const auto& [name, entry] : by_offset) {
    if (entry->begin != expected) {
      return CorruptTensor(
          path, *name,
          absl::StrCat("data_offsets [", entry->begin, ", ", entry->end, "] ",
                       entry->begin < expected ? "overlap" : "leave a gap after", " ",
                       previous ? absl::StrCat("tensor ", *previous) : std::string("the start"),
                       " (which ends at ", expected, ")"));
    }
    expected = entry->end;
    previous = name;
  }
  if (expected != data_len) {
    return Corrupt(path, absl::StrCat("tensors cover ", expected,
                                      " bytes of data but the file has ", data_len));
  }
  file.path_ = std::move(path);
  file.bytes_ = std::move(bytes);
  return file;
}

std::vector<std::string> SafetensorsFile::TensorNames() const {
  std::vector<std::string> names;
  names.reserve(entries_.size());
  for (const auto& [name, entry] : entries_) names.push_back(name);
  return names;
}

absl::StatusOr<SafetensorsEntry> SafetensorsFile::Info(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat(path_, ": no tensor ", name, " in this shard"));
  }
  return it->second;
}

absl::StatusOr<Tensor> SafetensorsFile::Read(const std::string& name, CrcCheck check) const {
  TANDEM_ASSIGN_OR_RETURN(SafetensorsEntry entry, Info(name));
  const char* src = bytes_.data() + data_start_ + entry.begin;
  const size_t n = entry.end - entry.begin;
  auto crc_it = metadata_.find(absl::StrCat(kCrcMetadataPrefix, name));
  uint32_t want_crc = 0;
  const bool has_crc = crc_it != metadata_.end();
  if ((has_crc || check == CrcCheck::kRequired) &&
      (!has_crc || !absl::SimpleAtoi(crc_it->second, &want_crc))) {
    return CorruptTensor(path_, name, "no valid crc32c entry in __metadata__");
  }
  const uint32_t got_crc = has_crc ? crc32c::Value(src, n) : 0;
  if (got_crc != want_crc) {
    return CorruptTensor(
        path_, name,
        absl::StrCat("crc32c mismatch: the data has ", got_crc, ", the header says ", want_crc));
  }
  if (entry.dtype == DType::kBool) {
    for (size_t i = 0; i < n; ++i) {
      if (static_cast<unsigned char>(src[i]) > 1) {
        return CorruptTensor(path_, name, absl::StrCat("BOOL byte ", i, " is not 0 or 1"));
      }
    }
  }
  Tensor t(entry.dtype, entry.shape);
  if (n > 0) std::memcpy(t.raw_data(), src, n);
  return t;
}

}  // namespace tandem::checkpoint

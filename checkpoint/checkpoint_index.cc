#include "checkpoint/checkpoint_index.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "framework/core/crc32c.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "nlohmann/json.hpp"

namespace tandem::checkpoint {
namespace {

using json = nlohmann::json;

// More parts than any real partitioner makes; bounds the O(parts^2) overlap check.
constexpr size_t kMaxSliceParts = 4096;

absl::Status Bad(absl::string_view path, absl::string_view what) {
  return absl::DataLossError(absl::StrCat(path, ": corrupt checkpoint index: ", what));
}

bool ParseDims(const json& j, Dims* out) {
  if (!j.is_array() || j.size() > static_cast<size_t>(TensorShape::kMaxRank)) return false;
  out->clear();
  for (const json& d : j) {
    if (!d.is_number_integer()) return false;
    int64_t v = d.get<int64_t>();
    if (v < 0 || v > TensorShape::kMaxElements) return false;
    out->push_back(v);
  }
  return true;
}

}  // namespace

absl::Status ValidateSlicedTensor(absl::string_view full, const SlicedTensor& t) {
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("slices of ", full, ": ", what));
  };
  absl::StatusOr<TensorShape> full_shape = TensorShape::Create(t.full_shape);
  if (!full_shape.ok()) return bad(full_shape.status().message());
  if (t.parts.empty() || t.parts.size() > kMaxSliceParts) return bad("bad number of parts");
  int64_t covered = 0;
  const size_t rank = t.full_shape.size();
  for (size_t i = 0; i < t.parts.size(); ++i) {
    const SlicePart& p = t.parts[i];
    if (p.offset.size() != rank || p.shape.size() != rank) {
      return bad(absl::StrCat("part ", p.part, " has a rank other than ", rank));
    }
    int64_t volume = 1;
    for (size_t d = 0; d < rank; ++d) {
      if (p.offset[d] > t.full_shape[d] || p.shape[d] > t.full_shape[d] - p.offset[d]) {
        return bad(absl::StrCat("part ", p.part, " lies outside the full shape"));
      }
      volume *= p.shape[d];
    }
    covered += volume;
    for (size_t j = 0; j < i; ++j) {
      const SlicePart& q = t.parts[j];
      bool disjoint = volume == 0;
      for (size_t d = 0; d < rank && !disjoint; ++d) {
        disjoint =
            p.offset[d] + p.shape[d] <= q.offset[d] || q.offset[d] + q.shape[d] <= p.offset[d];
      }
      if (!disjoint) return bad(absl::StrCat("parts ", q.part, " and ", p.part, " overlap"));
    }
  }
  if (covered != full_shape->num_elements()) {
    return bad(
        absl::StrCat("parts cover ", covered, " of ", full_shape->num_elements(), " elements"));
  }
  return absl::OkStatus();
}

namespace {

absl::Status ValidateSlices(absl::string_view path, const std::string& full, const SlicedTensor& t,
                            const std::map<std::string, std::string>& weight_map) {
  for (const SlicePart& p : t.parts) {
    if (!weight_map.contains(p.part)) {
      return Bad(path,
                 absl::StrCat("slices of ", full, ": part ", p.part, " is not in the weight_map"));
    }
  }
  absl::Status s = ValidateSlicedTensor(full, t);
  if (!s.ok()) return Bad(path, s.message());
  return absl::OkStatus();
}

}  // namespace

std::string CheckpointBaseName(int64_t step) { return absl::StrCat("model.ckpt-", step); }

std::string IndexPath(absl::string_view prefix) { return absl::StrCat(prefix, ".index.json"); }

std::string ShardFileName(absl::string_view prefix, int shard, int num_shards) {
  return absl::StrFormat("%s-%05d-of-%05d.safetensors", env::Basename(prefix), shard, num_shards);
}

bool IsFileOfCheckpoint(absl::string_view base, absl::string_view file) {
  if (!absl::ConsumePrefix(&file, base)) return false;
  if (file == ".index.json") return true;
  // "-00000-of-00001.safetensors"
  if (!absl::ConsumePrefix(&file, "-") || !absl::ConsumeSuffix(&file, ".safetensors")) {
    return false;
  }
  if (file.size() != 14 || file.substr(5, 4) != "-of-") return false;
  for (size_t i : {0, 1, 2, 3, 4, 9, 10, 11, 12, 13}) {
    if (file[i] < '0' || file[i] > '9') return false;
  }
  return true;
}

namespace {

// The CRC32C of an index's compact JSON (without kIndexCrcKey).
uint32_t IndexCrc(const json& j) {
  return crc32c::Value(j.dump(-1, ' ', false, json::error_handler_t::replace));
}

}  // namespace

std::string SerializeIndex(const CheckpointIndex& index) {
  json j = json::object();
  j["metadata"] = {{"global_step", index.global_step},
                   {"format_version", index.format_version},
                   {"num_shards", index.num_shards},
                   {"total_size", index.total_size}};
  j["weight_map"] = index.weight_map;
  if (!index.slices.empty()) {
    json slices = json::object();
    for (const auto& [full, t] : index.slices) {
      json parts = json::array();
      for (const SlicePart& p : t.parts) {
        parts.push_back({{"part", p.part}, {"offset", p.offset}, {"shape", p.shape}});
      }
      slices[full] = {{"full_shape", t.full_shape}, {"parts", std::move(parts)}};
    }
    j["slices"] = std::move(slices);
  }
  j["metadata"][kIndexCrcKey] = IndexCrc(j);
  // Names are node names (ASCII); replace rather than throw on anything else.
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

absl::StatusOr<CheckpointIndex> ParseIndex(absl::string_view path, absl::string_view text) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Bad(path, "not valid JSON");
  if (!j.is_object()) return Bad(path, "not a JSON object");
  CheckpointIndex index;
  auto meta = j.find("metadata");
  if (meta == j.end() || !meta->is_object()) return Bad(path, "no \"metadata\" object");
  if (auto crc = meta->find(kIndexCrcKey); crc != meta->end()) {
    json rest = j;
    rest["metadata"].erase(kIndexCrcKey);
    if (!crc->is_number_unsigned() || crc->get<uint64_t>() != IndexCrc(rest)) {
      return Bad(path, absl::StrCat("the index does not match its ", kIndexCrcKey,
                                    " (a changed name, file or number)"));
    }
  }
  auto step = meta->find("global_step");
  auto version = meta->find("format_version");
  if (step == meta->end() || !step->is_number_integer() || version == meta->end() ||
      !version->is_number_integer()) {
    return Bad(path, "metadata needs integer \"global_step\" and \"format_version\"");
  }
  index.global_step = step->get<int64_t>();
  int64_t v = version->get<int64_t>();
  if (v != kCheckpointFormatVersion) {
    return absl::UnimplementedError(absl::StrCat(path, ": checkpoint format_version ", v,
                                                 " is not supported (this build reads ",
                                                 kCheckpointFormatVersion, ")"));
  }
  index.format_version = static_cast<int>(v);
  if (auto it = meta->find("num_shards"); it != meta->end() && it->is_number_integer()) {
    index.num_shards = static_cast<int>(std::clamp<int64_t>(it->get<int64_t>(), 0, 1 << 30));
  }
  if (auto it = meta->find("total_size"); it != meta->end() && it->is_number_integer()) {
    index.total_size = it->get<int64_t>();
  }
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object()) return Bad(path, "no \"weight_map\" object");
  for (const auto& [name, file] : wm->items()) {
    if (!file.is_string()) return Bad(path, absl::StrCat("weight_map[", name, "] not a string"));
    std::string f = file.get<std::string>();
    if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..") {
      return Bad(path, absl::StrCat("weight_map[", name, "] is not a plain file name"));
    }
    index.weight_map[name] = std::move(f);
  }
  if (auto sl = j.find("slices"); sl != j.end()) {
    if (!sl->is_object()) return Bad(path, "\"slices\" is not an object");
    for (const auto& [full, entry] : sl->items()) {
      SlicedTensor t;
      if (!entry.is_object() || !entry.contains("full_shape") || !entry.contains("parts") ||
          !ParseDims(entry["full_shape"], &t.full_shape) || !entry["parts"].is_array()) {
        return Bad(path, absl::StrCat("slices of ", full, ": need full_shape and parts"));
      }
      for (const json& p : entry["parts"]) {
        SlicePart part;
        if (!p.is_object() || !p.contains("part") || !p["part"].is_string() ||
            !p.contains("offset") || !ParseDims(p["offset"], &part.offset) ||
            !p.contains("shape") || !ParseDims(p["shape"], &part.shape)) {
          return Bad(path, absl::StrCat("slices of ", full, ": a part needs part, offset, shape"));
        }
        part.part = p["part"].get<std::string>();
        t.parts.push_back(std::move(part));
        if (t.parts.size() > kMaxSliceParts) break;
      }
      TANDEM_RETURN_IF_ERROR(ValidateSlices(path, full, t, index.weight_map));
      index.slices[full] = std::move(t);
    }
  }
  return index;
}

absl::StatusOr<CheckpointIndex> ReadIndex(const std::string& path) {
  TANDEM_ASSIGN_OR_RETURN(std::string text, env::ReadFile(path));
  return ParseIndex(path, text);
}

absl::Status WriteIndex(const std::string& path, const CheckpointIndex& index) {
  return env::WriteFileAtomic(path, SerializeIndex(index));
}

int64_t CheckpointGlobalStep(absl::string_view prefix) {
  absl::StatusOr<CheckpointIndex> index = ReadIndex(IndexPath(prefix));
  return index.ok() ? index->global_step : -1;
}

}  // namespace tandem::checkpoint

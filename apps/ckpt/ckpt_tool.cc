#include "apps/ckpt/ckpt_tool.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "checkpoint/checkpoint_index.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_state.h"
#include "checkpoint/safetensors.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/tensor/tensor_format.h"

namespace tandem::ckpt {
namespace {

using checkpoint::CheckpointIndex;
using checkpoint::CheckpointReader;
using checkpoint::NamedTensor;
using checkpoint::SafetensorsEntry;
using checkpoint::SlicedTensor;
using checkpoint::SlicePart;

constexpr absl::string_view kIndexSuffix = ".index.json";

// "12 B", "1.5 KiB", "3.2 MiB".
std::string HumanBytes(int64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  return absl::StrFormat("%.1f %s", v, units[u]);
}

std::string FormatTimestamp(double seconds) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC",
                          absl::FromUnixMicros(static_cast<int64_t>(seconds * 1e6)),
                          absl::UTCTimeZone());
}

std::string DimsString(const Dims& dims) { return TensorShape(dims).DebugString(); }

// Rows of cells printed as left-aligned columns two spaces apart.
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void Print(std::ostream& out, absl::string_view indent = "") const {
    std::vector<size_t> width;
    for (const auto& row : rows_) {
      if (width.size() < row.size()) width.resize(row.size(), 0);
      for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    }
    for (const auto& row : rows_) {
      std::string line(indent);
      for (size_t c = 0; c < row.size(); ++c) {
        line += row[c];
        if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
      }
      out << line << "\n";
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

// Step from a base name "model.ckpt-<step>"; -1 when it has none.
int64_t StepOfBaseName(const std::string& base) {
  size_t dash = base.rfind('-');
  int64_t step;
  if (dash == std::string::npos || !absl::SimpleAtoi(base.substr(dash + 1), &step)) return -1;
  return step;
}

// The checkpoint to read for dump / export: the prefix itself or a directory's latest.
absl::StatusOr<std::string> SinglePrefix(const std::string& path) {
  TANDEM_ASSIGN_OR_RETURN(ResolvedPath resolved, Resolve(path));
  if (resolved.latest.empty()) {
    return absl::NotFoundError(absl::StrCat("no checkpoints in model directory ", path));
  }
  return resolved.latest;
}

// Distinct shard files of an index, sorted.
std::set<std::string> ShardFiles(const CheckpointIndex& index) {
  std::set<std::string> files;
  for (const auto& [name, file] : index.weight_map) files.insert(file);
  return files;
}

absl::Status ListModelDir(const ResolvedPath& resolved, std::ostream& out) {
  out << "Model directory " << resolved.model_dir << ": " << resolved.prefixes.size()
      << (resolved.prefixes.size() == 1 ? " checkpoint" : " checkpoints");
  if (!resolved.latest.empty()) out << " (latest " << env::Basename(resolved.latest) << ")";
  out << "\n";
  if (resolved.prefixes.empty()) return absl::OkStatus();
  absl::Status first_error;
  std::vector<std::string> problems;
  Table table({"", "STEP", "SHARDS", "SIZE", "SAVED", "CHECKPOINT"});
  for (size_t i = 0; i < resolved.prefixes.size(); ++i) {
    const std::string& prefix = resolved.prefixes[i];
    const std::string mark = prefix == resolved.latest ? "*" : "";
    const std::string saved =
        i < resolved.timestamps.size() ? FormatTimestamp(resolved.timestamps[i]) : "-";
    const std::string shown =
        env::Dirname(prefix) == resolved.model_dir ? std::string(env::Basename(prefix)) : prefix;
    absl::StatusOr<CheckpointIndex> index = checkpoint::ReadIndex(checkpoint::IndexPath(prefix));
    if (!index.ok()) {
      table.Add({mark, "?", "?", "?", saved, shown});
      problems.push_back(std::string(index.status().message()));
      if (first_error.ok()) first_error = index.status();
      continue;
    }
    int64_t size = 0;
    absl::StatusOr<int64_t> index_size = env::FileSize(checkpoint::IndexPath(prefix));
    if (index_size.ok()) size += *index_size;
    std::set<std::string> files = ShardFiles(*index);
    for (const std::string& file : files) {
      const std::string shard = env::JoinPath(env::Dirname(prefix), file);
      absl::StatusOr<int64_t> shard_size = env::FileSize(shard);
      if (!shard_size.ok()) {
        problems.push_back(absl::StrCat(shard, ": missing shard file of ", shown));
        if (first_error.ok()) {
          first_error = absl::NotFoundError(absl::StrCat(shard, ": missing shard file"));
        }
        continue;
      }
      size += *shard_size;
    }
    table.Add({mark, absl::StrCat(index->global_step),
               absl::StrCat(std::max<int64_t>(index->num_shards, files.size())), HumanBytes(size),
               saved, shown});
  }
  table.Print(out);
  for (const std::string& p : problems) out << "problem: " << p << "\n";
  return first_error;
}

absl::Status ListCheckpoint(const std::string& prefix, std::ostream& out) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader, CheckpointReader::Open(prefix));
  const CheckpointIndex& index = reader->index();
  const std::vector<std::string> names = reader->TensorNames();
  out << "Checkpoint " << prefix << ": global_step " << index.global_step << ", "
      << ShardFiles(index).size() << " shard(s), " << names.size() << " tensor(s), "
      << HumanBytes(index.total_size) << " of tensor data\n";
  absl::Status first_error;
  std::map<std::string, SafetensorsEntry> infos;
  auto info_of = [&](const std::string& name) -> const SafetensorsEntry* {
    auto it = infos.find(name);
    if (it != infos.end()) return &it->second;
    absl::StatusOr<SafetensorsEntry> info = reader->Info(name);
    if (!info.ok()) {
      if (first_error.ok()) first_error = info.status();
      return nullptr;
    }
    return &infos.emplace(name, *std::move(info)).first->second;
  };
  Table table({"NAME", "DTYPE", "SHAPE", "SHARD"});
  for (const std::string& name : names) {
    const SafetensorsEntry* info = info_of(name);
    table.Add({name, info ? std::string(DTypeName(info->dtype)) : "?",
               info ? info->shape.DebugString() : "?", index.weight_map.at(name)});
  }
  table.Print(out);
  if (!index.slices.empty()) {
    out << "Partitioned tensors (assembled from the parts above):\n";
    Table sliced({"NAME", "DTYPE", "FULL SHAPE", "PARTS"});
    for (const auto& [name, t] : index.slices) {
      const SafetensorsEntry* info = t.parts.empty() ? nullptr : info_of(t.parts[0].part);
      std::vector<std::string> parts;
      for (const SlicePart& p : t.parts) {
        parts.push_back(absl::StrCat(p.part, " (offset ", DimsString(p.offset), " shape ",
                                     DimsString(p.shape), ")"));
      }
      sliced.Add({name, info ? std::string(DTypeName(info->dtype)) : "?", DimsString(t.full_shape),
                  absl::StrJoin(parts, ", ")});
    }
    sliced.Print(out);
  }
  return first_error;
}

}  // namespace

absl::StatusOr<ResolvedPath> Resolve(const std::string& path_arg) {
  std::string path = path_arg;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (path.empty()) return absl::InvalidArgumentError("empty checkpoint path");
  ResolvedPath resolved;
  if (env::IsDirectory(path)) {
    resolved.is_model_dir = true;
    resolved.model_dir = path;
    absl::StatusOr<checkpoint::CheckpointState> state = checkpoint::ReadCheckpointState(path);
    if (state.ok()) {
      resolved.prefixes = state->all_model_checkpoint_paths;
      resolved.latest = state->model_checkpoint_path;
      if (resolved.prefixes.empty() && !resolved.latest.empty()) {
        resolved.prefixes.push_back(resolved.latest);
      }
      if (resolved.latest.empty() && !resolved.prefixes.empty()) {
        resolved.latest = resolved.prefixes.back();
      }
      if (state->all_model_checkpoint_timestamps.size() == resolved.prefixes.size()) {
        resolved.timestamps = state->all_model_checkpoint_timestamps;
      }
      return resolved;
    }
    if (!absl::IsNotFound(state.status())) return state.status();
    // No state file: every index in the directory, by step.
    TANDEM_ASSIGN_OR_RETURN(std::vector<std::string> entries, env::ListDir(path));
    std::vector<std::pair<int64_t, std::string>> found;
    for (const std::string& entry : entries) {
      if (!absl::EndsWith(entry, kIndexSuffix)) continue;
      std::string base = entry.substr(0, entry.size() - kIndexSuffix.size());
      found.emplace_back(StepOfBaseName(base), env::JoinPath(path, base));
    }
    std::sort(found.begin(), found.end());
    for (auto& [step, prefix] : found) resolved.prefixes.push_back(std::move(prefix));
    if (!resolved.prefixes.empty()) resolved.latest = resolved.prefixes.back();
    return resolved;
  }
  std::string prefix = path;
  if (absl::EndsWith(prefix, kIndexSuffix)) prefix.resize(prefix.size() - kIndexSuffix.size());
  if (!env::FileExists(checkpoint::IndexPath(prefix))) {
    std::string hint;
    if (absl::EndsWith(path, ".safetensors")) {
      hint = " (pass the checkpoint prefix \"<dir>/model.ckpt-<step>\", not a shard file)";
    }
    return absl::NotFoundError(absl::StrCat(path,
                                            ": neither a model directory nor a checkpoint "
                                            "prefix (no ",
                                            checkpoint::IndexPath(prefix), ")", hint));
  }
  resolved.prefixes = {prefix};
  resolved.latest = prefix;
  return resolved;
}

absl::Status List(const std::string& path, std::ostream& out) {
  TANDEM_ASSIGN_OR_RETURN(ResolvedPath resolved, Resolve(path));
  if (resolved.is_model_dir) return ListModelDir(resolved, out);
  return ListCheckpoint(resolved.latest, out);
}

absl::Status Verify(const std::string& path, std::ostream& out) {
  TANDEM_ASSIGN_OR_RETURN(ResolvedPath resolved, Resolve(path));
  auto verify_one = [&](const std::string& prefix) -> absl::Status {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader,
                            CheckpointReader::Open(prefix));
    TANDEM_RETURN_IF_ERROR(reader->Verify());
    out << "OK " << prefix << ": " << reader->index().weight_map.size() << " tensors in "
        << ShardFiles(reader->index()).size() << " shards\n";
    return absl::OkStatus();
  };
  if (!resolved.is_model_dir) return verify_one(resolved.latest);
  if (resolved.prefixes.empty()) {
    return absl::NotFoundError(absl::StrCat("no checkpoints in model directory ", path));
  }
  int failed = 0;
  for (const std::string& prefix : resolved.prefixes) {
    absl::Status s = verify_one(prefix);
    if (!s.ok()) {
      ++failed;
      out << "FAILED " << prefix << ": " << s.message() << "\n";
    }
  }
  if (failed == 0) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(failed, " of ", resolved.prefixes.size(),
                                          " checkpoints in ", path, " failed verification"));
}

absl::Status Dump(const std::string& path, const std::string& name, int64_t limit,
                  std::ostream& out) {
  TANDEM_ASSIGN_OR_RETURN(std::string prefix, SinglePrefix(path));
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader, CheckpointReader::Open(prefix));
  absl::StatusOr<Tensor> read = reader->Read(name);
  if (absl::IsNotFound(read.status())) {
    return absl::NotFoundError(
        absl::StrCat(read.status().message(), " (`ckpt ls ", prefix, "` lists its tensors)"));
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor t, std::move(read));
  const int64_t n = t.NumElements();
  out << name << ": " << DTypeName(t.dtype()) << " " << t.shape().DebugString() << ", " << n
      << (n == 1 ? " value" : " values");
  if (reader->index().slices.contains(name)) {
    out << " (assembled from " << reader->index().slices.at(name).parts.size() << " parts)";
  }
  out << "\n";
  const int64_t shown = limit < 0 ? n : std::min(limit, n);
  if (shown > 0) {
    std::string line = "[";
    for (int64_t i = 0; i < shown; ++i) absl::StrAppend(&line, i ? ", " : "", FormatElement(t, i));
    if (shown < n) absl::StrAppend(&line, ", ... (", n - shown, " more)");
    out << line << "]\n";
  }
  if (IsFloating(t.dtype()) && n > 0) {
    double lo = std::numeric_limits<double>::infinity();
    double hi = -lo;
    double sum = 0;
    int64_t finite = 0;
    int64_t nan = 0;
    int64_t inf = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = t.ValueAsDouble(i);
      if (std::isnan(v)) {
        ++nan;
        continue;
      }
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      if (std::isinf(v)) {
        ++inf;
      } else {
        sum += v;
        ++finite;
      }
    }
    if (nan == n) {
      out << "min nan  max nan  mean nan";
    } else {
      const double mean =
          inf > 0 ? std::numeric_limits<double>::quiet_NaN() : sum / static_cast<double>(finite);
      out << absl::StrFormat("min %.7g  max %.7g  mean %.7g", lo, hi, mean);
    }
    if (nan > 0) out << "  (" << nan << " nan)";
    if (inf > 0) out << "  (" << inf << " inf)";
    out << "\n";
  }
  return absl::OkStatus();
}

absl::Status Export(const std::string& path, const std::string& out_path, std::ostream& out) {
  TANDEM_ASSIGN_OR_RETURN(std::string prefix, SinglePrefix(path));
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader, CheckpointReader::Open(prefix));
  const CheckpointIndex& index = reader->index();
  // Never replace a file of the checkpoint being exported.
  for (const std::string& file : ShardFiles(index)) {
    if (env::JoinPath(env::Dirname(prefix), file) == out_path ||
        checkpoint::IndexPath(prefix) == out_path) {
      return absl::InvalidArgumentError(
          absl::StrCat(out_path, " is a file of the checkpoint ", prefix, "; choose another name"));
    }
  }
  std::set<std::string> parts;
  for (const auto& [name, sliced] : index.slices) {
    for (const SlicePart& p : sliced.parts) parts.insert(p.part);
  }
  std::vector<NamedTensor> tensors;
  for (const std::string& name : reader->TensorNames()) {
    if (parts.contains(name)) continue;
    TANDEM_ASSIGN_OR_RETURN(Tensor t, reader->Read(name));
    tensors.emplace_back(name, std::move(t));
  }
  for (const auto& [name, sliced] : index.slices) {
    if (index.weight_map.contains(name) && !parts.contains(name)) {
      return absl::DataLossError(
          absl::StrCat(checkpoint::IndexPath(prefix), ": partitioned tensor ", name,
                       " has the name of a stored tensor; cannot export both"));
    }
    TANDEM_ASSIGN_OR_RETURN(Tensor t, reader->Read(name));
    tensors.emplace_back(name, std::move(t));
  }
  std::sort(tensors.begin(), tensors.end(),
            [](const NamedTensor& a, const NamedTensor& b) { return a.first < b.first; });
  int64_t bytes = 0;
  for (const auto& [name, t] : tensors) bytes += static_cast<int64_t>(t.TotalBytes());
  const std::map<std::string, std::string> metadata = {
      {"global_step", absl::StrCat(index.global_step)}, {"source", prefix}};
  TANDEM_RETURN_IF_ERROR(checkpoint::WriteSafetensors(out_path, tensors, metadata));
  out << "Exported " << tensors.size() << " tensors (" << index.slices.size()
      << " partitioned, assembled) from " << prefix << " to " << out_path << " ("
      << HumanBytes(bytes) << " of tensor data)\n";
  return absl::OkStatus();
}

}  // namespace tandem::ckpt

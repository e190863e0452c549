#include "checkpoint/checkpoint_state.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "checkpoint/checkpoint_index.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "glog/logging.h"

namespace tandem::checkpoint {
namespace {

std::string FormatTimestamp(double t) { return absl::StrFormat("%.17g", t); }

// "model.ckpt-1" for "/dir/model.ckpt-1" when `dir` is its directory.
std::string RelativeTo(const std::string& dir, const std::string& path) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  if (absl::StartsWith(path, d + "/")) {
    std::string rest = path.substr(d.size() + 1);
    if (rest.find('/') == std::string::npos) return rest;
  }
  return path;
}

std::string Absolute(const std::string& dir, const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  return env::JoinPath(dir, path);
}

}  // namespace

std::string SerializeCheckpointState(const CheckpointState& state) {
  std::string out;
  absl::StrAppend(&out, "model_checkpoint_path: \"", absl::CEscape(state.model_checkpoint_path),
                  "\"\n");
  for (const std::string& p : state.all_model_checkpoint_paths) {
    absl::StrAppend(&out, "all_model_checkpoint_paths: \"", absl::CEscape(p), "\"\n");
  }
  for (double t : state.all_model_checkpoint_timestamps) {
    absl::StrAppend(&out, "all_model_checkpoint_timestamps: ", FormatTimestamp(t), "\n");
  }
  absl::StrAppend(
      &out, "last_preserved_timestamp: ", FormatTimestamp(state.last_preserved_timestamp), "\n");
  return out;
}

absl::StatusOr<CheckpointState> ParseCheckpointState(absl::string_view path,
                                                     absl::string_view text) {
  CheckpointState state;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    auto bad = [&](absl::string_view what) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_no, ": ", what, " in checkpoint state file"));
    };
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos) return bad("expected \"field: value\"");
    absl::string_view key = absl::StripAsciiWhitespace(line.substr(0, colon));
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (key == "model_checkpoint_path" || key == "all_model_checkpoint_paths") {
      if (value.size() < 2 || value.front() != '"' || value.back() != '"') {
        return bad(absl::StrCat(key, " needs a quoted string"));
      }
      std::string unescaped;
      if (!absl::CUnescape(value.substr(1, value.size() - 2), &unescaped)) {
        return bad(absl::StrCat("bad escape in ", key));
      }
      if (key == "model_checkpoint_path") {
        state.model_checkpoint_path = std::move(unescaped);
      } else {
        state.all_model_checkpoint_paths.push_back(std::move(unescaped));
      }
    } else if (key == "all_model_checkpoint_timestamps" || key == "last_preserved_timestamp") {
      double t;
      if (!absl::SimpleAtod(value, &t)) return bad(absl::StrCat(key, " needs a number"));
      if (key == "last_preserved_timestamp") {
        state.last_preserved_timestamp = t;
      } else {
        state.all_model_checkpoint_timestamps.push_back(t);
      }
    } else {
      return bad(absl::StrCat("unknown field \"", absl::CEscape(key), "\""));
    }
  }
  return state;
}

absl::StatusOr<CheckpointState> ReadCheckpointState(const std::string& dir) {
  const std::string path = env::JoinPath(dir, kCheckpointStateFile);
  if (!env::FileExists(path)) {
    return absl::NotFoundError(absl::StrCat(path, ": no checkpoint state file"));
  }
  TANDEM_ASSIGN_OR_RETURN(std::string text, env::ReadFile(path));
  TANDEM_ASSIGN_OR_RETURN(CheckpointState state, ParseCheckpointState(path, text));
  if (!state.model_checkpoint_path.empty()) {
    state.model_checkpoint_path = Absolute(dir, state.model_checkpoint_path);
  }
  for (std::string& p : state.all_model_checkpoint_paths) p = Absolute(dir, p);
  return state;
}

absl::Status WriteCheckpointState(const std::string& dir, const CheckpointState& state) {
  CheckpointState rel = state;
  rel.model_checkpoint_path = RelativeTo(dir, rel.model_checkpoint_path);
  for (std::string& p : rel.all_model_checkpoint_paths) p = RelativeTo(dir, p);
  return env::WriteFileAtomic(env::JoinPath(dir, kCheckpointStateFile),
                              SerializeCheckpointState(rel));
}

absl::StatusOr<std::vector<std::string>> IndexedCheckpoints(const std::string& dir) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<std::string> files, env::ListDir(dir));
  std::vector<std::pair<int64_t, std::string>> found;
  for (absl::string_view f : files) {
    int64_t step;
    if (!absl::ConsumePrefix(&f, "model.ckpt-") || !absl::ConsumeSuffix(&f, ".index.json") ||
        !absl::SimpleAtoi(f, &step)) {
      continue;
    }
    found.emplace_back(step, env::JoinPath(dir, CheckpointBaseName(step)));
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> prefixes;
  for (auto& [step, prefix] : found) prefixes.push_back(std::move(prefix));
  return prefixes;
}

absl::StatusOr<CheckpointState> ReadOrRebuildCheckpointState(const std::string& dir,
                                                             const std::string& ignore) {
  absl::StatusOr<CheckpointState> state = ReadCheckpointState(dir);
  if (state.ok() && !state->model_checkpoint_path.empty()) return state;
  absl::StatusOr<std::vector<std::string>> indexed = IndexedCheckpoints(dir);
  if (indexed.ok()) std::erase(*indexed, ignore);
  if (!indexed.ok() || indexed->empty()) {
    if (!state.ok()) return state.status();
    return absl::NotFoundError(
        absl::StrCat(env::JoinPath(dir, kCheckpointStateFile), ": names no checkpoint"));
  }
  LOG(WARNING) << "The checkpoint state file of " << dir << " "
               << (state.ok() ? std::string("names no checkpoint")
                              : absl::StrCat("is unusable (", state.status().message(), ")"))
               << ", but " << indexed->size() << " checkpoint index files are there: rebuilding "
               << "the list from them; the newest is " << indexed->back();
  CheckpointState rebuilt;
  const double now = static_cast<double>(env::NowMicros()) / 1e6;
  rebuilt.model_checkpoint_path = indexed->back();
  rebuilt.all_model_checkpoint_paths = *indexed;
  rebuilt.all_model_checkpoint_timestamps.assign(indexed->size(), now);
  rebuilt.last_preserved_timestamp = state.ok() ? state->last_preserved_timestamp : now;
  return rebuilt;
}

int RemoveStaleTempFiles(const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> files = env::ListDir(dir);
  if (!files.ok()) return 0;
  int removed = 0;
  for (const std::string& f : *files) {
    const size_t tmp = f.rfind(".tmp.");
    if (tmp == std::string::npos) continue;
    absl::string_view name = absl::string_view(f).substr(0, tmp);
    const bool ours =
        name == kCheckpointStateFile ||
        (absl::StartsWith(name, "model.ckpt-") &&
         (absl::EndsWith(name, ".index.json") || absl::EndsWith(name, ".safetensors")));
    if (!ours) continue;
    if (env::DeleteFile(env::JoinPath(dir, f)).ok()) {
      LOG(WARNING) << "Removed " << env::JoinPath(dir, f) << ", left by an interrupted write";
      ++removed;
    }
  }
  return removed;
}

absl::StatusOr<std::string> LatestCheckpoint(const std::string& dir) {
  TANDEM_ASSIGN_OR_RETURN(CheckpointState state, ReadOrRebuildCheckpointState(dir));
  if (state.model_checkpoint_path.empty()) {
    return absl::NotFoundError(
        absl::StrCat(env::JoinPath(dir, kCheckpointStateFile), ": names no checkpoint"));
  }
  return state.model_checkpoint_path;
}

absl::Status DeleteCheckpointFiles(const std::string& prefix) {
  const std::string dir(env::Dirname(prefix));
  const std::string base(env::Basename(prefix));
  TANDEM_ASSIGN_OR_RETURN(std::vector<std::string> files, env::ListDir(dir));
  for (const std::string& f : files) {
    if (!IsFileOfCheckpoint(base, f)) continue;
    TANDEM_RETURN_IF_ERROR(env::DeleteFile(env::JoinPath(dir, f)));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> SetAsideUnreadableCheckpoint(const std::string& dir,
                                                 const std::string& prefix) {
  absl::StatusOr<CheckpointState> state = ReadCheckpointState(dir);
  if (state.ok()) {
    std::vector<std::string> paths;
    std::vector<double> stamps;
    for (size_t i = 0; i < state->all_model_checkpoint_paths.size(); ++i) {
      if (state->all_model_checkpoint_paths[i] == prefix) continue;
      paths.push_back(state->all_model_checkpoint_paths[i]);
      if (i < state->all_model_checkpoint_timestamps.size()) {
        stamps.push_back(state->all_model_checkpoint_timestamps[i]);
      }
    }
    state->all_model_checkpoint_paths = paths;
    state->all_model_checkpoint_timestamps = stamps;
    if (state->model_checkpoint_path == prefix) {
      state->model_checkpoint_path = paths.empty() ? "" : paths.back();
    }
    TANDEM_RETURN_IF_ERROR(WriteCheckpointState(dir, *state));
  }
  const std::string base(env::Basename(prefix));
  const std::string prefix_dir(env::Dirname(prefix));
  TANDEM_ASSIGN_OR_RETURN(std::vector<std::string> files, env::ListDir(prefix_dir));
  int moved = 0;
  for (const std::string& f : files) {
    if (!IsFileOfCheckpoint(base, f)) continue;
    const std::string path = env::JoinPath(prefix_dir, f);
    TANDEM_RETURN_IF_ERROR(env::RenameFile(path, path + ".unreadable"));
    ++moved;
  }
  return moved;
}

CheckpointRetention::CheckpointRetention(int max_to_keep, double keep_checkpoint_every_n_hours,
                                         double start_timestamp)
    : max_to_keep_(max_to_keep),
      keep_every_n_hours_(keep_checkpoint_every_n_hours),
      start_timestamp_(start_timestamp >= 0 ? start_timestamp
                                            : static_cast<double>(env::NowMicros()) / 1e6) {}

absl::Status CheckpointRetention::RecordSave(const std::string& dir, const std::string& prefix,
                                             double timestamp) {
  if (!cleaned_temp_files_) {
    RemoveStaleTempFiles(dir);
    cleaned_temp_files_ = true;
  }
  CheckpointState state;
  // A damaged state file beside index files is rebuilt from them; with neither, the
  // list starts with this checkpoint.
  absl::StatusOr<CheckpointState> old = ReadOrRebuildCheckpointState(dir, prefix);
  if (old.ok()) {
    state = *std::move(old);
  } else {
    if (!absl::IsNotFound(old.status())) {
      LOG(WARNING) << "Ignoring unreadable checkpoint state: " << old.status();
    }
    state.last_preserved_timestamp = start_timestamp_;
  }
  // Pair paths with timestamps; files written by other tools may lack timestamps.
  struct Entry {
    std::string path;
    double timestamp;
  };
  std::vector<Entry> entries;
  for (size_t i = 0; i < state.all_model_checkpoint_paths.size(); ++i) {
    const std::string& p = state.all_model_checkpoint_paths[i];
    if (p == prefix) continue;  // Saved again: moves to the end.
    double t = i < state.all_model_checkpoint_timestamps.size()
                   ? state.all_model_checkpoint_timestamps[i]
                   : timestamp;
    entries.push_back({p, t});
  }
  entries.push_back({prefix, timestamp});

  std::vector<std::string> to_delete;
  if (max_to_keep_ <= 0) {
    entries.erase(entries.begin(), entries.end() - 1);
  } else {
    while (entries.size() > static_cast<size_t>(max_to_keep_)) {
      Entry oldest = entries.front();
      entries.erase(entries.begin());
      if (keep_every_n_hours_ > 0 &&
          oldest.timestamp - keep_every_n_hours_ * 3600.0 >= state.last_preserved_timestamp) {
        state.last_preserved_timestamp = oldest.timestamp;
        continue;
      }
      to_delete.push_back(oldest.path);
    }
  }
  state.model_checkpoint_path = prefix;
  state.all_model_checkpoint_paths.clear();
  state.all_model_checkpoint_timestamps.clear();
  for (const Entry& e : entries) {
    state.all_model_checkpoint_paths.push_back(e.path);
    state.all_model_checkpoint_timestamps.push_back(e.timestamp);
  }
  // The state file stops listing them before their files go.
  TANDEM_RETURN_IF_ERROR(WriteCheckpointState(dir, state));
  for (const std::string& path : to_delete) {
    absl::Status s = DeleteCheckpointFiles(path);
    if (!s.ok()) {
      // The new checkpoint is safe; a leftover old one only costs disk space.
      LOG(WARNING) << "Could not delete old checkpoint " << path << ": " << s;
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::checkpoint

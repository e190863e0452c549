// checkpoint/checkpoint_state.h
//
// The `checkpoint` state file of a model directory, in TensorFlow's CheckpointState
// text-proto format, so TensorFlow tooling and humans read it as they are used to:
//
//   model_checkpoint_path: "model.ckpt-300"
//   all_model_checkpoint_paths: "model.ckpt-200"
//   all_model_checkpoint_paths: "model.ckpt-300"
//   all_model_checkpoint_timestamps: 1700000000.5
//   all_model_checkpoint_timestamps: 1700000100.25
//   last_preserved_timestamp: 1699999000
//
// Paths are prefixes (without ".index.json"), written relative to the directory when
// they lie in it; relative paths read back are relative to the directory. The list is
// oldest first and ends with model_checkpoint_path.
//
// CheckpointRetention implements TensorFlow Saver's retention: after a save, when more
// than max_to_keep checkpoints are listed, the oldest falls off the list; its files
// (index and shards) are deleted unless keep_checkpoint_every_n_hours says to preserve
// it (a checkpoint is preserved when at least N hours passed since the last preserved
// one; preserved checkpoints stay on disk but leave the state file, as in TF).
// max_to_keep <= 0 deletes nothing and lists only the newest checkpoint. The state
// file is written before any file is deleted, so a kill in between leaves unlisted
// files, never a listed checkpoint without its files.
//
// A state file that is missing, names no checkpoint or cannot be parsed while
// checkpoint index files lie in the directory is rebuilt from them (with a warning):
// the newest index is the latest checkpoint, so a damaged state file never makes
// training start over and overwrite the checkpoints. Temporary files that an
// interrupted write left behind ("<file>.tmp.<n>") are removed at the first save.
//
// Thread safety: the free functions are safe to call concurrently on different
// directories; writers of one directory must be serialised by the caller (the Saver
// does). CheckpointRetention is not thread-safe.
#ifndef TANDEM_CHECKPOINT_CHECKPOINT_STATE_H_
#define TANDEM_CHECKPOINT_CHECKPOINT_STATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::checkpoint {

inline constexpr char kCheckpointStateFile[] = "checkpoint";

struct CheckpointState {
  std::string model_checkpoint_path;
  std::vector<std::string> all_model_checkpoint_paths;  // Oldest first.
  std::vector<double> all_model_checkpoint_timestamps;  // Seconds; parallel to the paths.
  double last_preserved_timestamp = 0;
};

// The text form of `state` (paths written as given).
std::string SerializeCheckpointState(const CheckpointState& state);
// Parses the text form; INVALID_ARGUMENT naming `path` and the line on bad syntax.
absl::StatusOr<CheckpointState> ParseCheckpointState(absl::string_view path,
                                                     absl::string_view text);
// Reads `dir`/checkpoint, making relative paths absolute (joined with `dir`). NOT_FOUND
// if the file does not exist.
absl::StatusOr<CheckpointState> ReadCheckpointState(const std::string& dir);
// Writes `dir`/checkpoint atomically, writing paths inside `dir` relative to it.
absl::Status WriteCheckpointState(const std::string& dir, const CheckpointState& state);
// ReadCheckpointState, or, when the state file is missing, names no checkpoint or is
// unreadable, a state rebuilt from the index files in `dir` (oldest first, the newest
// as model_checkpoint_path, timestamps `now`), with a warning saying why. NOT_FOUND
// when there is neither a state file naming a checkpoint nor an index file. Index
// files of `ignore` (a prefix: the checkpoint being recorded) do not count.
absl::StatusOr<CheckpointState> ReadOrRebuildCheckpointState(const std::string& dir,
                                                             const std::string& ignore = "");
// Prefixes of the "model.ckpt-<step>.index.json" files in `dir`, lowest step first.
absl::StatusOr<std::vector<std::string>> IndexedCheckpoints(const std::string& dir);
// Removes "<name>.tmp.<n>" files that interrupted atomic writes of checkpoint files
// or the state file left in `dir`; returns how many.
int RemoveStaleTempFiles(const std::string& dir);
// The newest checkpoint prefix of `dir` (e.g. "/m/model.ckpt-300"), NOT_FOUND if none
// (ReadOrRebuildCheckpointState).
absl::StatusOr<std::string> LatestCheckpoint(const std::string& dir);
// Deletes the index and shards of the checkpoint `prefix` (missing files are fine).
absl::Status DeleteCheckpointFiles(const std::string& prefix);
// Sets the unreadable checkpoint `prefix` of `dir` aside, so that no later save at its
// step overwrites it and it stays for inspection: drops it from the state file, then
// renames its index and shards to "<file>.unreadable". Returns how many files moved.
absl::StatusOr<int> SetAsideUnreadableCheckpoint(const std::string& dir, const std::string& prefix);

class CheckpointRetention {
 public:
  // `start_timestamp` (seconds; default: now) is the last preserved time used when the
  // directory has no state file yet, as TF starts counting when the Saver is made.
  CheckpointRetention(int max_to_keep, double keep_checkpoint_every_n_hours,
                      double start_timestamp = -1);

  // Records that `prefix` (in `dir`) was saved at `timestamp` seconds: reads the
  // current state file (if any), appends the checkpoint, applies retention (deleting
  // the files of checkpoints that fall off) and writes the state file.
  absl::Status RecordSave(const std::string& dir, const std::string& prefix, double timestamp);

 private:
  int max_to_keep_;
  double keep_every_n_hours_;
  double start_timestamp_;
  bool cleaned_temp_files_ = false;
};

}  // namespace tandem::checkpoint

#endif  // TANDEM_CHECKPOINT_CHECKPOINT_STATE_H_

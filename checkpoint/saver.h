// checkpoint/saver.h
//
// Saver saves and restores the variables of a graph as checkpoints in a model
// directory (format: checkpoint_index.h, safetensors.h, checkpoint_state.h):
//
//   model_dir/model.ckpt-<step>-<k>-of-<n>.safetensors   one shard per saving device
//   model_dir/model.ckpt-<step>.index.json               weight_map (+ slices)
//   model_dir/checkpoint                                 TF's CheckpointState text
//
//   TANDEM_ASSIGN_OR_RETURN(auto saver, checkpoint::Saver::Create(graph));  // before the
//   TANDEM_ASSIGN_OR_RETURN(auto session, NewDirectSession(def));         // session
//   TANDEM_ASSIGN_OR_RETURN(std::string prefix, saver->Save(session.get(), dir, step));
//   TANDEM_RETURN_IF_ERROR(saver->Restore(session.get(), prefix));
//
// As in TF1, Create adds ops to the graph, so it must be called before the GraphDef is
// handed to a session (or the session Extended with it). For each variable it adds,
// colocated with the variable's handle, a ReadVariableOp ("save/read...") and a
// Placeholder feeding an AssignVariableOp ("save/restore..."), plus one NoOp
// "save/restore_all" that depends on every assign. The variables are grouped by the
// device of their handle (the handle node's requested device, else that of the node
// its colocation group names, as optimizer slots follow their variable; one group per
// distinct device, in sorted order, so a DirectSession model gives one shard), and
// each group gets a SaveShard and a RestoreShard op (checkpoint/shard_ops.h) on the CPU
// of that device's task, fed the checkpoint prefix ("save/prefix") and the step.
//
// Save runs every SaveShard in ONE session step (a consistent snapshot of every
// variable): each writes its group's shard where the variables live, so in a
// distributed job a parameter server writes its own parts and no variable crosses the
// network to be saved (the model directory must be one filesystem for every task, as
// in TensorFlow). Save then writes the index and the state file (each atomically:
// temp file, fsync, rename) and applies retention.
//
// Restore checks the index for every variable, then runs one step in which a
// RestoreShard on each device's task reads and checks that device's variables
// (checkpoint/load_variables.h: dtype, shape and CRC of every tensor) and, only once
// every RestoreShard succeeded, assigns them: no variable is touched unless every value
// loaded and matched, and no value crosses the network. The "save/restore_value"
// placeholders and "save/restore_all" remain for a caller that feeds values itself (an
// exported model's loader).
//
// Partitioned variables: SaverOptions::partitions, and the slice info that
// ops::PartitionedVariable leaves on each part's handle, say which saved variables are
// parts of a larger logical tensor; they are stored under their own names and described
// in the index's "slices". Restore reads parts by name when the checkpoint has them,
// else it cuts each part from the logical tensor (stored whole or in other parts), so a
// checkpoint written with N parts restores into M (TensorFlow's slice-aware restore);
// a whole variable restores from a checkpoint that holds it in parts.
//
// Thread safety: Save, Restore and RestoreLatest may be called from several threads;
// saves are serialised (one writer of the state file).
#ifndef TANDEM_CHECKPOINT_SAVER_H_
#define TANDEM_CHECKPOINT_SAVER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "checkpoint/checkpoint_index.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/load_variables.h"
#include "checkpoint/checkpoint_state.h"
#include "framework/graph/graph.h"
#include "framework/ops/state_ops.h"
#include "framework/runtime/session.h"

namespace tandem::checkpoint {

struct SaverOptions {
  // Checkpoints listed in the state file; older ones are deleted. <= 0: keep all on
  // disk, list only the newest.
  int max_to_keep = 5;
  // Additionally keep (not delete) one checkpoint per this many hours.
  double keep_checkpoint_every_n_hours = 10000;
  // Variables to save; empty: all of ops::kGlobalVariables of the graph.
  std::vector<ops::Variable> var_list;
  // Variable (handle) name -> its place in a partitioned tensor.
  std::map<std::string, PartitionInfo> partitions;
  // Most shard files read at once by a restore.
  int max_parallel_writes = 8;
};

// True for RestoreLatest's "the directory has no checkpoint" (NOT_FOUND), as opposed to
// a checkpoint that lacks a variable (also NOT_FOUND) or unreadable ones (DATA_LOSS).
bool IsNoCheckpoint(const absl::Status& status);

class Saver {
 public:
  // Adds the save/restore ops for the variables to `graph` (not owned; it must outlive
  // the Saver only during Create). Errors: a variable of a dtype a shard cannot hold,
  // duplicate variables, partitions naming unknown variables.
  static absl::StatusOr<std::unique_ptr<Saver>> Create(Graph* graph, SaverOptions options = {});
  Saver(const Saver&) = delete;
  Saver& operator=(const Saver&) = delete;

  // Saves the variables' current values as checkpoint `global_step` in `model_dir`
  // (created if missing) and returns its prefix, "<model_dir>/model.ckpt-<step>".
  absl::StatusOr<std::string> Save(Session* session, const std::string& model_dir,
                                   int64_t global_step);
  // Restores every variable from the checkpoint `prefix`. NOT_FOUND naming the index
  // and the variable when the checkpoint lacks one; INVALID_ARGUMENT naming the shard
  // and the tensor on a dtype or shape mismatch; DATA_LOSS naming the file (and tensor)
  // when a file is corrupt; NOT_FOUND when a file is missing. No variable is assigned
  // unless every value loaded and matched.
  absl::Status Restore(Session* session, const std::string& prefix);
  // Restores the newest checkpoint of `model_dir` that can be read, logging a warning
  // naming the file for each newer one that cannot (corrupt, truncated, missing shard),
  // and returns its prefix. NOT_FOUND (IsNoCheckpoint) when the directory has no
  // checkpoint; DATA_LOSS when it lists checkpoints but none can be read (a caller must
  // not silently start over then). When the state file itself is unreadable, the index
  // files found in the directory are tried, highest step first.
  // Mismatches between model and checkpoint (missing variable, shape, dtype) are
  // returned as errors, not skipped. With set_aside_unreadable (for the one writer of
  // model_dir, which goes on saving there), the newer unreadable checkpoints are set
  // aside (SetAsideUnreadableCheckpoint) once an older one restored, so that no later
  // save overwrites them.
  absl::StatusOr<std::string> RestoreLatest(Session* session, const std::string& model_dir,
                                            bool set_aside_unreadable = false);

  // Names of the saved variables, in save order.
  std::vector<std::string> VariableNames() const;
  // Number of shards a save writes (distinct devices of the variables).
  int NumShards() const { return static_cast<int>(shard_devices_.size()); }
  const std::string& restore_op_name() const { return restore_op_; }
  // Variable name -> the placeholder tensor Restore feeds its value into.
  std::map<std::string, std::string> RestoreFeeds() const;

 private:
  struct SavedVariable {
    std::string name;
    DType dtype;
    PartialShape shape;
    int shard;
    std::string restore_feed;  // Fed by Restore.
  };
  // What Save feeds and fetches.
  struct SaveOps {
    std::string prefix;               // The string placeholder of the prefix.
    std::string global_step;          // The int64 placeholder of the step.
    std::vector<std::string> shards;  // Each SaveShard's output (its bytes), by shard.
    std::string restore_all;          // Runs every RestoreShard, then every assignment.
  };
  Saver(SaverOptions options, std::vector<SavedVariable> vars,
        std::vector<std::string> shard_devices, std::string restore_op, SaveOps save_ops);
  // The variables as LoadVariables describes them.
  std::vector<VariableToLoad> LoadSpecs() const;
  absl::Status RestoreImpl(Session* session, const std::string& prefix, LoadFailure* kind);

  const SaverOptions options_;
  const std::vector<SavedVariable> vars_;
  const std::vector<std::string> shard_devices_;
  const std::string restore_op_;
  const SaveOps save_ops_;
  absl::Mutex save_mu_;
  CheckpointRetention retention_ ABSL_GUARDED_BY(save_mu_);
};

}  // namespace tandem::checkpoint

#endif  // TANDEM_CHECKPOINT_SAVER_H_

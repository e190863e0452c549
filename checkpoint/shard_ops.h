// checkpoint/shard_ops.h
//
// SaveShard and RestoreShard: the ops with which a Saver writes and reads each shard of
// a checkpoint on the device of the shard's variables, so that a variable's value never
// leaves its task to be saved or restored (TensorFlow's sharded SaveV2 / RestoreV2 per
// device): a parameter server writes and reads its parts of a table itself, in the
// model directory, which every task of a job sees (a shared filesystem, as TensorFlow
// requires). The chief writes only the index and the state file.
//
//   SaveShard(prefix: string scalar, global_step: int64 scalar, v_0 .. v_k-1)
//       -> bytes: int64 scalar (the values' total bytes)
//   attrs: names (list of k strings), shard, num_shards (the file is
//   ShardFileName(prefix, shard, num_shards) beside the prefix), device (recorded in the
//   file's metadata, as Saver's shards always did).
//
//   RestoreShard(prefix: string scalar) -> v_0 .. v_k-1
//   attrs: names, dtypes, shapes (the variables), full_names ("" for a whole variable),
//   full_shapes, offsets (flattened, one per dimension of each part's full shape),
//   max_parallel_reads. LoadVariables (checkpoint/load_variables.h) with its errors;
//   each output is checked (dtype, shape, CRC) before any is produced.
//
// EnsureCheckpointOps registers the op and its CPU kernel in the global registries
// once; Saver::Create calls it, and so must every process that may host a shard's
// variables without building a Saver (the trainer does at start, in every role).
//
// Thread safety: EnsureCheckpointOps is thread-safe; the kernel writes one file per run.
#ifndef TANDEM_CHECKPOINT_SHARD_OPS_H_
#define TANDEM_CHECKPOINT_SHARD_OPS_H_

namespace tandem::checkpoint {

inline constexpr char kSaveShardOp[] = "SaveShard";
inline constexpr char kRestoreShardOp[] = "RestoreShard";

void EnsureCheckpointOps();

}  // namespace tandem::checkpoint

#endif  // TANDEM_CHECKPOINT_SHARD_OPS_H_

// checkpoint/shard_ops.h
//
// SaveShard: the op with which a Saver writes each shard of a checkpoint on the device
// of the shard's variables, so that a variable's value never leaves its task to be
// saved (TensorFlow's sharded SaveV2 per device): a parameter server writes its parts
// of a table itself, into the model directory, which every task of a job sees (a shared
// filesystem, as TensorFlow requires). The chief writes only the index and the state
// file afterwards.
//
//   SaveShard(prefix: string scalar, global_step: int64 scalar, v_0 .. v_k-1)
//       -> bytes: int64 scalar (the values' total bytes)
//   attrs: names (list of k strings), shard, num_shards (the file is
//   ShardFileName(prefix, shard, num_shards) beside the prefix), device (recorded in the
//   file's metadata, as Saver's shards always did).
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

void EnsureCheckpointOps();

}  // namespace tandem::checkpoint

#endif  // TANDEM_CHECKPOINT_SHARD_OPS_H_

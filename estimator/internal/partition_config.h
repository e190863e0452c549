// estimator/internal/partition_config.h
//
// [distribute] partitioner: how a model's tables (the premade estimators' embedding
// tables and a linear part's weights of categorical columns) are split across the ps
// tasks, with TensorFlow 2's partitioner names and keys (TensorFlow 1's names accepted):
//
//   "auto" (default)   on a cluster with ps tasks, TensorFlow's canned estimators' rule
//                      for their input layers: "min_size" with min_shard_bytes = 64 MiB
//                      and at most one part per ps task; elsewhere whole tables.
//   "none"             whole tables.
//   "fixed"            num_shards parts (0: one per ps task, at least one);
//     (fixed_size)     tf.distribute.experimental.partitioners.FixedShardsPartitioner.
//   "min_size"         as many parts as keep each at least min_shard_bytes (default
//     (min_max_variable, 256 KiB), at most max_shards (0: one per ps task); MinSizePartitioner.
//      min_max)
//   "max_size"         as few parts as keep each at most max_shard_bytes (required), at
//     (variable_axis_  most max_shards (0: no cap); MaxSizePartitioner. A table whose one
//      size)           row exceeds max_shard_bytes is refused, naming it.
//
// Keys that belong to another partitioner are refused, as is an explicit partitioner
// with the collective strategy (every replica holds every variable) and, by the model,
// one for a model with no table. No table is cut in more than kMaxTableParts parts.
//
// Thread safety: pure functions; the partitioner returned may be called from any thread.
#ifndef TANDEM_ESTIMATOR_INTERNAL_PARTITION_CONFIG_H_
#define TANDEM_ESTIMATOR_INTERNAL_PARTITION_CONFIG_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "estimator/job_config.h"
#include "framework/ops/partitioned_variables.h"

namespace tandem::internal {

inline constexpr int kMaxTableParts = 1024;

// "fixed", "min_size", "max_size", "auto" or "none" for a configured name or alias.
std::string CanonicalPartitioner(const std::string& name);
// True when [distribute] names a partitioner rather than "auto" / "none".
bool PartitionerRequested(const DistributeSection& d);
// The key checks above that need no model; errors name the key through `where`.
absl::Status CheckPartitionerKeys(const JobConfig& c,
                                  const std::function<std::string(const std::string&)>& where);

struct TablePartitioning {
  ops::Partitioner partitioner;  // Null: whole tables.
  std::string description;       // For the log: "min_size(min_shard_bytes=..., ...)".
};
// What [distribute] asks of a model with tables, for `job`'s cluster.
absl::StatusOr<TablePartitioning> TablePartitionerFor(const JobConfig& job);

}  // namespace tandem::internal

#endif  // TANDEM_ESTIMATOR_INTERNAL_PARTITION_CONFIG_H_

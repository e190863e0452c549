// estimator/internal/job_keys.cc: the key table of job_keys.h.
#include "estimator/internal/job_keys.h"

#include <algorithm>
#include <thread>

#include "estimator/internal/partition_config.h"

namespace tandem::internal {

int64_t MaxThreads() {
  return std::max<int64_t>(8, 2 * static_cast<int64_t>(std::thread::hardware_concurrency()));
}

// The sections with typed fields, bound to `c` ([cluster] and [task] and [model.params]
// are decoded separately).
std::vector<Section> Sections(JobConfig& c) {
  return {
      {"model", {{"name", &c.model.name}}},
      {"data",
       {{"dataset", &c.data.dataset},
        {"data_dir", &c.data.data_dir},
        {"train_path", &c.data.train_path},
        {"eval_path", &c.data.eval_path},
        {"eval_batch_size", &c.data.eval_batch_size, 0, {}, kMaxBatchSize},
        {"shuffle_buffer", &c.data.shuffle_buffer, 0},
        {"prefetch_buffer", &c.data.prefetch_buffer, -1, {}, 1024},
        {"format", &c.data.format, kNoMin, {"", "csv", "tfrecord_example"}},
        {"label_name", &c.data.label_name},
        {"column_names", &c.data.column_names},
        {"column_defaults", &c.data.column_defaults},
        {"header", &c.data.header},
        {"field_delim", &c.data.field_delim},
        {"skip_initial_space", &c.data.skip_initial_space},
        {"na_value", &c.data.na_value},
        {"comment", &c.data.comment},
        {"strip_line_suffix", &c.data.strip_line_suffix},
        {"skip_bad_rows", &c.data.skip_bad_rows},
        {"value_separators", &c.data.value_separators},
        {"compression", &c.data.compression, kNoMin, {"auto", "none", "gzip"}}}},
      {"run",
       {{"model_dir", &c.run.model_dir},
        {"save_checkpoints_steps", &c.run.save_checkpoints_steps, 0},
        {"save_checkpoints_secs", &c.run.save_checkpoints_secs, 0},
        {"keep_checkpoint_max", &c.run.keep_checkpoint_max, 0},
        {"keep_checkpoint_every_n_hours", &c.run.keep_checkpoint_every_n_hours},
        {"log_step_count_steps", &c.run.log_step_count_steps, 1},
        {"trace_every_steps", &c.run.trace_every_steps, 0},
        {"save_summary_steps", &c.run.save_summary_steps, 0},
        {"random_seed", &c.run.random_seed},
        {"inter_op_threads", &c.run.inter_op_threads, 0, {}, MaxThreads()},
        {"intra_op_threads", &c.run.intra_op_threads, 0, {}, MaxThreads()},
        {"precision", &c.run.precision, kNoMin, {"float32", "mixed_bfloat16"}},
        {"operation_timeout_secs", &c.run.operation_timeout_secs, 0, {}, 86400},
        {"liveness_file", &c.run.liveness_file},
        {"num_gpus", &c.run.num_gpus, -1, {}, 64},
        {"gpu_memory_fraction", &c.run.gpu_memory_fraction}}},
      {"train",
       {{"max_steps", &c.train.max_steps, 1},
        {"batch_size", &c.train.batch_size, 1, {}, kMaxBatchSize},
        {"warm_start_from", &c.train.warm_start_from},
        {"warm_start_vars", &c.train.warm_start_vars},
        {"warm_start_map", &c.train.warm_start_map}}},
      {"eval",
       {{"steps", &c.eval.steps, 0},
        {"start_delay_secs", &c.eval.start_delay_secs, 0},
        {"throttle_secs", &c.eval.throttle_secs, 0},
        {"name", &c.eval.name},
        {"final_on_chief", &c.eval.final_on_chief}}},
      {"export",
       {{"strategy", &c.export_.strategy, kNoMin, {"none", "final", "latest", "best"}},
        {"name", &c.export_.name},
        {"keep", &c.export_.keep, 1, {}, 1000},
        {"model_name", &c.export_.model_name},
        {"metric", &c.export_.metric},
        {"metric_mode", &c.export_.metric_mode, kNoMin, {"", "min", "max"}}}},
      {"distribute",
       {{"strategy",
         &c.distribute.strategy,
         kNoMin,
         {"auto", "none", "parameter_server", "collective", "multi_worker_mirrored", "hybrid"}},
        {"sync", &c.distribute.sync},
        {"replicas_to_aggregate", &c.distribute.replicas_to_aggregate, 0},
        {"total_num_replicas", &c.distribute.total_num_replicas, 0},
        {"on_missing_replicas", &c.distribute.on_missing_replicas, kNoMin, {"wait", "continue"}},
        {"missing_replicas_patience_secs", &c.distribute.missing_replicas_patience_secs, 0},
        {"partitioner",
         &c.distribute.partitioner,
         kNoMin,
         {"auto", "none", "fixed", "min_size", "max_size", "fixed_size", "min_max_variable",
          "min_max", "variable_axis_size"}},
        {"num_shards", &c.distribute.num_shards, 0, {}, internal::kMaxTableParts},
        {"max_shards", &c.distribute.max_shards, 0, {}, internal::kMaxTableParts},
        {"min_shard_bytes", &c.distribute.min_shard_bytes, 1},
        {"max_shard_bytes", &c.distribute.max_shard_bytes, 0},
        {"bytes_per_pack", &c.distribute.bytes_per_pack, 1024, {}, int64_t{1} << 30},
        {"collective_timeout_secs", &c.distribute.collective_timeout_secs, 1, {}, 86400},
        {"check_replicas_steps", &c.distribute.check_replicas_steps, 0}}},
      {"security",
       {{"tls_cert", &c.security.tls_cert},
        {"tls_key", &c.security.tls_key},
        {"tls_ca", &c.security.tls_ca},
        {"tls_server_name", &c.security.tls_server_name},
        {"health_port", &c.security.health_port, 0, {}, 65535}}},
  };
}

}  // namespace tandem::internal

// estimator/input_pipeline.cc
#include "estimator/input_pipeline.h"

#include <algorithm>
#include <utility>

namespace tandem {

data::DatasetPtr StandardPipeline(data::DatasetPtr ds, ModeKey mode, const InputContext& context,
                                  const JobConfig& job, data::MapFn per_batch) {
  if (context.num_input_pipelines > 1) {
    ds = ds->Shard(context.num_input_pipelines, context.input_pipeline_id);
  }
  int64_t batch = job.train.batch_size;
  if (mode == ModeKey::kTrain) {
    // Each pipeline of a cluster shuffles its own shard with its own seed.
    const uint64_t seed = static_cast<uint64_t>(job.run.random_seed.value_or(0));
    ds = ds->Shuffle(std::max<int64_t>(1, job.data.shuffle_buffer),
                     seed + static_cast<uint64_t>(context.input_pipeline_id))
             ->Repeat(-1);
  } else if (job.data.eval_batch_size > 0) {
    batch = job.data.eval_batch_size;
  }
  ds = ds->Batch(batch, /*drop_remainder=*/mode == ModeKey::kTrain);
  if (per_batch) ds = ds->Map(std::move(per_batch));
  if (job.data.prefetch_buffer != 0) ds = ds->Prefetch(job.data.prefetch_buffer);
  return ds;
}

}  // namespace tandem

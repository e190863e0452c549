// estimator/input_pipeline.h
//
// The standard input pipeline of a model's source dataset, from the job config: each
// training task of a cluster reads its shard (InputContext); training shuffles
// ([data] shuffle_buffer, seeded by [run] random_seed and the pipeline's id) and
// repeats; batches of [train] batch_size (evaluation and prediction: [data]
// eval_batch_size when set), whole batches only while training; `per_batch`, when set,
// maps each batch; [data] prefetch_buffer batches ahead.
//
// Thread safety: a pure function.
#ifndef TANDEM_ESTIMATOR_INPUT_PIPELINE_H_
#define TANDEM_ESTIMATOR_INPUT_PIPELINE_H_

#include "estimator/model.h"

namespace tandem {

data::DatasetPtr StandardPipeline(data::DatasetPtr source, ModeKey mode,
                                  const InputContext& context, const JobConfig& job,
                                  data::MapFn per_batch = nullptr);

}  // namespace tandem

#endif  // TANDEM_ESTIMATOR_INPUT_PIPELINE_H_

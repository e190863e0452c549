// estimator/job_options.h
//
// EstimatorOptionsFor: the EstimatorOptions of a JobConfig, everything but the model
// function: the RunConfig, the [model] params, transport security ([security]), warm
// start ([train] warm_start_*), and the strategy ([distribute] strategy resolved by
// JobConfig::strategy) with its synchronous-replicas or collective settings. Every
// trainer binary maps a job this way (apps/trainer/trainer_main.cc).
//
// Thread safety: a pure function.
#ifndef TANDEM_ESTIMATOR_JOB_OPTIONS_H_
#define TANDEM_ESTIMATOR_JOB_OPTIONS_H_

#include "absl/status/statusor.h"
#include "estimator/estimator.h"
#include "estimator/job_config.h"

namespace tandem {

// INVALID_ARGUMENT (a config error) when [security] names files that cannot be read.
absl::StatusOr<EstimatorOptions> EstimatorOptionsFor(const JobConfig& job);

}  // namespace tandem

#endif  // TANDEM_ESTIMATOR_JOB_OPTIONS_H_

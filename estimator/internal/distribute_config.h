// estimator/internal/distribute_config.h
//
// The [distribute] rules of estimator/job_config.h checked against the job's cluster:
// each setting that cannot run is a config error naming its key (`where` gives the
// key's "file:line:col").
//
// Thread safety: a pure function.
#ifndef TANDEM_ESTIMATOR_INTERNAL_DISTRIBUTE_CONFIG_H_
#define TANDEM_ESTIMATOR_INTERNAL_DISTRIBUTE_CONFIG_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "estimator/job_config.h"

namespace tandem::internal {

// Chief, master and worker tasks: the tasks that train.
int TrainingTasks(const ClusterSpec& cluster);

absl::Status CheckDistribute(const JobConfig& c,
                             const std::function<std::string(const std::string&)>& where);

}  // namespace tandem::internal

#endif  // TANDEM_ESTIMATOR_INTERNAL_DISTRIBUTE_CONFIG_H_

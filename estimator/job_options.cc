// estimator/job_options.cc: EstimatorOptionsFor (job_options.h).
#include "estimator/job_options.h"

#include "estimator/internal/security_config.h"
#include "framework/core/status.h"

namespace tandem {

absl::StatusOr<EstimatorOptions> EstimatorOptionsFor(const JobConfig& job) {
  EstimatorOptions eo;
  eo.config = job.run_config();
  eo.params = job.model;
  TANDEM_ASSIGN_OR_RETURN(eo.security, internal::SecurityFor(job));
  if (!job.train.warm_start_from.empty()) {
    eo.warm_start.ckpt_to_initialize_from = job.train.warm_start_from;
    eo.warm_start.vars_to_warm_start = job.train.warm_start_vars;
    eo.warm_start.var_name_to_prev_var_name = job.train.warm_start_map;
  }
  const DistributeSection& d = job.distribute;
  if (d.sync) {
    SyncReplicasSettings sync;
    sync.replicas_to_aggregate = static_cast<int>(d.replicas_to_aggregate);
    sync.continue_when_missing = d.on_missing_replicas == "continue";
    sync.patience_secs = static_cast<double>(d.missing_replicas_patience_secs);
    eo.sync_replicas = sync;
  }
  eo.strategy = job.strategy();
  if (*eo.strategy == Strategy::kCollective || *eo.strategy == Strategy::kHybrid) {
    CollectiveSettings collective;
    collective.bytes_per_pack = d.bytes_per_pack;
    collective.timeout_secs = d.collective_timeout_secs;
    collective.check_replicas_steps = d.check_replicas_steps;
    eo.collective = collective;
  }
  return eo;
}

}  // namespace tandem

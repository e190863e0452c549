// estimator/strategy.h
//
// Strategy: how Estimator::Train spreads one model over the tasks that train it,
// chosen once per job. kLocal: one process (no cluster, or a one-task one).
// kParameterServer: between-graph replication with the variables on the ps tasks,
// asynchronous or with synchronous replicas (TensorFlow 1.x's Estimator, TF2's
// ParameterServerStrategy). kCollective: every training task holds the variables and
// averages its gradients with the others by all-reduce (MultiWorkerMirroredStrategy).
// kHybrid: the tables (ops::VariableOptions::table) on the ps tasks, updated there with
// each worker's rows; every other variable mirrored on the training tasks and
// all-reduced, as kCollective does.
// A job config names it in [distribute] strategy (estimator/job_config.h:
// JobConfig::strategy() resolves "auto"); the Estimator runs it through one object per
// strategy (estimator/internal/training_strategy.h).
#ifndef TANDEM_ESTIMATOR_STRATEGY_H_
#define TANDEM_ESTIMATOR_STRATEGY_H_

#include "absl/strings/string_view.h"

namespace tandem {

enum class Strategy { kLocal, kParameterServer, kCollective, kHybrid };

// "local", "parameter_server", "collective", "hybrid": the names [distribute] strategy uses.
absl::string_view StrategyName(Strategy strategy);

}  // namespace tandem

#endif  // TANDEM_ESTIMATOR_STRATEGY_H_

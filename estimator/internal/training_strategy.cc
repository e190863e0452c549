// estimator/internal/training_strategy.cc: the local strategy, the choice of a
// strategy and what every strategy shares.
#include "estimator/internal/training_strategy.h"

#include <utility>

#include "framework/runtime/device.h"
#include "framework/runtime/mixed_precision.h"

namespace tandem {

absl::string_view StrategyName(Strategy strategy) {
  switch (strategy) {
    case Strategy::kLocal:
      return "local";
    case Strategy::kParameterServer:
      return "parameter_server";
    case Strategy::kCollective:
      return "collective";
    case Strategy::kHybrid:
      return "hybrid";
  }
  return "unknown";
}

namespace internal {

SessionOptions SessionOptionsFor(const RunConfig& config, bool cluster_master) {
  SessionOptions so;
  // A GPU session keeps the precision asked for; on a CPU, mixed_bfloat16 needs native
  // bfloat16 (PrecisionForCpu).
  so.precision = config.precision();
  if (so.precision != Precision::kFloat32 &&
      (config.is_distributed() || LocalGpuCount(config.num_gpus()) == 0)) {
    so.precision = PrecisionForCpu(so.precision);
  }
  if (config.session_config()) {
    so.inter_op_threads = config.session_config()->inter_op_parallelism_threads;
    so.intra_op_threads = config.session_config()->intra_op_parallelism_threads;
    so.allow_soft_placement = config.session_config()->allow_soft_placement;
    if (cluster_master) so.device_filters = config.session_config()->device_filters;
  }
  if (!config.is_distributed()) {
    so.num_gpus = config.num_gpus();
    so.gpu_memory_fraction = config.gpu_memory_fraction();
  }
  if (cluster_master) {
    so.target = config.master();
    so.wait_for_workers_ms = kWaitForClusterMs;
    so.operation_timeout_ms = config.operation_timeout_secs() * 1000;
  }
  return so;
}

void TrainingStrategy::Configure(MonitoredTrainingSessionOptions& mts) const {
  mts.session_options = SessionOptionsFor(config(), /*cluster_master=*/false);
}

namespace {

// One process: the graph as the model builds it, in a session of this process.
class LocalStrategy : public TrainingStrategy {
 public:
  using TrainingStrategy::TrainingStrategy;
  Strategy kind() const override { return Strategy::kLocal; }
};

}  // namespace

std::unique_ptr<TrainingStrategy> MakeTrainingStrategy(Strategy kind, StrategyEnv env) {
  switch (kind) {
    case Strategy::kParameterServer:
      return NewParameterServerStrategy(std::move(env));
    case Strategy::kCollective:
      return NewCollectiveStrategy(std::move(env));
    case Strategy::kHybrid:
      return NewHybridStrategy(std::move(env));
    case Strategy::kLocal:
      break;
  }
  return std::make_unique<LocalStrategy>(std::move(env));
}

Strategy ChooseStrategy(const EstimatorOptions& options) {
  if (!options.config.TrainsOnCluster()) return Strategy::kLocal;
  if (options.strategy) return *options.strategy;
  return options.collective ? Strategy::kCollective : Strategy::kParameterServer;
}

}  // namespace internal
}  // namespace tandem

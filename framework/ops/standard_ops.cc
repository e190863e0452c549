#include "framework/ops/standard_ops.h"

#include <mutex>

#include "framework/ops/collective_ops.h"
#include "framework/ops/gradients.h"

namespace tandem::ops {

void EnsureStandardOps() {
  static std::once_flag once;
  std::call_once(once, [] {
    OpRegistry* r = OpRegistry::Global();
    RegisterArrayOps(r);
    RegisterMathOps(r);
    RegisterNnOps(r);
    RegisterStateOps(r);
    RegisterRandomOps(r);
    RegisterTrainingOps(r);
    RegisterRuntimeOps(r);
    RegisterSummaryOps(r);
    RegisterSyncReplicasOps(r);
    RegisterCollectiveOps(r);
    RegisterFeatureOps(r);
    RegisterEmbeddingOps(r);
    GradientRegistry* g = GradientRegistry::Global();
    RegisterArrayGradients(g);
    RegisterMathGradients(g);
    RegisterNnGradients(g);
    RegisterStateGradients(g);
    RegisterSummaryGradients(g);
    RegisterRuntimeGradients(g);
    RegisterFeatureGradients(g);
    RegisterEmbeddingGradients(g);
    g->RegisterNoGradient("CollectiveAllReduce");
    g->RegisterNoGradient("CollectiveBroadcast");
  });
}

}  // namespace tandem::ops

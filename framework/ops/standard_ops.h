// framework/ops/standard_ops.h
//
// Registration of every op tandem ships. EnsureStandardOps() fills
// OpRegistry::Global() and GradientRegistry::Global() once (thread-safe); op builder
// functions and sessions call it, so users never have to.
//
// Each op family has an explicit Register*Ops(OpRegistry*) and
// Register*Gradients(GradientRegistry*) pair; add new families to standard_ops.cc.
#ifndef TANDEM_FRAMEWORK_OPS_STANDARD_OPS_H_
#define TANDEM_FRAMEWORK_OPS_STANDARD_OPS_H_

#include "framework/core/status.h"
#include "framework/graph/op_registry.h"

namespace tandem {

class GradientRegistry;

namespace ops {

void EnsureStandardOps();

void RegisterArrayOps(OpRegistry* r);
void RegisterMathOps(OpRegistry* r);
void RegisterNnOps(OpRegistry* r);
void RegisterStateOps(OpRegistry* r);
void RegisterRandomOps(OpRegistry* r);
void RegisterTrainingOps(OpRegistry* r);
void RegisterRuntimeOps(OpRegistry* r);
void RegisterSummaryOps(OpRegistry* r);
void RegisterSyncReplicasOps(OpRegistry* r);
void RegisterFeatureOps(OpRegistry* r);
void RegisterEmbeddingOps(OpRegistry* r);

void RegisterArrayGradients(GradientRegistry* r);
void RegisterMathGradients(GradientRegistry* r);
void RegisterNnGradients(GradientRegistry* r);
void RegisterStateGradients(GradientRegistry* r);
void RegisterSummaryGradients(GradientRegistry* r);
void RegisterRuntimeGradients(GradientRegistry* r);
void RegisterFeatureGradients(GradientRegistry* r);
void RegisterEmbeddingGradients(GradientRegistry* r);

}  // namespace ops
}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_OPS_STANDARD_OPS_H_

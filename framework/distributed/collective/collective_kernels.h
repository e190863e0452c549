// framework/distributed/collective/collective_kernels.h
//
// Registers the CPU kernels of CollectiveAllReduce, CollectiveBroadcast and
// CollectiveAllGatherRows (framework/ops/collective_ops.h), which run over the step's CollectiveExecutor
// (StepContext::collective). CollectiveExecutor's constructor registers them with
// KernelRegistry::Global(), so any in-process session of a task with a collective group
// can run them.
//
// Thread safety: as KernelRegistry::Register.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_COLLECTIVE_COLLECTIVE_KERNELS_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_COLLECTIVE_COLLECTIVE_KERNELS_H_

#include "framework/kernels/kernel_registry.h"

namespace tandem {

void RegisterCollectiveKernels(KernelRegistry* registry);

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_COLLECTIVE_COLLECTIVE_KERNELS_H_

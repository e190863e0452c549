#include "framework/kernels/cpu/cpu_kernels.h"

namespace tandem {

void RegisterCpuKernels(KernelRegistry* r) {
  RegisterCpuArrayKernels(r);
  RegisterCpuMathKernels(r);
  RegisterCpuNnKernels(r);
  RegisterCpuRandomKernels(r);
  RegisterCpuStateKernels(r);
  RegisterCpuSummaryKernels(r);
  RegisterCpuSyncReplicasKernels(r);
  RegisterCpuTrainingKernels(r);
  RegisterCpuFeatureKernels(r);
  RegisterCpuPartitionKernels(r);
  RegisterCpuCollectiveKernels(r);
}

}  // namespace tandem

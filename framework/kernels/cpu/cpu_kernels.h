// framework/kernels/cpu/cpu_kernels.h
//
// RegisterCpuKernels registers every CPU kernel; one Register* function per family.
#ifndef TANDEM_FRAMEWORK_KERNELS_CPU_CPU_KERNELS_H_
#define TANDEM_FRAMEWORK_KERNELS_CPU_CPU_KERNELS_H_

#include "framework/kernels/kernel_registry.h"

namespace tandem {

void RegisterCpuKernels(KernelRegistry* registry);

void RegisterCpuArrayKernels(KernelRegistry* registry);
void RegisterCpuMathKernels(KernelRegistry* registry);
void RegisterCpuNnKernels(KernelRegistry* registry);
void RegisterCpuRandomKernels(KernelRegistry* registry);
void RegisterCpuStateKernels(KernelRegistry* registry);
void RegisterCpuSummaryKernels(KernelRegistry* registry);
void RegisterCpuSyncReplicasKernels(KernelRegistry* registry);
void RegisterCpuTrainingKernels(KernelRegistry* registry);

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_KERNELS_CPU_CPU_KERNELS_H_

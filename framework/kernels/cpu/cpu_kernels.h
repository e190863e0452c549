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
void RegisterCpuFeatureKernels(KernelRegistry* registry);
void RegisterCpuPartitionKernels(KernelRegistry* registry);
void RegisterCpuCollectiveKernels(KernelRegistry* registry);

// Registers the resource-variable kernels VarHandleOp, ReadVariableOp and
// AssignVariableOp (type attr "dtype") for `device` and `dtype`, and
// VarIsInitializedOp for every dtype (once per device). These kernels move Tensors
// and never touch their bytes, so they serve a device whose memory the host cannot
// read (a GPU's).
void RegisterStateKernelsOn(KernelRegistry* registry, const DeviceType& device, DType dtype);
// The array kernels that serve another device as they are: Const of int32, int64 and
// bool (a GPU keeps shapes and indices in host memory, allocator.h), and Identity,
// Reshape, Squeeze and ExpandDims, which only view their input's buffer.
void RegisterDeviceAgnosticArrayKernelsOn(KernelRegistry* registry, const DeviceType& device);

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_KERNELS_CPU_CPU_KERNELS_H_

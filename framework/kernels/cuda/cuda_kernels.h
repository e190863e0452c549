// framework/kernels/cuda/cuda_kernels.h
//
// The GPU backend's entry points, plain C++ (no CUDA headers), for the runtime: how
// many GPUs this process sees, the context of one as an opaque pointer plus its
// DeviceAllocator, and RegisterCudaKernels, which adds every GPU kernel to a registry.
// Each family's file registers through its own RegisterCuda<Family>Kernels.
//
// Thread safety: all functions may be called from any thread.
#ifndef TANDEM_FRAMEWORK_KERNELS_CUDA_CUDA_KERNELS_H_
#define TANDEM_FRAMEWORK_KERNELS_CUDA_CUDA_KERNELS_H_

#include "absl/status/statusor.h"
#include "framework/kernels/kernel_registry.h"
#include "framework/tensor/allocator.h"

namespace tandem {
namespace gpu {
class GpuContext;

// GPUs visible to this process (0 when there is no driver or no device).
int VisibleGpus();
// The process-wide context of GPU `ordinal` (gpu_context.h), made on first use with
// `memory_fraction` of its memory.
absl::StatusOr<GpuContext*> ContextFor(int ordinal, double memory_fraction);
DeviceAllocator* AllocatorOf(GpuContext* context);

}  // namespace gpu

void RegisterCudaKernels(KernelRegistry* registry);
// The families (one file each under framework/kernels/cuda/).
void RegisterCudaArrayKernels(KernelRegistry* registry);   // array_kernels.cc
void RegisterCudaMathKernels(KernelRegistry* registry);    // cwise_kernels.cc, reduction_kernels.cc
void RegisterCudaMatMulKernels(KernelRegistry* registry);  // matmul_kernels.cc
void RegisterCudaNnKernels(KernelRegistry* registry);      // nn_kernels.cc
void RegisterCudaTrainingKernels(KernelRegistry* registry);  // training_kernels.cc
void RegisterCudaConvKernels(KernelRegistry* registry);      // conv_kernels.cc, pool_kernels.cc
void RegisterCudaHostKernels(KernelRegistry* registry);      // host_kernels.cc

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_KERNELS_CUDA_CUDA_KERNELS_H_

// framework/kernels/cuda/cuda_kernels.cc
//
// RegisterCudaKernels: every GPU kernel family of this folder (cuda_kernels.h).
#include "framework/kernels/cuda/cuda_kernels.h"

namespace tandem {

void RegisterCudaKernels(KernelRegistry* registry) {
  RegisterCudaArrayKernels(registry);
  RegisterCudaMathKernels(registry);
  RegisterCudaMatMulKernels(registry);
  RegisterCudaNnKernels(registry);
  RegisterCudaTrainingKernels(registry);
  RegisterCudaConvKernels(registry);
  RegisterCudaHostKernels(registry);
}

}  // namespace tandem

// framework/runtime/runtime_kernels.h
//
// Kernels of the runtime's own ops (_Arg, _Retval, _Send, _Recv) and EnsureKernels(), which fills
// KernelRegistry::Global() with them and every CPU kernel exactly once.
#ifndef TANDEM_FRAMEWORK_RUNTIME_RUNTIME_KERNELS_H_
#define TANDEM_FRAMEWORK_RUNTIME_RUNTIME_KERNELS_H_

#include "framework/kernels/kernel_registry.h"

namespace tandem {

void RegisterRuntimeKernels(KernelRegistry* registry);
// _Send and _Recv (send_recv_kernels.cc); called by RegisterRuntimeKernels.
void RegisterSendRecvKernels(KernelRegistry* registry);
// Registers the standard ops and all kernels into the global registries (once).
void EnsureKernels();

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_RUNTIME_RUNTIME_KERNELS_H_

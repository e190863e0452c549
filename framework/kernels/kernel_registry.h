// framework/kernels/kernel_registry.h
//
// KernelRegistry maps (op, device type, dtype) to kernel factories. The dtype key is
// the value of the node's type attr (default "T") or, when the node has no such attr,
// the dtype of its first non-resource input (else of output 0); a kernel registered with
// DType::kInvalid serves every dtype. Devices fill it by explicit calls, e.g.
// RegisterCpuKernels(KernelRegistry*) in kernels/cpu; KernelRegistry::Global() is
// filled by the runtime on first use.
//
// Thread safety: Register and Create may be called concurrently.
#ifndef TANDEM_FRAMEWORK_KERNELS_KERNEL_REGISTRY_H_
#define TANDEM_FRAMEWORK_KERNELS_KERNEL_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "framework/graph/device_spec.h"
#include "framework/kernels/op_kernel.h"

namespace tandem {

using KernelFactory = std::function<std::unique_ptr<OpKernel>()>;

class KernelRegistry {
 public:
  static KernelRegistry* Global();

  void Register(const std::string& op, const DeviceType& device, DType dtype, KernelFactory factory,
                std::string type_attr = "T");
  template <typename K>
  void Register(const std::string& op, const DeviceType& device, DType dtype = DType::kInvalid,
                std::string type_attr = "T") {
    Register(
        op, device, dtype, [] { return std::make_unique<K>(); }, std::move(type_attr));
  }

  // Creates and initialises the kernel for `node` on `device`. NOT_FOUND names the op,
  // device and dtype when none is registered.
  absl::StatusOr<std::unique_ptr<OpKernel>> Create(const Node& node,
                                                   const DeviceType& device) const;
  // Whether `op` has a kernel on `device` for any dtype.
  bool HasKernel(const std::string& op, const DeviceType& device) const;
  // The ops with a kernel on `device`, sorted, each once.
  std::vector<std::string> OpsOn(const DeviceType& device) const;
  // Whether Create would find a kernel for `node` (its op and dtype) on `device`.
  bool Supports(const Node& node, const DeviceType& device) const;

 private:
  struct Entry {
    KernelFactory factory;
    std::string type_attr;
  };
  // The entry Create uses for `node` (null if none), and the dtype it dispatched on.
  const Entry* Find(const Node& node, const DeviceType& device, DType* dtype) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  mutable absl::Mutex mu_;
  std::map<std::tuple<std::string, std::string, DType>, Entry> kernels_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_KERNELS_KERNEL_REGISTRY_H_

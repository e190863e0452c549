// framework/runtime/device.h
//
// A Device is one place kernels run: its full name
// ("/job:localhost/replica:0/task:0/device:CPU:0"), its type, an incarnation (random
// per process start, so a restarted task's devices are told apart) and the
// ResourceMgr holding the variables placed on it. DeviceMgr owns a process's devices.
// A GPU device also has its GpuContext (framework/kernels/cuda) and the DeviceAllocator
// of the GPU's memory; a CPU device has neither.
//
// Thread safety: Device and DeviceMgr are immutable after construction except for
// the ResourceMgr, which is thread-safe.
#ifndef TANDEM_FRAMEWORK_RUNTIME_DEVICE_H_
#define TANDEM_FRAMEWORK_RUNTIME_DEVICE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/graph/device_spec.h"
#include "framework/kernels/resource_mgr.h"
#include "framework/tensor/allocator.h"

namespace tandem {
namespace gpu {
class GpuContext;
}  // namespace gpu

class Device {
 public:
  Device(std::string name, DeviceType type);
  // A GPU device; `gpu` and `allocator` outlive it (they are process-wide).
  Device(std::string name, gpu::GpuContext* gpu, DeviceAllocator* allocator);
  const std::string& name() const { return name_; }
  const DeviceSpec& spec() const { return spec_; }
  const DeviceType& type() const { return type_; }
  uint64_t incarnation() const { return incarnation_; }
  ResourceMgr* resource_manager() { return &resources_; }
  gpu::GpuContext* gpu() const { return gpu_; }                     // Null on a CPU.
  DeviceAllocator* device_allocator() const { return allocator_; }  // Null on a CPU.

 private:
  std::string name_;
  DeviceSpec spec_;
  DeviceType type_;
  uint64_t incarnation_;
  ResourceMgr resources_;
  gpu::GpuContext* gpu_ = nullptr;
  DeviceAllocator* allocator_ = nullptr;
};

// Which local devices a process makes besides its CPU.
struct LocalDeviceOptions {
  // GPUs to use, from GPU:0 up: -1 every visible GPU, 0 none. More than are visible is
  // an error. A build without the CUDA backend has none.
  int num_gpus = 0;
  double gpu_memory_fraction = 0.9;  // Of each GPU's memory, for its allocator.
};

// The GPUs DeviceMgr::CreateLocal makes for LocalDeviceOptions::num_gpus = `requested`
// (-1: every visible one), without making them; more than are visible is returned as is.
int LocalGpuCount(int requested);

class DeviceMgr {
 public:
  // The devices of this process for job/replica/task: CPU:0, then GPU:0.. as
  // `options` asks. INVALID_ARGUMENT when it asks for GPUs the process lacks.
  static absl::StatusOr<std::unique_ptr<DeviceMgr>> CreateLocal(
      const std::string& job, int replica, int task, const LocalDeviceOptions& options = {});
  explicit DeviceMgr(std::vector<std::unique_ptr<Device>> devices);

  const std::vector<std::unique_ptr<Device>>& devices() const { return devices_; }
  // NOT_FOUND naming the device.
  absl::StatusOr<Device*> Lookup(absl::string_view name) const;
  // The first device matching `spec` (partial), or null.
  Device* FindMatching(const DeviceSpec& spec) const;
  // CPU:0, which runs what no other device has a kernel for.
  Device* default_device() const { return devices_.front().get(); }
  // Number of GPU devices.
  int num_gpus() const;

 private:
  std::vector<std::unique_ptr<Device>> devices_;
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_RUNTIME_DEVICE_H_

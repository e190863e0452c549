#include "framework/runtime/device.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "framework/core/random.h"
#include "glog/logging.h"
#ifdef TANDEM_WITH_CUDA
#include "framework/kernels/cuda/cuda_kernels.h"
#endif

namespace tandem {

Device::Device(std::string name, DeviceType type) : name_(std::move(name)), type_(std::move(type)) {
  auto spec = DeviceSpec::Parse(name_);
  CHECK(spec.ok()) << spec.status();
  spec_ = *spec;
  incarnation_ = RandomId();
}

Device::Device(std::string name, gpu::GpuContext* gpu, DeviceAllocator* allocator)
    : Device(std::move(name), kDeviceGpu) {
  gpu_ = gpu;
  allocator_ = allocator;
}

namespace {

int VisibleGpuCount() {
#ifdef TANDEM_WITH_CUDA
  return gpu::VisibleGpus();
#else
  return 0;
#endif
}

}  // namespace

int LocalGpuCount(int requested) { return requested < 0 ? VisibleGpuCount() : requested; }

absl::StatusOr<std::unique_ptr<DeviceMgr>> DeviceMgr::CreateLocal(
    const std::string& job, int replica, int task, const LocalDeviceOptions& options) {
  std::string prefix = absl::StrCat("/job:", job, "/replica:", replica, "/task:", task);
  std::vector<std::unique_ptr<Device>> devices;
  devices.push_back(std::make_unique<Device>(prefix + "/device:CPU:0", kDeviceCpu));
  const int visible = VisibleGpuCount();
  const int n = LocalGpuCount(options.num_gpus);
  if (n > visible) {
    return absl::InvalidArgumentError(absl::StrCat("asked for ", n,
                                                   " GPU(s) but this process sees ", visible,
#ifdef TANDEM_WITH_CUDA
                                                   ""
#else
                                                   " (tandem was built without the CUDA backend)"
#endif
                                                   ));
  }
#ifdef TANDEM_WITH_CUDA
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<gpu::GpuContext*> c = gpu::ContextFor(i, options.gpu_memory_fraction);
    if (!c.ok()) return c.status();
    devices.push_back(std::make_unique<Device>(absl::StrCat(prefix, "/device:GPU:", i), *c,
                                               gpu::AllocatorOf(*c)));
  }
#endif
  return std::make_unique<DeviceMgr>(std::move(devices));
}

int DeviceMgr::num_gpus() const {
  int n = 0;
  for (const auto& d : devices_) n += d->gpu() != nullptr;
  return n;
}

DeviceMgr::DeviceMgr(std::vector<std::unique_ptr<Device>> devices) : devices_(std::move(devices)) {
  CHECK(!devices_.empty());
}

absl::StatusOr<Device*> DeviceMgr::Lookup(absl::string_view name) const {
  for (const auto& d : devices_) {
    if (d->name() == name) return d.get();
  }
  return absl::NotFoundError(absl::StrCat("no device named ", name));
}

Device* DeviceMgr::FindMatching(const DeviceSpec& spec) const {
  for (const auto& d : devices_) {
    if (spec.Matches(d->spec())) return d.get();
  }
  return nullptr;
}

}  // namespace tandem

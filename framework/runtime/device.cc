#include "framework/runtime/device.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "framework/core/random.h"
#include "glog/logging.h"

namespace tandem {

Device::Device(std::string name, DeviceType type) : name_(std::move(name)), type_(std::move(type)) {
  auto spec = DeviceSpec::Parse(name_);
  CHECK(spec.ok()) << spec.status();
  spec_ = *spec;
  incarnation_ = RandomId();
}

std::unique_ptr<DeviceMgr> DeviceMgr::CreateLocal(const std::string& job, int replica, int task) {
  std::vector<std::unique_ptr<Device>> devices;
  devices.push_back(std::make_unique<Device>(
      absl::StrCat("/job:", job, "/replica:", replica, "/task:", task, "/device:CPU:0"),
      kDeviceCpu));
  return std::make_unique<DeviceMgr>(std::move(devices));
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

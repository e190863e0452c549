#include "framework/distributed/local_master.h"

#include <map>
#include <utility>

#include "absl/synchronization/mutex.h"

namespace tandem {
namespace {

struct Entry {
  std::weak_ptr<MasterInterface> master;
  std::string token;
};

absl::Mutex* RegistryMutex() {
  static absl::Mutex* mu = new absl::Mutex;
  return mu;
}

std::map<std::string, Entry>& Registry() {
  static auto* registry = new std::map<std::string, Entry>;  // Never destroyed.
  return *registry;
}

}  // namespace

void RegisterLocalMaster(const std::string& address, std::shared_ptr<MasterInterface> master,
                         const std::string& token) {
  absl::MutexLock lock(RegistryMutex());
  Registry()[address] = Entry{master, token};
}

void UnregisterLocalMaster(const std::string& address) {
  absl::MutexLock lock(RegistryMutex());
  Registry().erase(address);
}

std::shared_ptr<MasterInterface> FindLocalMaster(const std::string& address,
                                                 const std::string& token) {
  absl::MutexLock lock(RegistryMutex());
  auto it = Registry().find(address);
  if (it == Registry().end() || it->second.token != token) return nullptr;
  return it->second.master.lock();
}

}  // namespace tandem

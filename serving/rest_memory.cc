// serving/rest_memory.cc
#include "serving/rest_memory.h"

#include <malloc.h>

namespace tandem::serving {

void UseServingMallocSettings() {
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  mallopt(M_TRIM_THRESHOLD, 1024 * 1024);
}

MemoryReleaser::MemoryReleaser(std::chrono::milliseconds interval)
    : interval_(interval), thread_([this] { Loop(); }) {}

MemoryReleaser::~MemoryReleaser() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void MemoryReleaser::Loop() {
  int64_t seen = 0;
  absl::MutexLock lock(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::FromChrono(interval_))) {
    const int64_t now = served_.load(std::memory_order_relaxed);
    if (now == seen) continue;
    seen = now;
    mu_.Unlock();
    malloc_trim(0);
    trims_.fetch_add(1);
    mu_.Lock();
  }
}

}  // namespace tandem::serving

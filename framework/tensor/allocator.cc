#include "framework/tensor/allocator.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace tandem {
namespace {

size_t SizeClass(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes <= 4096) return (bytes + 63) & ~size_t{63};
  // Quarter steps between powers of two: waste is at most 25%.
  size_t p = size_t{1} << (63 - __builtin_clzll(bytes - 1));  // < bytes <= 2p
  size_t step = p / 4;
  return (bytes + step - 1) / step * step;
}

struct Pool {
  absl::Mutex mu;
  absl::flat_hash_map<size_t, std::vector<void*>> free_lists ABSL_GUARDED_BY(mu);
  size_t cached ABSL_GUARDED_BY(mu) = 0;
  int64_t system_allocations ABSL_GUARDED_BY(mu) = 0;
};

// A new block of `bytes` (a size class): small ones from the C library, large ones
// (whole huge pages: size classes from kHugePagesFromBytes up are multiples of 8 MiB)
// mapped afresh from the kernel on a 2 MiB boundary and advised into huge pages before
// anything touches them. The C library would serve them from heap memory it had used
// before, already in small pages that the advice does not change: Fashion-MNIST's
// images, read into a string and then copied into their tensor, ended up a third in
// huge pages (/proc/PID/smaps).
void* SystemAllocate(size_t bytes) {
  if (bytes < kHugePagesFromBytes) {
    void* p = std::aligned_alloc(kTensorAlignment, bytes);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  const size_t span = bytes + kHugePageBytes;
  void* m = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t start = reinterpret_cast<uintptr_t>(m);
  const uintptr_t aligned = (start + kHugePageBytes - 1) & ~(uintptr_t{kHugePageBytes} - 1);
  if (aligned > start) munmap(m, aligned - start);
  if (start + span > aligned + bytes) {
    munmap(reinterpret_cast<void*>(aligned + bytes), start + span - (aligned + bytes));
  }
  void* p = reinterpret_cast<void*>(aligned);
  // Advice only: a kernel without transparent huge pages refuses it, and the block
  // then lives in small pages as it would have anyway.
  madvise(p, bytes, MADV_HUGEPAGE);
  return p;
}

// Returns a block SystemAllocate made.
void SystemFree(void* p, size_t bytes) {
  if (bytes < kHugePagesFromBytes) {
    std::free(p);
  } else {
    munmap(p, bytes);
  }
}

Pool& GetPool() {
  static Pool* pool = new Pool;  // Never destroyed: tensors may outlive main's statics.
  return *pool;
}

}  // namespace

HostAllocator* HostAllocator::Get() {
  static HostAllocator* a = new HostAllocator;
  return a;
}

void* HostAllocator::Allocate(size_t bytes, size_t* capacity) {
  size_t cls = SizeClass(bytes);
  *capacity = cls;
  Pool& pool = GetPool();
  {
    absl::MutexLock lock(&pool.mu);
    auto it = pool.free_lists.find(cls);
    if (it != pool.free_lists.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      pool.cached -= cls;
      return p;
    }
    ++pool.system_allocations;
  }
  return SystemAllocate(cls);
}

void HostAllocator::Deallocate(void* p, size_t capacity) {
  if (p == nullptr) return;
  Pool& pool = GetPool();
  {
    absl::MutexLock lock(&pool.mu);
    if (pool.cached + capacity <= kMaxCachedBytes) {
      pool.free_lists[capacity].push_back(p);
      pool.cached += capacity;
      return;
    }
  }
  SystemFree(p, capacity);
}

HostAllocator::Stats HostAllocator::GetStats() {
  Pool& pool = GetPool();
  absl::MutexLock lock(&pool.mu);
  return {pool.system_allocations, static_cast<int64_t>(pool.cached)};
}

bool KeptOnDevice(DType dtype) { return dtype == DType::kFloat || dtype == DType::kBFloat16; }

}  // namespace tandem

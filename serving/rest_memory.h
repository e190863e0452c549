// serving/rest_memory.h
//
// Giving a server's freed memory back to the system after traffic. glibc keeps what a
// request freed in its arenas (one per thread that allocated, up to 8 per core) for
// the next allocation; a burst of large or hostile requests over many connection
// threads leaves each arena holding its peak. MemoryReleaser runs malloc_trim(0),
// which returns the free pages of every arena, at most once per interval and only
// after requests were served in it, so an idle server costs nothing and a busy one
// one trim a second. UseServingMallocSettings undoes InitProcess's training settings
// (blocks up to 512 MiB kept in the heap, trimmed above 1 GiB): a request's bodies
// and tensors of 256 KiB or more are mapped and unmapped on their own.
//
// Thread safety: Note() may be called from any thread; construction and destruction
// from one.
#ifndef TANDEM_SERVING_REST_MEMORY_H_
#define TANDEM_SERVING_REST_MEMORY_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "absl/synchronization/mutex.h"

namespace tandem::serving {

// mallopt for a server process: M_MMAP_THRESHOLD 256 KiB, M_TRIM_THRESHOLD 1 MiB.
void UseServingMallocSettings();

class MemoryReleaser {
 public:
  explicit MemoryReleaser(std::chrono::milliseconds interval = std::chrono::seconds(1));
  ~MemoryReleaser();
  MemoryReleaser(const MemoryReleaser&) = delete;
  MemoryReleaser& operator=(const MemoryReleaser&) = delete;

  // A request was served: trim at the end of this interval.
  void Note() { served_.fetch_add(1, std::memory_order_relaxed); }
  // Trims run so far.
  int64_t trims() const { return trims_.load(); }

 private:
  void Loop();

  const std::chrono::milliseconds interval_;
  std::atomic<int64_t> served_{0};
  std::atomic<int64_t> trims_{0};
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tandem::serving

#endif  // TANDEM_SERVING_REST_MEMORY_H_

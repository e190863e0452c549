// framework/core/thread_pool.h
//
// A fixed-size pool of worker threads running closures in FIFO order, plus
// ParallelFor, which splits [0, n) into chunks run on the pool and the caller. The
// threads flush denormal floats (core/denormal.h).
//
// Thread safety: Schedule and ParallelFor may be called from any thread, including
// from closures running on the pool. The destructor waits for queued work to finish.
#ifndef TANDEM_FRAMEWORK_CORE_THREAD_POOL_H_
#define TANDEM_FRAMEWORK_CORE_THREAD_POOL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tandem {

class ThreadPool {
 public:
  // Starts `num_threads` (>= 1) threads named `name` for debugging.
  ThreadPool(std::string name, int num_threads);
  // `requested` when positive, else one thread per core.
  static int DefaultSize(int requested);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Schedule(std::function<void()> fn);
  int NumThreads() const { return static_cast<int>(threads_.size()); }

  // Runs fn(begin, end) over disjoint chunks covering [0, n), at most one chunk per
  // thread plus one on the caller, and returns when all are done. Chunks are at least
  // `min_chunk` long, so small loops run inline.
  void ParallelFor(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop();

  std::string name_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_CORE_THREAD_POOL_H_

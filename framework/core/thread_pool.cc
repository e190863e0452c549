#include "framework/core/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>

#include "absl/synchronization/blocking_counter.h"
#include "framework/core/denormal.h"

namespace tandem {

ThreadPool::ThreadPool(std::string name, int num_threads) : name_(std::move(name)) {
  num_threads = std::max(1, num_threads);
  threads_.reserve(num_threads);
  for (int i = 0; i < num_threads; ++i) {
    threads_.emplace_back([this] {
      // Linux limits thread names to 15 characters; the name shows in top -H and gdb.
      pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
      FlushDenormals();
      WorkerLoop();
    });
  }
}

ThreadPool::~ThreadPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (auto& t : threads_) t.join();
}

void ThreadPool::Schedule(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(fn));
}

void ThreadPool::WorkerLoop() {
  for (;;) {
    std::function<void()> fn;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ThreadPool* p)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) { return p->stopping_ || !p->queue_.empty(); },
          this));
      if (queue_.empty()) return;  // Stopping and drained.
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    fn();
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t min_chunk,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(1, min_chunk);
  int64_t chunks = std::clamp<int64_t>(n / min_chunk, 1, NumThreads() + 1);
  if (chunks == 1) {
    fn(0, n);
    return;
  }
  // Chunks are claimed through a shared counter by the caller and by helper closures,
  // so the loop finishes even when every pool thread is busy (or is the caller).
  struct State {
    std::atomic<int64_t> next{0};
    absl::Mutex mu;
    int64_t finished ABSL_GUARDED_BY(mu) = 0;
  };
  auto state = std::make_shared<State>();
  const int64_t per = (n + chunks - 1) / chunks;
  chunks = (n + per - 1) / per;
  auto run = [state, per, n, chunks, &fn] {
    int64_t done_here = 0;
    for (int64_t c; (c = state->next.fetch_add(1)) < chunks; ++done_here) {
      fn(c * per, std::min(n, (c + 1) * per));
    }
    if (done_here > 0) {
      absl::MutexLock lock(&state->mu);
      state->finished += done_here;
    }
  };
  for (int64_t c = 1; c < chunks; ++c) Schedule(run);
  run();
  std::pair<State*, int64_t> wait_arg(state.get(), chunks);
  absl::MutexLock lock(&state->mu);
  state->mu.Await(absl::Condition(
      +[](std::pair<State*, int64_t>* arg)
           ABSL_NO_THREAD_SAFETY_ANALYSIS { return arg->first->finished == arg->second; },
      &wait_arg));
}

int ThreadPool::DefaultSize(int requested) {
  if (requested > 0) return requested;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace tandem

#include "framework/core/thread_pool.h"

#include <atomic>
#include <memory>
#include <vector>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(ThreadPoolTest, RunsEveryClosure) {
  ThreadPool pool("test", 3);
  std::atomic<int> sum{0};
  absl::BlockingCounter done(100);
  for (int i = 1; i <= 100; ++i) {
    pool.Schedule([&sum, &done, i] {
      sum += i;
      done.DecrementCount();
    });
  }
  done.Wait();
  EXPECT_EQ(sum.load(), 5050);
}

TEST(ThreadPoolTest, ParallelForCoversRangeExactlyOnce) {
  ThreadPool pool("test", 2);
  for (int64_t n : {0, 1, 7, 1000, 100003}) {
    std::vector<std::atomic<int>> hits(n);
    pool.ParallelFor(n, 10, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST(ThreadPoolTest, NestedParallelForFromPoolThreadsDoesNotDeadlock) {
  ThreadPool pool("test", 2);
  std::atomic<int64_t> total{0};
  absl::BlockingCounter done(4);
  for (int k = 0; k < 4; ++k) {
    pool.Schedule([&] {
      pool.ParallelFor(1000, 1, [&](int64_t b, int64_t e) { total += e - b; });
      done.DecrementCount();
    });
  }
  done.Wait();
  EXPECT_EQ(total.load(), 4000);
}

// The destructor promises to wait for queued work. A closure holds the only thread
// while the rest queue up behind it; it is let go just as the destructor starts, so
// nearly all of the queue is still waiting then. Every closure has run when the
// destructor returns.
TEST(ThreadPoolTest, DestructorRunsEveryQueuedClosureFirst) {
  constexpr int kQueued = 1000;
  std::atomic<int> ran{0};
  absl::Notification release;
  auto pool = std::make_unique<ThreadPool>("test", 1);
  absl::Notification blocking;
  pool->Schedule([&] {
    blocking.Notify();
    release.WaitForNotification();
  });
  blocking.WaitForNotification();
  for (int i = 0; i < kQueued; ++i) pool->Schedule([&] { ++ran; });
  EXPECT_EQ(ran.load(), 0);  // All of them wait behind the blocking closure.
  release.Notify();
  pool.reset();
  EXPECT_EQ(ran.load(), kQueued);
}

}  // namespace
}  // namespace tandem

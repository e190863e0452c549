// Dataset::Prefetch. Every test runs under a deadline so a hang fails fast instead of
// waiting for ctest's timeout.
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "framework/core/env.h"
#include "framework/data/dataset.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::data {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// Runs `body` on a thread; aborts the test binary if it takes longer than 30 s.
void WithDeadline(const std::function<void()>& body) {
  std::packaged_task<void()> task(body);
  std::future<void> done = task.get_future();
  std::thread t(std::move(task));
  if (done.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    std::fprintf(stderr, "test body still running after 30 s: hang\n");
    std::abort();
  }
  t.join();
  done.get();
}

DatasetPtr Range(int64_t n) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  auto ds = FromTensors({Tensor::FromVector<int64_t>(v, TensorShape({n}))});
  CHECK(ds.ok());
  return *ds;
}

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

TEST(PrefetchTest, YieldsTheSameElementsInOrder) {
  WithDeadline([] {
    for (int64_t depth : {int64_t{1}, int64_t{3}, kAutotune, int64_t{1000}}) {
      auto all = CollectAll(*Range(500)->Prefetch(depth));
      ASSERT_TRUE(all.ok()) << all.status();
      std::vector<int64_t> got;
      for (const Element& e : *all) got.push_back(e[0].scalar<int64_t>());
      EXPECT_THAT(got, ElementsAreArray(Iota(500))) << "depth " << depth;
    }
  });
}

TEST(PrefetchTest, EndOfInputRepeats) {
  WithDeadline([] {
    auto it = Range(2)->Prefetch(2)->MakeIterator();
    ASSERT_TRUE(it.ok());
    EXPECT_TRUE((*it)->GetNext().value().has_value());
    EXPECT_TRUE((*it)->GetNext().value().has_value());
    for (int i = 0; i < 3; ++i) EXPECT_FALSE((*it)->GetNext().value().has_value());
  });
}

TEST(PrefetchTest, RunsAheadOnABackgroundThreadBoundedByBufferSize) {
  WithDeadline([] {
    auto produced = std::make_shared<std::atomic<int>>(0);
    auto counted = Range(1000)->Map([produced](Element e) -> absl::StatusOr<Element> {
      produced->fetch_add(1);
      return e;
    });
    auto it = counted->Prefetch(5)->MakeIterator();
    ASSERT_TRUE(it.ok());
    // Without a GetNext the producer fills the buffer and then waits.
    while (produced->load() < 5) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_LE(produced->load(), 6);  // 5 queued + at most one in flight.
    auto first = (*it)->GetNext();
    ASSERT_TRUE(first.ok() && first->has_value());
    EXPECT_EQ((**first)[0].scalar<int64_t>(), 0);
  });
}

TEST(PrefetchTest, ErrorsPropagateInOrderAndStick) {
  WithDeadline([] {
    auto failing = Range(10)->Map([](Element e) -> absl::StatusOr<Element> {
      if (e[0].scalar<int64_t>() == 3) return absl::DataLossError("record 3 is corrupt");
      return e;
    });
    auto it = failing->Prefetch(4)->MakeIterator();
    ASSERT_TRUE(it.ok());
    for (int64_t i = 0; i < 3; ++i) {
      auto e = (*it)->GetNext();
      ASSERT_TRUE(e.ok() && e->has_value());
      EXPECT_EQ((**e)[0].scalar<int64_t>(), i);
    }
    auto err = (*it)->GetNext();
    EXPECT_EQ(err.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(std::string(err.status().message()), HasSubstr("record 3"));
    EXPECT_EQ((*it)->GetNext().status().code(), absl::StatusCode::kDataLoss);  // No hang.
  });
}

TEST(PrefetchTest, EarlyDestructionOfAnInfinitePipelineDoesNotHang) {
  WithDeadline([] {
    for (int round = 0; round < 20; ++round) {
      auto ds = Range(7)->Repeat(-1)->Prefetch(3)->Batch(2)->Prefetch(2);
      auto it = ds->MakeIterator();
      ASSERT_TRUE(it.ok());
      for (int i = 0; i < round % 4; ++i) {
        auto b = (*it)->GetNext();
        ASSERT_TRUE(b.ok() && b->has_value());
        EXPECT_EQ((**b)[0].dim(0), 2);
      }
      it->reset();  // Destroys both prefetch threads while they are blocked or running.
    }
  });
}

TEST(PrefetchTest, BadBufferSizeIsInvalidArgument) {
  EXPECT_EQ(Range(3)->Prefetch(0)->MakeIterator().status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The threads of this process (entries of /proc/self/task).
int CountThreads() {
  int n = 0;
  auto list = env::ListDir("/proc/self/task");
  if (list.ok()) n = static_cast<int>(list->size());
  return n;
}

// kAutotune starts a producer thread where a second CPU can run it, and none in a
// process confined to one CPU, where the consumer produces each element itself; the
// elements are the same either way. A set depth always starts the thread.
TEST(PrefetchTest, AutotuneRunsNoProducerThreadOnOneCpu) {
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE && first < 0; ++c) {
    if (CPU_ISSET(c, &all)) first = c;
  }
  ASSERT_GE(first, 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  // Affinity is per thread: the iterators are made and read on this one.
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  EXPECT_EQ(env::UsableCpus(), 1);
  {
    const int before = CountThreads();
    auto it = Range(100)->Prefetch(kAutotune)->MakeIterator();
    ASSERT_TRUE(it.ok()) << it.status();
    EXPECT_EQ(CountThreads(), before) << "a producer thread on one CPU";
    std::vector<int64_t> got;
    while (true) {
      auto e = (*it)->GetNext();
      ASSERT_TRUE(e.ok()) << e.status();
      if (!e->has_value()) break;
      got.push_back((**e)[0].scalar<int64_t>());
    }
    EXPECT_THAT(got, ElementsAreArray(Iota(100)));
    auto set_depth = Range(10)->Prefetch(2)->MakeIterator();
    ASSERT_TRUE(set_depth.ok());
    EXPECT_EQ(CountThreads(), before + 1) << "Prefetch(2) runs its producer thread anyway";
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
  if (env::UsableCpus() >= 2) {
    const int before = CountThreads();
    auto it = Range(10)->Prefetch(kAutotune)->MakeIterator();
    ASSERT_TRUE(it.ok());
    EXPECT_EQ(CountThreads(), before + 1) << "no producer thread with CPUs to spare";
  }
}

// kAutotune starts no producer thread while ScopedStepCpuThreads says the steps' threads
// hold every usable CPU, and starts one when they leave a CPU free, when the scope has
// ended, or when the count is not known (0).
TEST(PrefetchTest, AutotuneRunsNoProducerThreadWhereTheStepsHoldEveryCpu) {
  const int cpus = env::UsableCpus();
  if (cpus < 2) GTEST_SKIP() << "one usable CPU: kAutotune never starts a thread here";
  // Every iterator lives to the end over an endless input, so no producer thread exits
  // between two counts.
  std::vector<std::unique_ptr<Iterator>> keep;
  auto threads_started = [&keep](int step_cpu_threads) {
    ScopedStepCpuThreads scope(step_cpu_threads);
    const int before = CountThreads();
    auto it = Range(50)->Repeat(-1)->Prefetch(kAutotune)->MakeIterator();
    EXPECT_TRUE(it.ok()) << it.status();
    const int started = CountThreads() - before;
    std::vector<int64_t> got;
    while (it.ok() && got.size() < 50) {
      auto e = (*it)->GetNext();
      EXPECT_TRUE(e.ok() && e->has_value());
      if (!e.ok() || !e->has_value()) break;
      got.push_back((**e)[0].scalar<int64_t>());
    }
    EXPECT_THAT(got, ElementsAreArray(Iota(50)));
    if (it.ok()) keep.push_back(std::move(*it));
    return started;
  };
  EXPECT_EQ(threads_started(cpus), 0) << "the steps hold every CPU";
  EXPECT_EQ(threads_started(cpus + 3), 0);
  EXPECT_EQ(threads_started(cpus - 1), 1) << "a CPU is free for the producer";
  EXPECT_EQ(threads_started(0), 1) << "not known";
  {
    ScopedStepCpuThreads outer(cpus);
    { ScopedStepCpuThreads inner(1); }
    const int before = CountThreads();
    auto it = Range(5)->Repeat(-1)->Prefetch(kAutotune)->MakeIterator();
    ASSERT_TRUE(it.ok());
    EXPECT_EQ(CountThreads(), before) << "the inner scope restored the outer one's count";
    auto set_depth = Range(5)->Repeat(-1)->Prefetch(2)->MakeIterator();
    ASSERT_TRUE(set_depth.ok());
    EXPECT_EQ(CountThreads(), before + 1) << "Prefetch(2) runs its producer thread anyway";
    keep.push_back(std::move(*it));
    keep.push_back(std::move(*set_depth));
  }
  const int before = CountThreads();
  auto it = Range(5)->Repeat(-1)->Prefetch(kAutotune)->MakeIterator();
  ASSERT_TRUE(it.ok());
  EXPECT_EQ(CountThreads(), before + 1) << "the scope has ended";
}

}  // namespace
}  // namespace tandem::data

// OmpParallelFor: every item in exactly one chunk of at least the grain, one chunk per
// thread at most, at any team size.
#include "framework/kernels/cpu/parallel.h"

#include <omp.h>

#include <atomic>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(OmpParallelForTest, EveryItemOnceInChunksOfAtLeastTheGrain) {
  for (int threads : {1, 2, 3, 5}) {
    omp_set_num_threads(threads);
    for (int64_t n : {1, 2, 7, 64, 1000, 100003}) {
      for (int64_t grain : {1, 3, 64, 40000}) {
        std::vector<std::atomic<int>> seen(n);
        absl::Mutex mu;
        std::vector<std::pair<int64_t, int64_t>> ranges;
        OmpParallelFor(n, grain, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) seen[i].fetch_add(1);
          absl::MutexLock lock(&mu);
          ranges.emplace_back(begin, end);
        });
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(seen[i].load(), 1)
              << "item " << i << " n=" << n << " grain=" << grain << " threads=" << threads;
        }
        for (const auto& [begin, end] : ranges) {
          // A range below the grain only where the whole loop is (it then runs inline).
          if (ranges.size() > 1) {
            EXPECT_GE(end - begin, grain) << "n=" << n;
          }
        }
        EXPECT_LE(ranges.size(), static_cast<size_t>(threads));
      }
    }
  }
  omp_set_num_threads(1);
}

}  // namespace
}  // namespace tandem

// tests/framework/core/termination_test.cc
//
// The stop request a SIGTERM makes: the flag, the exit code and the callbacks (each
// run exactly once, whether registered before or after the request). The signal
// path itself runs in the cluster tests, on real processes.
#include "framework/core/termination.h"

#include <signal.h>

#include <atomic>

#include "gtest/gtest.h"

namespace tandem::termination {
namespace {

TEST(TerminationTest, RequestRunsEachCallbackOnce) {
  ResetForTesting();
  EXPECT_FALSE(Requested());
  EXPECT_EQ(Signal(), 0);
  std::atomic<int> before{0}, after{0}, removed{0};
  const int before_id = OnRequest([&] { ++before; });
  const int id = OnRequest([&] { ++removed; });
  Unregister(id);

  RequestForTesting(SIGTERM);
  RequestForTesting(SIGINT);  // A second request changes nothing.
  EXPECT_TRUE(Requested());
  EXPECT_EQ(Signal(), SIGTERM);
  EXPECT_EQ(ExitCode(), 143);
  EXPECT_EQ(before.load(), 1);
  EXPECT_EQ(removed.load(), 0);

  const int after_id = OnRequest([&] { ++after; });  // Registered late: runs at once.
  EXPECT_EQ(after.load(), 1);
  Unregister(before_id);
  Unregister(after_id);
  ResetForTesting();
  EXPECT_FALSE(Requested());
}

}  // namespace
}  // namespace tandem::termination

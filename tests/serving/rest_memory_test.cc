// MemoryReleaser trims only after requests, and a trim gives back the free memory a
// thread's arena holds between blocks still in use.
#include "serving/rest_memory.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::serving {
namespace {

using std::chrono::milliseconds;

double RssMib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

TEST(MemoryReleaserTest, TrimsOnlyAfterRequests) {
  MemoryReleaser releaser(milliseconds(20));
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(releaser.trims(), 0);  // Idle: nothing to give back.
  releaser.Note();
  for (int i = 0; i < 100 && releaser.trims() == 0; ++i) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(releaser.trims(), 1);
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(releaser.trims(), 1);  // One trim per interval with requests.
}

TEST(MemoryReleaserTest, ATrimReturnsTheFreeMemoryBetweenHeldBlocks) {
  UseServingMallocSettings();
  MemoryReleaser releaser(milliseconds(20));
  // A thread of its own gets an arena of its own, as a connection thread does. Blocks
  // of 128 KiB stay below the mmap threshold; every other one is freed, so the free
  // 32 MiB lies between held blocks, where no heap shrinking reaches it.
  std::vector<void*> held;
  std::thread([&] {
    for (int i = 0; i < 512; ++i) {
      held.push_back(std::malloc(128 * 1024));
      std::memset(held.back(), 1, 128 * 1024);
    }
    for (size_t i = 1; i < held.size(); i += 2) {
      std::free(held[i]);
      held[i] = nullptr;
    }
  }).join();
  const double freed = RssMib();
  releaser.Note();
  for (int i = 0; i < 100 && releaser.trims() == 0; ++i) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  const double trimmed = RssMib();
  EXPECT_GT(freed - trimmed, 24.0)
      << "resident with the free blocks " << freed << " MiB, after the trim " << trimmed << " MiB";
  for (void* p : held) std::free(p);
}

}  // namespace
}  // namespace tandem::serving

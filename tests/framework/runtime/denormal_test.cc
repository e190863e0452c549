// Denormal floats are flushed on every thread that runs kernels (core/denormal.h): pool
// threads, the caller of Session::Run while a step runs (and only then), and OpenMP
// team threads under cwise loops and oneDNN matmuls. A denormal operand reads as zero
// (DAZ) and a denormal result is written as zero (FTZ). ctest runs it again with
// TANDEM_KEEP_DENORMALS=1, where nothing is flushed.
#include "framework/core/denormal.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/synchronization/blocking_counter.h"
#include "framework/core/thread_pool.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/standard_ops.h"
#include "framework/runtime/session.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::Each;

#if defined(__x86_64__) || defined(__aarch64__)
constexpr bool kSupported = true;
#else
constexpr bool kSupported = false;
#endif

// False under TANDEM_KEEP_DENORMALS=1.
bool Flushing() {
  const char* keep = std::getenv("TANDEM_KEEP_DENORMALS");
  return keep == nullptr || std::string(keep) == "0" || std::string(keep).empty();
}
// What a denormal result or operand becomes: zero when flushing, else itself.
float Expected(float exact) { return Flushing() ? 0.0f : exact; }

// The smallest normal float32 is 1.18e-38: these are below it.
constexpr float kDenormal = 1e-40f;
constexpr float kTiny = 1e-21f;  // Normal, but kTiny * kTiny = 1e-42 is not.

float Product(float a, float b) {
  volatile float x = a, y = b;  // Computed at run time, on this thread.
  return x * y;
}

TEST(DenormalTest, TheScopeFlushesAndRestores) {
  if (!kSupported) GTEST_SKIP() << "no flush-to-zero control on this CPU";
  ASSERT_FALSE(DenormalsFlushed()) << "the test process starts in the default mode";
  EXPECT_GT(Product(kTiny, kTiny), 0.0f);
  EXPECT_GT(Product(kDenormal, 1.0f), 0.0f);
  {
    ScopedFlushDenormals flush;
    EXPECT_EQ(DenormalsFlushed(), Flushing());
    EXPECT_EQ(Product(kTiny, kTiny), Expected(Product(kTiny, kTiny)));  // FTZ.
    EXPECT_EQ(Product(kDenormal, 1.0f), Expected(kDenormal));           // DAZ.
    EXPECT_EQ(Product(1e-20f, 1e-10f), 1e-30f * 1.0f);
  }
  EXPECT_FALSE(DenormalsFlushed());
  EXPECT_GT(Product(kTiny, kTiny), 0.0f);
}

TEST(DenormalTest, PoolThreadsFlush) {
  if (!kSupported) GTEST_SKIP() << "no flush-to-zero control on this CPU";
  ThreadPool pool("denormal", 2);
  std::vector<float> products(8, -1.0f);
  std::vector<int> flushed(8, 0);
  absl::BlockingCounter done(8);
  for (int i = 0; i < 8; ++i) {
    pool.Schedule([&, i] {
      flushed[i] = DenormalsFlushed();
      products[i] = Product(kTiny, kTiny);
      done.DecrementCount();
    });
  }
  done.Wait();
  EXPECT_THAT(flushed, Each(Flushing() ? 1 : 0));
  EXPECT_THAT(products, Each(Expected(Product(kTiny, kTiny))));
  EXPECT_FALSE(DenormalsFlushed());  // The test's thread is left as it was.
}

Tensor Filled(const TensorShape& shape, float value) {
  Tensor t(DType::kFloat, shape);
  std::fill(t.flat<float>().begin(), t.flat<float>().end(), value);
  return t;
}

// Runs `fetch` with x and y fed, on a session with two intra-op threads.
std::vector<Tensor> RunWithTwoThreads(const Scope& root, const std::string& fetch, const Tensor& x,
                                      const Tensor& y) {
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  SessionOptions so;
  so.intra_op_threads = 2;
  so.inter_op_threads = 2;
  auto session = NewDirectSession(def, so);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return {};
  auto out = (*session)->Run({{"x:0", x}, {"y:0", y}}, {fetch});
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::vector<Tensor>{};
}

TEST(DenormalTest, KernelsFlushOnTheCallerAndOnOpenMpThreads) {
  if (!kSupported) GTEST_SKIP() << "no flush-to-zero control on this CPU";
  ops::EnsureStandardOps();
  // This thread's OpenMP team, created before any step: it does not flush, and a
  // step's kernels on this thread must make it.
  std::vector<int> team(2, -1);
#pragma omp parallel num_threads(2)
  team[omp_get_thread_num()] = DenormalsFlushed();
  ASSERT_THAT(team, Each(0));
  // Small: the Mul runs inline on this thread. Large: cwise splits it over threads.
  for (int64_t n : {int64_t{4}, int64_t{1} << 20}) {
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root.WithOpName("x"), DType::kFloat);
    Output y = ops::Placeholder(root.WithOpName("y"), DType::kFloat);
    ops::Mul(root.WithOpName("ftz"), x, x);
    ops::Mul(root.WithOpName("daz"), y, ops::Const(root, 1.0f));
    const Tensor tiny = Filled(TensorShape({n}), kTiny);
    const Tensor denormal = Filled(TensorShape({n}), kDenormal);
    for (const char* fetch : {"ftz:0", "daz:0"}) {
      std::vector<Tensor> out = RunWithTwoThreads(root, fetch, tiny, denormal);
      ASSERT_EQ(out.size(), 1u);
      const float exact = fetch[0] == 'f' ? Product(kTiny, kTiny) : kDenormal;
      EXPECT_THAT(out[0].flat<float>(), Each(Expected(exact))) << fetch << " n=" << n;
    }
    EXPECT_FALSE(DenormalsFlushed()) << "Run left this thread flushing";
  }
  // A oneDNN matmul on its OpenMP team: every product is 1e-42, each partial sum
  // flushes to zero; unflushed, the sums of 512 products would be 5e-40.
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DType::kFloat);
  Output y = ops::Placeholder(root.WithOpName("y"), DType::kFloat);
  ops::MatMul(root.WithOpName("mm"), x, y);
  std::vector<Tensor> out = RunWithTwoThreads(root, "mm:0", Filled(TensorShape({256, 512}), kTiny),
                                              Filled(TensorShape({512, 256}), kTiny));
  ASSERT_EQ(out.size(), 1u);
  if (Flushing()) {
    EXPECT_THAT(out[0].flat<float>(), Each(0.0f));
  } else {
    EXPECT_THAT(out[0].flat<float>(), Each(::testing::Gt(0.0f)));
  }
  EXPECT_FALSE(DenormalsFlushed());
}

}  // namespace
}  // namespace tandem

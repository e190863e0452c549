// Executor: the promises of executor.h that whole-session tests cannot pin down. The
// first error is the step's status (a later one does not replace it, and no node starts
// after it); an asynchronous kernel that completes on another thread holds the step
// until it calls back, and its output feeds its successors; a kernel whose output dtype
// is not the node's is an error naming the node.
//
// The tests register three test-only ops: TestHeld (asynchronous; it completes when the
// test releases it, with x + 1, an error, or a wrongly typed value), TestFail (fails at
// once) and TestCount (counts its runs, passes its input through).
#include "framework/runtime/executor.h"

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "framework/kernels/kernel_registry.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/internal/build.h"
#include "framework/ops/math_ops.h"
#include "framework/runtime/runtime_kernels.h"
#include "framework/runtime/subgraph.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

constexpr char kCpu[] = "/job:localhost/replica:0/task:0/device:CPU:0";

// TestHeld kernels that have started and wait for the test, by node name.
class Held {
 public:
  static Held& Get() {
    static Held* h = new Held;
    return *h;
  }

  void Add(const std::string& name, OpKernelContext* ctx, AsyncOpKernel::DoneCallback done) {
    absl::MutexLock lock(&mu_);
    pending_[name] = {ctx, std::move(done)};
    started_.SignalAll();
  }

  // Waits until node `name` has started; false if it has not within a minute (a node
  // the executor skipped never starts).
  bool WaitStarted(const std::string& name) {
    absl::MutexLock lock(&mu_);
    return WaitStartedLocked(name);
  }

  // Waits until node `name` has started, then completes it from the calling thread: with
  // `status` when it is an error, else with x + 1 (as int32 when `wrong_dtype`).
  void Release(const std::string& name, const absl::Status& status, bool wrong_dtype = false) {
    Pending p;
    {
      absl::MutexLock lock(&mu_);
      ASSERT_TRUE(WaitStartedLocked(name)) << name << " never started";
      p = std::move(pending_[name]);
      pending_.erase(name);
    }
    if (status.ok()) {
      const Tensor& x = p.ctx->input(0);
      Tensor y(wrong_dtype ? DType::kInt32 : DType::kFloat, x.shape());
      for (int64_t i = 0; i < x.NumElements(); ++i) {
        if (wrong_dtype) {
          y.flat<int32_t>()[i] = static_cast<int32_t>(x.flat<float>()[i]) + 1;
        } else {
          y.flat<float>()[i] = x.flat<float>()[i] + 1;
        }
      }
      p.ctx->set_output(0, std::move(y));
    }
    p.done(status);
  }

 private:
  bool WaitStartedLocked(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::Time deadline = absl::Now() + absl::Minutes(1);
    while (pending_.count(name) == 0) {
      if (started_.WaitWithDeadline(&mu_, deadline)) return pending_.count(name) > 0;
    }
    return true;
  }

  struct Pending {
    OpKernelContext* ctx = nullptr;
    AsyncOpKernel::DoneCallback done;
  };
  absl::Mutex mu_;
  absl::CondVar started_;
  std::map<std::string, Pending> pending_ ABSL_GUARDED_BY(mu_);
};

class HeldKernel : public AsyncOpKernel {
 public:
  void ComputeAsync(OpKernelContext& ctx, DoneCallback done) override {
    Held::Get().Add(node().name(), &ctx, std::move(done));
  }
};

class FailKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    return absl::FailedPreconditionError(absl::StrCat("TestFail ", node().name()));
  }
};

std::atomic<int> count_runs{0};  // Runs of TestCount kernels.

class CountKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    ++count_runs;
    ctx.set_output(0, ctx.input(0));
    return absl::OkStatus();
  }
};

// Declares a float output and produces an int32 one.
class WrongDTypeKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    ctx.set_output(0, Tensor::Scalar<int32_t>(7));
    return absl::OkStatus();
  }
};

void RegisterTestOps() {
  static const bool done = [] {
    EnsureKernels();
    for (const char* op : {"TestHeld", "TestFail", "TestCount", "TestWrongDType"}) {
      // One input, one output like it. Stateful: no pass merges or prunes them. Not
      // cheap: with a pool, the executor runs them there.
      OpRegistry::Global()->Register({.name = op,
                                      .min_inputs = 1,
                                      .max_inputs = 1,
                                      .stateful = true,
                                      .infer = shape_fn::Unchanged});
    }
    KernelRegistry::Global()->Register<HeldKernel>("TestHeld", kDeviceCpu);
    KernelRegistry::Global()->Register<FailKernel>("TestFail", kDeviceCpu);
    KernelRegistry::Global()->Register<CountKernel>("TestCount", kDeviceCpu);
    KernelRegistry::Global()->Register<WrongDTypeKernel>("TestWrongDType", kDeviceCpu);
    return true;
  }();
  ASSERT_TRUE(done);
}

Output Op(const Scope& root, const char* op, Output x, const char* name) {
  return ops::internal::Build(root.WithOpName(name), op, {x});
}

// An executor of every node of `root`, with `fetches` as its retvals.
std::unique_ptr<Executor> MakeExecutor(const Scope& root, Device* device,
                                       const std::vector<std::string>& fetches) {
  EXPECT_TRUE(root.ok()) << root.status();
  std::vector<std::string> targets;
  for (const auto& n : root.graph()->nodes()) targets.push_back(n->name());
  auto sub = BuildExecutableGraph(*root.graph(), {}, fetches, targets);
  EXPECT_TRUE(sub.ok()) << sub.status();
  if (!sub.ok()) return nullptr;
  auto exec = Executor::Create(std::move(*sub), device, KernelRegistry::Global());
  EXPECT_TRUE(exec.ok()) << exec.status();
  return exec.ok() ? std::move(*exec) : nullptr;
}

// Starts a step with RunAsync; Wait() returns its status.
class AsyncStep {
 public:
  AsyncStep(const Executor& exec, ThreadPool* pool) {
    args_.retvals = &retvals_;
    args_.inter_op_pool = pool;
    exec.RunAsync(args_, [this](const absl::Status& s) {
      status_ = s;
      done_.Notify();
    });
  }
  absl::Status Wait() {
    done_.WaitForNotification();
    return status_;
  }
  bool HasEnded() const { return done_.HasBeenNotified(); }

 private:
  ExecutorArgs args_;
  std::vector<Tensor> retvals_;
  absl::Status status_;
  absl::Notification done_;
};

// Two kernels fail in one step, in either order: the step reports the first.
TEST(ExecutorTest, TheFirstErrorIsTheStepsStatus) {
  RegisterTestOps();
  Device device(kCpu, kDeviceCpu);
  Scope root = Scope::NewRootScope();
  Output c = ops::Const(root, {1, 2}, TensorShape({2}));
  Output a = Op(root, "TestHeld", c, "a");
  Output b = Op(root, "TestHeld", c, "b");
  auto exec = MakeExecutor(root, &device, {a.name(), b.name()});
  ASSERT_NE(exec, nullptr);
  ThreadPool pool("executor_test", 2);
  for (bool a_first : {true, false}) {
    const std::string first = a_first ? "a" : "b";
    const std::string second = a_first ? "b" : "a";
    AsyncStep step(*exec, &pool);
    // Both run before either fails (a node that has not started by then never does).
    ASSERT_TRUE(Held::Get().WaitStarted("a"));
    ASSERT_TRUE(Held::Get().WaitStarted("b"));
    Held::Get().Release(first, absl::AbortedError(absl::StrCat("first error, from ", first)));
    EXPECT_FALSE(step.HasEnded());  // The other kernel is still running.
    Held::Get().Release(second, absl::InternalError(absl::StrCat("later error, from ", second)));
    absl::Status s = step.Wait();
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
    EXPECT_EQ(std::string(s.message()), absl::StrCat("first error, from ", first));
  }
}

// A kernel fails while an asynchronous one is pending: the pending one's later outcome
// (success or error) changes nothing, and its successor never starts.
TEST(ExecutorTest, AfterTheFirstErrorNoNodeStartsAndLaterOutcomesAreIgnored) {
  RegisterTestOps();
  Device device(kCpu, kDeviceCpu);
  Scope root = Scope::NewRootScope();
  Output c = ops::Const(root, {1, 2}, TensorShape({2}));
  Output g = Op(root, "TestHeld", c, "g");
  Output f = Op(root, "TestFail", g, "f");
  Output h = Op(root, "TestHeld", c, "h");
  Output after = Op(root, "TestCount", h, "after");
  auto exec = MakeExecutor(root, &device, {f.name(), after.name()});
  ASSERT_NE(exec, nullptr);
  for (const absl::Status& later : {absl::OkStatus(), absl::InternalError("later error")}) {
    count_runs = 0;
    // Without a pool every node runs inline: g and h have started when RunAsync
    // returns, and f has failed when g's release returns.
    AsyncStep step(*exec, /*pool=*/nullptr);
    ASSERT_TRUE(Held::Get().WaitStarted("h"));
    Held::Get().Release("g", absl::OkStatus());
    EXPECT_FALSE(step.HasEnded());  // h is still running.
    Held::Get().Release("h", later);
    absl::Status s = step.Wait();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(s.message(), HasSubstr("TestFail f"));
    EXPECT_EQ(count_runs.load(), 0) << "a node started after the step failed";
  }
}

// The asynchronous kernel calls back from a thread of the test's, after Run has started
// waiting; Run returns only then, with the successor's value computed from the kernel's
// output. Both with an inter-op pool and inline.
TEST(ExecutorTest, AnAsynchronousKernelCompletingOnAnotherThreadFeedsTheStep) {
  RegisterTestOps();
  Device device(kCpu, kDeviceCpu);
  const std::vector<float> xs = {1.5f, -2.0f, 4.0f};
  const float factor = 3.0f;
  Scope root = Scope::NewRootScope();
  Output c = ops::Const(root, Tensor::FromVector<float>(xs, TensorShape({3})));
  Output h = Op(root, "TestHeld", c, "h");
  Output y = ops::Mul(root.WithOpName("y"), h, ops::Const(root, factor));
  auto exec = MakeExecutor(root, &device, {y.name()});
  ASSERT_NE(exec, nullptr);
  ThreadPool pool("executor_test", 2);
  for (ThreadPool* p : {&pool, static_cast<ThreadPool*>(nullptr)}) {
    std::atomic<bool> run_returned{false};
    std::atomic<bool> returned_before_release{false};
    std::thread releaser([&] {
      // Waits until the kernel has started, then lets it finish from this thread.
      EXPECT_TRUE(Held::Get().WaitStarted("h"));
      returned_before_release = run_returned.load();
      Held::Get().Release("h", absl::OkStatus());
    });
    std::vector<Tensor> rets;
    ExecutorArgs args;
    args.retvals = &rets;
    args.inter_op_pool = p;
    absl::Status s = exec->Run(args);
    run_returned = true;
    releaser.join();
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_FALSE(returned_before_release.load());
    ASSERT_EQ(rets.size(), 1u);
    ASSERT_EQ(rets[0].dtype(), DType::kFloat);
    ASSERT_EQ(rets[0].NumElements(), static_cast<int64_t>(xs.size()));
    for (size_t i = 0; i < xs.size(); ++i) {
      EXPECT_EQ(rets[0].flat<float>()[i], (xs[i] + 1) * factor) << "element " << i;
    }
  }
}

// A kernel whose output has another dtype than its node's: an INTERNAL error naming the
// node and both dtypes, whether the kernel is synchronous or not; its consumer never
// sees the value.
TEST(ExecutorTest, AnOutputOfTheWrongDTypeIsAnErrorNamingTheNode) {
  RegisterTestOps();
  Device device(kCpu, kDeviceCpu);
  Scope root = Scope::NewRootScope();
  Output c = ops::Const(root, 2.0f);
  Output liar = Op(root, "TestWrongDType", c, "liar");
  Output after = Op(root, "TestCount", liar, "after_liar");
  auto exec = MakeExecutor(root, &device, {after.name()});
  ASSERT_NE(exec, nullptr);
  count_runs = 0;
  std::vector<Tensor> rets;
  ExecutorArgs args;
  args.retvals = &rets;
  absl::Status s = exec->Run(args);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_THAT(s.message(), HasSubstr("'liar'"));
  EXPECT_THAT(s.message(), HasSubstr(std::string(DTypeName(DType::kInt32))));
  EXPECT_THAT(s.message(), HasSubstr(std::string(DTypeName(DType::kFloat))));
  EXPECT_EQ(count_runs.load(), 0);

  Scope root2 = Scope::NewRootScope();
  Output h = Op(root2, "TestHeld", ops::Const(root2, 2.0f), "async_liar");
  auto exec2 = MakeExecutor(root2, &device, {h.name()});
  ASSERT_NE(exec2, nullptr);
  AsyncStep step(*exec2, /*pool=*/nullptr);
  Held::Get().Release("async_liar", absl::OkStatus(), /*wrong_dtype=*/true);
  absl::Status s2 = step.Wait();
  EXPECT_EQ(s2.code(), absl::StatusCode::kInternal) << s2;
  EXPECT_THAT(s2.message(), HasSubstr("'async_liar'"));
  EXPECT_THAT(s2.message(), HasSubstr(std::string(DTypeName(DType::kInt32))));
}

}  // namespace
}  // namespace tandem

// DirectSession end to end: the seeds' small programs and the errors a bad graph or
// a bad feed must give (never a crash).
#include "framework/runtime/direct_session.h"

#include <omp.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "framework/core/thread_pool.h"
#include "framework/kernels/kernel_registry.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/internal/build.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/nn_ops.h"
#include "framework/ops/random_ops.h"
#include "framework/ops/state_ops.h"
#include "framework/runtime/session.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Session> MakeSession(const Scope& root) {
  EXPECT_TRUE(root.ok()) << root.status();
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  auto s = NewDirectSession(def);
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(s).value();
}

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

// The seeds' first program: w and b on the CPU, fetch w+b and w*b.
TEST(DirectSessionTest, VariablesAddAndMultiply) {
  Scope root = Scope::NewRootScope();
  Scope cpu = root.WithDevice("/cpu:0");
  ops::Variable w(cpu, "w", ops::Const(cpu, {1, 2, 3}, TensorShape({3})));
  ops::Variable b(cpu, "b", ops::Const(cpu, {10, 20, 30}, TensorShape({3})));
  Output sum = ops::Add(cpu, w.value(), b.value());
  Output prod = ops::Mul(cpu, w.value(), b.value());
  Node* init = ops::GlobalVariablesInitializer(root);
  auto session = MakeSession(root);
  ASSERT_TRUE(session->Run({}, {}, {init->name()}).ok());
  auto out = session->Run({}, {sum.name(), prod.name()});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].flat<float>(), ::testing::ElementsAre(11, 22, 33));
  EXPECT_THAT((*out)[1].flat<float>(), ::testing::ElementsAre(10, 40, 90));
}

TEST(DirectSessionTest, AssignAddPersistsAcrossRuns) {
  Scope root = Scope::NewRootScope();
  ops::Variable v(root, "counter", ops::Const(root, 0.0f));
  Output inc = ops::AssignAdd(root, v, ops::Const(root, 1.5f));
  auto session = MakeSession(root);
  ASSERT_TRUE(session->Run({}, {}, {v.initializer()->name()}).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(session->Run({}, {inc.name()}).ok());
  auto out = session->Run({}, {v.value().name()});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].scalar<float>(), 4.5f);
}

TEST(DirectSessionTest, FetchingUninitializedVariableIsFailedPrecondition) {
  Scope root = Scope::NewRootScope();
  ops::Variable w(root, "weights", ops::Const(root, {1, 2}, TensorShape({2})));
  auto session = MakeSession(root);
  auto out = session->Run({}, {w.value().name()});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Msg(out.status()), HasSubstr("uninitialized value weights"));
}

TEST(DirectSessionTest, AskingForMoreGpusThanVisibleFailsCreation) {
  Scope root = Scope::NewRootScope();
  ops::Identity(root, ops::Const(root, 1.0f));
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  SessionOptions options;
  options.num_gpus = 64;
  auto session = NewDirectSession(def, options);
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(session.status()), HasSubstr("asked for 64 GPU(s) but this process sees"));
}

TEST(DirectSessionTest, MissingFeedNamesThePlaceholder) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("images"), DType::kFloat, PartialShape({-1, 784}));
  Output y = ops::Identity(root, x);
  auto session = MakeSession(root);
  auto out = session->Run({}, {y.name()});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(out.status()), HasSubstr("images"));
}

TEST(DirectSessionTest, WrongFeedDtypeAndShapeAreRejected) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DType::kFloat, PartialShape({-1, 2}));
  Output y = ops::Identity(root, x);
  auto session = MakeSession(root);
  auto bad_type =
      session->Run({{"x", Tensor::FromVector<int32_t>({1, 2}, TensorShape({1, 2}))}}, {y.name()});
  EXPECT_EQ(bad_type.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(bad_type.status()), HasSubstr("int32"));
  auto bad_shape =
      session->Run({{"x", Tensor::FromVector<float>({1, 2, 3}, TensorShape({3}))}}, {y.name()});
  EXPECT_EQ(bad_shape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(bad_shape.status()), HasSubstr("[?,2]"));
  auto good =
      session->Run({{"x", Tensor::FromVector<float>({1, 2}, TensorShape({1, 2}))}}, {y.name()});
  EXPECT_TRUE(good.ok()) << good.status();
}

TEST(DirectSessionTest, ShapeMismatchNamesOpAndShapes) {
  Scope root = Scope::NewRootScope();
  Output a = ops::Placeholder(root.WithOpName("a"), DType::kFloat, PartialShape({-1, 784}));
  Output b = ops::Const(root, Tensor::Filled(DType::kFloat, TensorShape({100, 10}), 1.0));
  ops::MatMul(root.WithOpName("dense/MatMul"), a, b);
  EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(root.status()), HasSubstr("dense/MatMul"));
  EXPECT_THAT(Msg(root.status()), HasSubstr("784"));
  EXPECT_THAT(Msg(root.status()), HasSubstr("100"));
}

TEST(DirectSessionTest, UnknownOpInGraphDefIsAnError) {
  proto::GraphDef def;
  auto* n = def.add_node();
  n->set_name("x");
  n->set_op("NoSuchOp");
  auto s = NewDirectSession(def);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(s.status()), HasSubstr("NoSuchOp"));
}

TEST(DirectSessionTest, UnknownFetchAndTargetAreNotFound) {
  Scope root = Scope::NewRootScope();
  ops::Const(root.WithOpName("c"), 1.0f);
  auto session = MakeSession(root);
  EXPECT_EQ(session->Run({}, {"nope:0"}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(session->Run({}, {}, {"nope"}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(session->Run({}, {"c:3"}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DirectSessionTest, FeedingAnIntermediateTensorPrunesItsInputs) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DType::kFloat, PartialShape({2}));
  Output h = ops::Mul(root.WithOpName("h"), x, ops::Const(root, 2.0f));
  Output y = ops::Add(root.WithOpName("y"), h, ops::Const(root, 1.0f));
  auto session = MakeSession(root);
  // x is never fed: h is, so x's placeholder must not run.
  auto out = session->Run({{h.name(), Tensor::FromVector<float>({5, 6}, TensorShape({2}))}},
                          {y.name(), h.name()});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].flat<float>(), ::testing::ElementsAre(6, 7));
  EXPECT_THAT((*out)[1].flat<float>(), ::testing::ElementsAre(5, 6));
}

TEST(DirectSessionTest, ConcurrentRunsAndTracing) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DType::kFloat, PartialShape({-1}));
  Output y = ops::Mul(root, x, x);
  auto session = MakeSession(root);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        float v = static_cast<float>(t * 100 + i);
        auto out =
            session->Run({{"x", Tensor::FromVector<float>({v}, TensorShape({1}))}}, {y.name()});
        if (out.ok() && (*out)[0].flat<float>()[0] == v * v) ++ok;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 200);
  RunOptions opts;
  opts.trace = true;
  RunMetadata meta;
  auto out = session->Run({{"x", Tensor::FromVector<float>({3}, TensorShape({1}))}}, {y.name()}, {},
                          opts, &meta);
  ASSERT_TRUE(out.ok());
  EXPECT_GE(meta.step_stats.nodes.size(), 2u);
}

// Stateful kernels are shared across fetch signatures: a random op's stream goes on
// rather than restarting when another Run fetches a different set of tensors.
TEST(DirectSessionTest, RandomStreamContinuesAcrossFetchSignatures) {
  Scope root = Scope::NewRootScope();
  root.graph()->set_seed(5);
  Output r =
      ops::RandomUniform(root.WithOpName("r"), ops::ConstInt32(root, std::vector<int32_t>{4}));
  Output other = ops::Const(root.WithOpName("other"), 1.0f);
  auto session = MakeSession(root);
  auto first = session->Run({}, {r.name()});
  auto second = session->Run({}, {r.name(), other.name()});
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_NE((*first)[0].flat<float>()[0], (*second)[0].flat<float>()[0]);
  // A fresh session with the same seeds repeats the sequence.
  auto again = MakeSession(root);
  auto first_again = again->Run({}, {r.name(), other.name()});
  ASSERT_TRUE(first_again.ok());
  EXPECT_EQ((*first)[0].flat<float>()[0], (*first_again)[0].flat<float>()[0]);
}

TEST(DirectSessionTest, StepTimeoutStopsTheStepWithDeadlineExceeded) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Const(root, Tensor::Filled(DType::kFloat, TensorShape({384, 384}), 0.001));
  Output h = x;
  for (int i = 0; i < 40; ++i) h = ops::MatMul(root, h, x);  // A chain: one node at a time.
  auto session = MakeSession(root);
  RunOptions opts;
  opts.timeout_ms = 1;
  auto out = session->Run({}, {h.name()}, {}, opts, nullptr);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(Msg(out.status()), HasSubstr("timed out"));
  opts.timeout_ms = 600000;
  EXPECT_TRUE(session->Run({}, {h.name()}, {}, opts, nullptr).ok());
}

// Outputs omp_get_max_threads() of the thread it runs on.
// A graph of one node per name in `nodes`, each of the test op `op`: no inputs and an
// int32 scalar computed by kernel K (the op and kernel are registered on first use).
// Writes the graph to `def` and returns the nodes' output names.
template <typename K>
std::vector<std::string> ScalarProbeGraph(const std::string& op,
                                          const std::vector<std::string>& nodes,
                                          proto::GraphDef* def) {
  static const bool registered = [&] {
    OpRegistry::Global()->Register({.name = op, .infer = [](InferenceContext& ctx) {
                                      ctx.AddOutput(DType::kInt32, PartialShape({}));
                                      return absl::OkStatus();
                                    }});
    KernelRegistry::Global()->Register<K>(op, kDeviceCpu);
    return true;
  }();
  EXPECT_TRUE(registered);
  Scope root = Scope::NewRootScope();
  std::vector<std::string> names;
  for (const std::string& n : nodes)
    names.push_back(ops::internal::Build(root, op, {}, {}, n).name());
  EXPECT_TRUE(root.ok()) << root.status();
  root.graph()->ToGraphDef(def);
  return names;
}

class OmpThreadsKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    ctx.set_output(0, Tensor::Scalar<int32_t>(omp_get_max_threads()));
    return absl::OkStatus();
  }
};

TEST(DirectSessionTest, KernelsUseIntraOpThreadsForOpenMpOnEveryThread) {
  // Two independent expensive nodes: the executor runs one on its pool and the other
  // inline on the calling thread.
  proto::GraphDef def;
  const std::vector<std::string> ab =
      ScalarProbeGraph<OmpThreadsKernel>("TestOmpThreads", {"a", "b"}, &def);
  // 3 and 1 both differ from OpenMP's default here (OMP_NUM_THREADS=2 under ctest, or
  // one per core), and from each other on the same threads.
  for (int intra : {3, 1}) {
    SessionOptions options;
    options.intra_op_threads = intra;
    options.inter_op_threads = 2;
    auto session = NewDirectSession(def, options);
    ASSERT_TRUE(session.ok()) << session.status();
    std::thread caller([&] {  // A thread of the caller's that never set OpenMP up.
      for (int run = 0; run < 4; ++run) {
        auto out = (*session)->Run({}, ab);
        ASSERT_TRUE(out.ok()) << out.status();
        EXPECT_EQ((*out)[0].scalar<int32_t>(), intra);
        EXPECT_EQ((*out)[1].scalar<int32_t>(), intra);
      }
    });
    caller.join();
  }
}

// The threads a kernel may split a loop over besides its own: the intra-op pool's.
class IntraPoolThreadsKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    ThreadPool* pool = ctx.intra_op_pool();
    ctx.set_output(0, Tensor::Scalar<int32_t>(pool == nullptr ? 0 : pool->NumThreads()));
    return absl::OkStatus();
  }
};

// intra_op_threads counts the caller: N threads are the caller and N-1 pool threads, and
// one thread is the caller alone (a pool thread there would make "1 thread" two).
TEST(DirectSessionTest, IntraOpThreadsCountTheCaller) {
  proto::GraphDef def;
  const std::vector<std::string> n =
      ScalarProbeGraph<IntraPoolThreadsKernel>("TestIntraPool", {"n"}, &def);
  for (int intra : {1, 2, 4}) {
    SessionOptions options;
    options.intra_op_threads = intra;
    auto session = NewDirectSession(def, options);
    ASSERT_TRUE(session.ok()) << session.status();
    auto out = (*session)->Run({}, n);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].scalar<int32_t>(), intra - 1) << "intra_op_threads = " << intra;
  }
}

// The threads that ran a step's nodes, recorded by ThreadRecordingKernel.
absl::Mutex recorded_mu;
std::set<std::thread::id> recorded_threads ABSL_GUARDED_BY(recorded_mu);

class ThreadRecordingKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    {
      absl::MutexLock lock(&recorded_mu);
      recorded_threads.insert(std::this_thread::get_id());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // Others become ready.
    ctx.set_output(0, Tensor::Scalar<int32_t>(0));
    return absl::OkStatus();
  }
};

// inter_op_threads counts the caller too: with one, the caller runs every node of the
// step (no hand-offs to a pool thread, no second op beside the first); with three, at
// most the caller and two pool threads run them.
TEST(DirectSessionTest, InterOpThreadsCountTheCaller) {
  proto::GraphDef def;
  const std::vector<std::string> nodes = ScalarProbeGraph<ThreadRecordingKernel>(
      "TestRecordThread", {"a", "b", "c", "d", "e", "f", "g", "h"}, &def);
  for (int inter : {1, 3}) {
    SessionOptions options;
    options.inter_op_threads = inter;
    options.intra_op_threads = 1;
    auto session = NewDirectSession(def, options);
    ASSERT_TRUE(session.ok()) << session.status();
    {
      absl::MutexLock lock(&recorded_mu);
      recorded_threads.clear();
    }
    auto out = (*session)->Run({}, nodes);
    ASSERT_TRUE(out.ok()) << out.status();
    absl::MutexLock lock(&recorded_mu);
    if (inter == 1) {
      EXPECT_EQ(recorded_threads, std::set<std::thread::id>{std::this_thread::get_id()});
    } else {
      EXPECT_GE(recorded_threads.size(), 2u) << "eight independent nodes, one thread";
      EXPECT_LE(recorded_threads.size(), 3u);
    }
  }
}

}  // namespace
}  // namespace tandem

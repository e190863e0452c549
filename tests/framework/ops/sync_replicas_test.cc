// tests/framework/ops/sync_replicas_test.cc
//
// Synchronous replicas in one process (a DirectSession stands for every task): two
// replicas' gradients meet in the accumulator, a second one from the same replica
// and a stale one are dropped and counted, the chief's update applies their mean
// once (global_step + 1), and replicas waiting on the step barrier are released by
// it; the waiting ops return what they have at their timeout.
#include "framework/ops/sync_replicas.h"

#include <thread>
#include <vector>

#include "framework/ops/array_ops.h"
#include "framework/ops/optimizers.h"
#include "framework/ops/state_ops.h"
#include "framework/runtime/session.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::ops {
namespace {

class SyncReplicasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EnableSyncReplicas(root_, {.timeout_ms = 300});
    Variable w(root_, "w", Const(root_, {0.f, 0.f}, TensorShape({2})));
    Variable step = GetOrCreateGlobalStep(root_);
    grad_ = Placeholder(root_.WithOpName("grad"), DType::kFloat, PartialShape({2}));
    GradientDescentOptimizer sgd(1.0f);
    absl::StatusOr<Node*> train = sgd.ApplyGradients(root_, {{grad_, w}}, &step);
    ASSERT_TRUE(train.ok()) << train.status();
    train_ = (*train)->name();
    w_ = w.value().name();
    step_ = step.value().name();
    Node* init = GlobalVariablesInitializer(root_);
    ASSERT_TRUE(root_.ok()) << root_.status();
    absl::StatusOr<SyncReplicasGraph> g = GetSyncReplicasGraph(*root_.graph());
    ASSERT_TRUE(g.ok()) << g.status();
    g_ = *g;
    proto::GraphDef def;
    root_.graph()->ToGraphDef(&def);
    auto session = NewDirectSession(def);
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = std::move(*session);
    ASSERT_TRUE(session_->Run({}, {}, {init->name()}).ok());
    ASSERT_TRUE(session_->Run({}, {}, {g_.chief_init}).ok());
  }

  // One replica step: returns the replica's next local step.
  int64_t ReplicaStep(int64_t local_step, int64_t replica, float g) {
    auto out = session_->Run({{g_.local_step, Tensor::Scalar<int64_t>(local_step)},
                              {g_.replica, Tensor::Scalar<int64_t>(replica)},
                              {"grad", Tensor::FromVector<float>({g, g}, TensorShape({2}))}},
                             {g_.next_step}, {train_});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? (*out)[0].scalar<int64_t>() : -100;
  }
  int64_t Waited(int required) {
    auto out = session_->Run({{g_.num_required, Tensor::Scalar<int32_t>(required)}}, g_.waits, {});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? (*out)[0].scalar<int64_t>() : -1;
  }
  absl::Status Update(int required) {
    return session_->Run({{g_.num_required, Tensor::Scalar<int32_t>(required)}}, {}, {g_.update})
        .status();
  }
  // {accumulator step, accumulated, stale, duplicates}.
  std::vector<int64_t> Stats() {
    auto out = session_->Run({}, g_.stats, {});
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return {};
    const int64_t* s = (*out)[0].data<int64_t>();
    return {s[0], s[1], s[2], s[3]};
  }
  std::vector<float> W() {
    auto out = session_->Run({}, {w_}, {});
    return {(*out)[0].data<float>()[0], (*out)[0].data<float>()[1]};
  }
  int64_t GlobalStep() { return (*session_->Run({}, {step_}, {}))[0].scalar<int64_t>(); }

  Scope root_ = Scope::NewRootScope();
  Output grad_;
  std::string train_, w_, step_;
  SyncReplicasGraph g_;
  std::unique_ptr<Session> session_;
};

TEST_F(SyncReplicasTest, OneUpdatePerAggregatedStepWithStaleAndDuplicatesDropped) {
  // Nobody advanced the barrier: the replica's wait times out with step 0.
  EXPECT_EQ(ReplicaStep(0, /*replica=*/0, 1.f), 0);
  EXPECT_EQ(ReplicaStep(0, 0, 100.f), 0);  // Same replica, same step: ignored.
  EXPECT_THAT(Stats(), ::testing::ElementsAre(0, 1, 0, 1));
  EXPECT_EQ(Waited(2), 1);       // Timed out with one of two.
  EXPECT_FALSE(Update(2).ok());  // Too few: nothing is taken.
  EXPECT_EQ(GlobalStep(), 0);

  EXPECT_EQ(ReplicaStep(0, 1, 3.f), 0);
  EXPECT_EQ(Waited(2), 2);
  ASSERT_TRUE(Update(2).ok());
  EXPECT_THAT(W(), ::testing::ElementsAre(-2.f, -2.f));  // w -= mean(1, 3).
  EXPECT_EQ(GlobalStep(), 1);

  // A gradient computed at step 0 is stale now.
  EXPECT_EQ(ReplicaStep(0, 0, 5.f), 1);  // The barrier says step 1 at once.
  EXPECT_THAT(Stats(), ::testing::ElementsAre(1, 0, 1, 1));
}

TEST_F(SyncReplicasTest, TheUpdateReleasesTheWaitingReplicas) {
  int64_t next[2] = {-1, -1};
  std::vector<std::thread> replicas;
  for (int r = 0; r < 2; ++r) {
    replicas.emplace_back([&, r] {
      // Waits past the 300 ms timeout unless released: a timed-out wait returns 0.
      int64_t step = 0;
      for (int tries = 0; tries < 20 && step == 0; ++tries) step = ReplicaStep(0, r, 2.f * r);
      next[r] = step;
    });
  }
  EXPECT_EQ(Waited(2), 2);
  ASSERT_TRUE(Update(2).ok());
  for (std::thread& t : replicas) t.join();
  EXPECT_EQ(next[0], 1);
  EXPECT_EQ(next[1], 1);
  EXPECT_EQ(GlobalStep(), 1);
  EXPECT_THAT(W(), ::testing::ElementsAre(-1.f, -1.f));  // w -= mean(0, 2).
}

TEST(SyncReplicasBuildTest, NeedsAGlobalStep) {
  Scope root = Scope::NewRootScope();
  EnableSyncReplicas(root);
  Variable w(root, "w", Const(root, {0.f}, TensorShape({1})));
  Output g = Placeholder(root, DType::kFloat, PartialShape({1}));
  GradientDescentOptimizer sgd(0.1f);
  absl::StatusOr<Node*> train = sgd.ApplyGradients(root, {{g, w}});
  ASSERT_FALSE(train.ok());
  EXPECT_THAT(std::string(train.status().message()), ::testing::HasSubstr("global step"));
  Scope plain = Scope::NewRootScope();
  EXPECT_EQ(GetSyncReplicasGraph(*plain.graph()).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tandem::ops

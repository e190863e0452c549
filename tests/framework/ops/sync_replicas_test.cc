// tests/framework/ops/sync_replicas_test.cc
//
// Synchronous replicas in one process (a DirectSession stands for every task): two
// replicas' gradients meet in the accumulator, a second one from the same replica
// and a stale one are dropped and counted, the chief's update applies their mean
// once (global_step + 1), and replicas waiting on the step barrier are released by
// it; the waiting ops return what they have at their timeout. Sparse gradients (an
// embedding table's rows) aggregate as rows and update the table exactly as their
// densified form does.
#include "framework/ops/sync_replicas.h"

#include <thread>
#include <vector>

#include "framework/ops/array_ops.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/optimizers.h"
#include "framework/ops/state_ops.h"
#include "framework/core/status.h"
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

// A table of 10 x 3 trained by synchronous Adagrad on two replicas, each looking up
// its own ids; the table's gradient goes to the accumulator as rows (sparse) or as a
// dense [10, 3] tensor (densified). Returns the table and its accumulator slot after
// one aggregated update, and whether the replica step sent rows.
struct TableAfterSync {
  std::vector<float> table, slot;
  bool sent_rows = false;
};
absl::StatusOr<TableAfterSync> SyncTableStep(bool densify) {
  Scope root = Scope::NewRootScope();
  EnableSyncReplicas(root, {.timeout_ms = 300});
  std::vector<float> init;
  for (int i = 0; i < 30; ++i) init.push_back(0.05f * static_cast<float>(i % 7) - 0.1f);
  Variable table(root, "table", Const(root, Tensor::FromVector<float>(init, TensorShape({10, 3}))));
  Variable step = GetOrCreateGlobalStep(root);
  Output ids = Placeholder(root.WithOpName("ids"), DType::kInt32, PartialShape({-1}));
  Output rows = ResourceGather(root, table.handle(), ids, DType::kFloat);
  Output loss = ReduceSumAll(root, Mul(root, rows, rows));
  AdagradOptimizer opt(0.3f);
  TANDEM_ASSIGN_OR_RETURN(std::vector<GradAndVar> gvs, opt.ComputeGradients(root, loss));
  if (!gvs[0].sparse.has_value()) return absl::InternalError("expected a sparse gradient");
  if (densify) {
    gvs[0].grad = IndexedSlicesToDense(root, *gvs[0].sparse);
    gvs[0].sparse.reset();
  }
  TANDEM_ASSIGN_OR_RETURN(Node * train, opt.ApplyGradients(root, gvs, &step));
  Node* initializer = GlobalVariablesInitializer(root);
  TANDEM_RETURN_IF_ERROR(root.status());
  TANDEM_ASSIGN_OR_RETURN(SyncReplicasGraph g, GetSyncReplicasGraph(*root.graph()));
  TableAfterSync out;
  for (const auto& n : root.graph()->nodes()) {
    out.sent_rows |= n->op() == "SparseAccumulatorApplyGradient";
  }
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, NewDirectSession(def));
  TANDEM_RETURN_IF_ERROR(session->Run({}, {}, {initializer->name()}).status());
  TANDEM_RETURN_IF_ERROR(session->Run({}, {}, {g.chief_init}).status());
  const std::vector<std::vector<int32_t>> replica_ids = {{1, 4, 4}, {4, 7, 9}};
  for (int r = 0; r < 2; ++r) {
    TANDEM_RETURN_IF_ERROR(
        session->Run({{g.local_step, Tensor::Scalar<int64_t>(0)},
                      {g.replica, Tensor::Scalar<int64_t>(r)},
                      {"ids", Tensor::FromVector<int32_t>(replica_ids[r], TensorShape({3}))}},
                     {}, {train->name()})
            .status());
  }
  TANDEM_RETURN_IF_ERROR(
      session->Run({{g.num_required, Tensor::Scalar<int32_t>(2)}}, {}, {g.update}).status());
  auto fetch = [&](Output t) -> absl::StatusOr<std::vector<float>> {
    TANDEM_ASSIGN_OR_RETURN(std::vector<Tensor> v, session->Run({}, {t.name()}, {}));
    return std::vector<float>(v[0].data<float>(), v[0].data<float>() + v[0].NumElements());
  };
  TANDEM_ASSIGN_OR_RETURN(out.table, fetch(table.value()));
  std::optional<Variable> slot = opt.GetSlot(table, "accumulator");
  if (!slot) return absl::InternalError("no accumulator slot");
  TANDEM_ASSIGN_OR_RETURN(out.slot, fetch(slot->value()));
  return out;
}

TEST(SyncReplicasSparseTest, RowsAggregateAsTheDensifiedGradientDoes) {
  absl::StatusOr<TableAfterSync> sparse = SyncTableStep(/*densify=*/false);
  ASSERT_TRUE(sparse.ok()) << sparse.status();
  absl::StatusOr<TableAfterSync> dense = SyncTableStep(/*densify=*/true);
  ASSERT_TRUE(dense.ok()) << dense.status();
  EXPECT_TRUE(sparse->sent_rows);
  EXPECT_FALSE(dense->sent_rows);
  // Bit for bit: the same mean on every row (the others' mean is zero, which leaves
  // an Adagrad row and its accumulator as they were).
  EXPECT_EQ(sparse->table, dense->table);
  EXPECT_EQ(sparse->slot, dense->slot);
  std::vector<float> start;
  for (int i = 0; i < 30; ++i) start.push_back(0.05f * static_cast<float>(i % 7) - 0.1f);
  for (int row : {1, 4, 7, 9}) EXPECT_NE(sparse->table[row * 3], start[row * 3]) << row;
  for (int row : {0, 2, 3, 5, 6, 8}) EXPECT_EQ(sparse->table[row * 3], start[row * 3]) << row;
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

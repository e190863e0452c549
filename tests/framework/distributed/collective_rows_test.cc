// tests/framework/distributed/collective_rows_test.cc
//
// Sparse gradients under the collective strategy: CollectiveAllGatherRows through
// in-process sessions on a real group (every replica's rows, summed per row in rank
// order and averaged, the same bits everywhere, a replica with no rows), and a table
// trained by Adagrad on three replicas with its gradient all-gathered as rows against the
// same training with the gradient densified and all-reduced.
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "framework/core/status.h"
#include "framework/distributed/server.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/collective_ops.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/optimizers.h"
#include "framework/ops/state_ops.h"
#include "framework/runtime/session.h"
#include "gtest/gtest.h"
#include "tests/framework/distributed/collective_group.h"

namespace tandem {
namespace {

using testing::Group;
using testing::JoinAll;
using testing::StartGroup;

// Runs `body(r)` for every rank r at once, one thread each.
template <typename Body>
void OnEveryRank(int n, Body body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { body(r); });
  for (auto& t : threads) t.join();
}

std::vector<float> Floats(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.NumElements());
}

TEST(CollectiveRowsTest, GatheredRowsAreSummedPerRowAveragedAndTheSameEverywhere) {
  Group g = StartGroup(3);
  for (auto& f : JoinAll(g, {0, 0, 0})) ASSERT_TRUE(f.ok()) << f.status();
  // Rank 0: rows 5, 1, 5; rank 1: rows 1, 9; rank 2: none.
  const std::vector<std::vector<int64_t>> ids = {{5, 1, 5}, {1, 9}, {}};
  std::vector<absl::StatusOr<std::vector<Tensor>>> out(3, absl::UnknownError("unset"));
  OnEveryRank(3, [&](int r) {
    Scope root = Scope::NewRootScope();
    const int64_t n = static_cast<int64_t>(ids[r].size());
    std::vector<float> values;
    for (int64_t i = 0; i < n; ++i) {
      values.push_back(static_cast<float>(10 * r + i));
      values.push_back(0.5f);
    }
    Output idx =
        ops::Const(root.WithOpName("ids"), Tensor::FromVector<int64_t>(ids[r], TensorShape({n})));
    Output val = ops::Const(root.WithOpName("values"),
                            Tensor::FromVector<float>(values, TensorShape({n, 2})));
    ops::GradientRows got =
        ops::CollectiveAllGatherRows(root.WithOpName("gather"), {idx, val}, 7, /*average=*/true);
    CHECK(root.status().ok()) << root.status();
    proto::GraphDef def;
    root.graph()->ToGraphDef(&def);
    SessionOptions so;
    so.collective = g.ex[r];
    auto session = NewDirectSession(def, so);
    CHECK(session.ok()) << session.status();
    out[r] = (*session)->Run({}, {got.indices.name(), got.values.name()});
  });
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(out[r].ok()) << "rank " << r << ": " << out[r].status();
    const Tensor& idx = (*out[r])[0];
    ASSERT_EQ(idx.shape(), TensorShape({3}));
    EXPECT_EQ(std::vector<int64_t>(idx.data<int64_t>(), idx.data<int64_t>() + 3),
              (std::vector<int64_t>{1, 5, 9}));
    const Tensor& val = (*out[r])[1];
    ASSERT_EQ(val.shape(), TensorShape({3, 2}));
    // Row 1: rank 0's 1 + rank 1's 10; row 5: rank 0's 0 + 2; row 9: rank 1's 11.
    const float third = 1.0f / 3.0f;
    EXPECT_EQ(Floats(val), (std::vector<float>{11 * third, 1.0f * third, 2 * third, 1.0f * third,
                                               11 * third, 0.5f * third}));
    EXPECT_EQ(Floats(val), Floats((*out[0])[1])) << "rank " << r << " differs from rank 0";
  }
}

// A 10 x 3 table trained by Adagrad on 3 replicas for 3 steps; each replica looks up its
// own ids each step. With `densify`, the table's gradient is made dense before
// ApplyGradients (so it is all-reduced and applied densely).
struct Trained {
  std::vector<float> table, accumulator;
  bool gathered_rows = false;  // The graph all-gathers rows.
  bool all_reduced = false;    // The graph all-reduces a dense gradient.
};

constexpr int kReplicas = 3;

std::vector<float> InitialTable() {
  std::vector<float> v;
  for (int i = 0; i < 30; ++i) v.push_back(0.05f * static_cast<float>(i % 7) - 0.1f);
  return v;
}

absl::StatusOr<Trained> TrainOnReplica(CollectiveExecutor* ex, int rank, bool densify) {
  Scope root = Scope::NewRootScope();
  ops::EnableCollectiveAllReduce(root);
  ops::Variable table(
      root, "table",
      ops::Const(root, Tensor::FromVector<float>(InitialTable(), TensorShape({10, 3}))));
  Output ids = ops::Placeholder(root.WithOpName("ids"), DType::kInt32, PartialShape({-1}));
  Output rows = ops::ResourceGather(root, table.handle(), ids, DType::kFloat);
  // d/dx (x^3 + x) = 3x^2 + 1: never zero, so every touched element moves.
  Output loss =
      ops::ReduceSumAll(root, ops::Add(root, ops::Mul(root, rows, ops::Square(root, rows)), rows));
  ops::AdagradOptimizer opt(0.3f);
  TANDEM_ASSIGN_OR_RETURN(std::vector<ops::GradAndVar> gvs, opt.ComputeGradients(root, loss));
  if (!gvs[0].sparse.has_value()) return absl::InternalError("expected a sparse gradient");
  if (densify) {
    gvs[0].grad = ops::IndexedSlicesToDense(root, *gvs[0].sparse);
    gvs[0].sparse.reset();
  }
  TANDEM_ASSIGN_OR_RETURN(Node * train, opt.ApplyGradients(root, gvs));
  Node* init = ops::GlobalVariablesInitializer(root);
  TANDEM_RETURN_IF_ERROR(root.status());
  Trained out;
  for (const auto& n : root.graph()->nodes()) {
    out.gathered_rows |= n->op() == "CollectiveAllGatherRows";
    out.all_reduced |= n->op() == "CollectiveAllReduce";
  }
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  SessionOptions so;
  so.collective = ex;
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, NewDirectSession(def, so));
  TANDEM_RETURN_IF_ERROR(session->Run({}, {}, {init->name()}).status());
  // Step s, rank r: rows that overlap across ranks (1 on every rank) and repeat within one.
  const std::vector<std::vector<std::vector<int32_t>>> steps = {
      {{1, 4, 4}, {1, 7}, {1, 2, 9}}, {{0, 1}, {1, 1, 8}, {1}}, {{4}, {1, 4}, {1, 6, 9}}};
  for (const auto& step : steps) {
    const std::vector<int32_t>& mine = step[rank];
    TANDEM_RETURN_IF_ERROR(
        session
            ->Run({{"ids", Tensor::FromVector<int32_t>(
                               mine, TensorShape({static_cast<int64_t>(mine.size())}))}},
                  {}, {train->name()})
            .status());
  }
  TANDEM_ASSIGN_OR_RETURN(std::vector<Tensor> t, session->Run({}, {table.value().name()}, {}));
  out.table = Floats(t[0]);
  std::optional<ops::Variable> slot = opt.GetSlot(table, "accumulator");
  if (!slot) return absl::InternalError("no accumulator slot");
  TANDEM_ASSIGN_OR_RETURN(t, session->Run({}, {slot->value().name()}, {}));
  out.accumulator = Floats(t[0]);
  return out;
}

std::vector<absl::StatusOr<Trained>> TrainEverywhere(bool densify) {
  Group g = StartGroup(kReplicas);
  for (auto& f : JoinAll(g, std::vector<int64_t>(kReplicas, 0))) CHECK(f.ok()) << f.status();
  std::vector<absl::StatusOr<Trained>> out(kReplicas, absl::UnknownError("unset"));
  OnEveryRank(kReplicas, [&](int r) { out[r] = TrainOnReplica(g.ex[r], r, densify); });
  return out;
}

TEST(CollectiveRowsTest, RowsTrainAsTheDensifiedAllReduceDoes) {
  std::vector<absl::StatusOr<Trained>> sparse = TrainEverywhere(/*densify=*/false);
  std::vector<absl::StatusOr<Trained>> dense = TrainEverywhere(/*densify=*/true);
  for (int r = 0; r < kReplicas; ++r) {
    ASSERT_TRUE(sparse[r].ok()) << "rank " << r << ": " << sparse[r].status();
    ASSERT_TRUE(dense[r].ok()) << "rank " << r << ": " << dense[r].status();
  }
  EXPECT_TRUE(sparse[0]->gathered_rows);
  EXPECT_FALSE(sparse[0]->all_reduced);  // The table never crosses as a dense tensor.
  EXPECT_TRUE(dense[0]->all_reduced);
  EXPECT_FALSE(dense[0]->gathered_rows);
  // Every replica holds the same bits.
  for (int r = 1; r < kReplicas; ++r) {
    EXPECT_EQ(sparse[r]->table, sparse[0]->table) << "rank " << r;
    EXPECT_EQ(sparse[r]->accumulator, sparse[0]->accumulator) << "rank " << r;
  }
  // Touched rows equal within rounding (sums in another order); untouched rows (3, 5)
  // keep their value and accumulator bit for bit.
  const std::vector<float> start = InitialTable();
  for (int i = 0; i < 30; ++i) {
    const int row = i / 3;
    if (row == 3 || row == 5) {
      EXPECT_EQ(sparse[0]->table[i], start[i]) << "untouched row " << row;
      EXPECT_EQ(sparse[0]->accumulator[i], 0.1f) << "untouched row " << row;
      continue;
    }
    EXPECT_NE(sparse[0]->table[i], start[i]) << "row " << row << " was trained";
    EXPECT_NEAR(sparse[0]->table[i], dense[0]->table[i],
                1e-6f * (1 + std::fabs(dense[0]->table[i])))
        << "element " << i;
    EXPECT_NEAR(sparse[0]->accumulator[i], dense[0]->accumulator[i],
                1e-6f * dense[0]->accumulator[i])
        << "element " << i;
  }
}

// Under CollectiveTables::kOwnRows (the asynchronous hybrid strategy) a table's rows are
// applied as this replica computed them, without a collective, while a dense variable's
// gradient is still all-reduced; by default both are reduced.
TEST(CollectiveRowsTest, SkipTablesLeavesTablesOutOfTheCollectives) {
  for (bool skip : {true, false}) {
    Scope root = Scope::NewRootScope();
    ops::CollectiveAllReduceOptions co;
    co.tables = skip ? ops::CollectiveTables::kOwnRows : ops::CollectiveTables::kMirrored;
    ops::EnableCollectiveAllReduce(root, co);
    ops::VariableOptions as_table;
    as_table.table = true;
    ops::Variable table(
        root, "table",
        ops::Const(root, Tensor::FromVector<float>(InitialTable(), TensorShape({10, 3}))),
        as_table);
    ops::Variable dense(root, "dense", ops::Const(root, Tensor::Scalar<float>(2)));
    Output ids = ops::Placeholder(root.WithOpName("ids"), DType::kInt32, PartialShape({-1}));
    Output rows = ops::ResourceGather(root, table.handle(), ids, DType::kFloat);
    Output loss = ops::Mul(root, ops::ReduceSumAll(root, rows), dense.value());
    ops::AdagradOptimizer opt(0.3f);
    ASSERT_TRUE(opt.Minimize(root, loss).ok()) << root.status();
    int gathers = 0, reduces = 0;
    for (const auto& n : root.graph()->nodes()) {
      gathers += n->op() == "CollectiveAllGatherRows";
      reduces += n->op() == "CollectiveAllReduce";
    }
    EXPECT_EQ(gathers, skip ? 0 : 1) << "skip_tables = " << skip;
    EXPECT_EQ(reduces, 1) << "skip_tables = " << skip;
    // The table's sparse update still waits for the step's collective.
    const Node* update = nullptr;
    for (const auto& n : root.graph()->nodes()) {
      if (n->op() == "ResourceSparseApplyAdagrad") update = n.get();
    }
    ASSERT_NE(update, nullptr);
    std::vector<const Node*> pending = {update};
    std::set<const Node*> seen;
    bool after_reduce = false;
    while (!pending.empty()) {
      const Node* n = pending.back();
      pending.pop_back();
      if (!seen.insert(n).second) continue;
      after_reduce |= n->op() == "CollectiveAllReduce";
      for (const Output& in : n->inputs()) pending.push_back(in.node);
      for (const Node* c : n->control_inputs()) pending.push_back(c);
    }
    EXPECT_TRUE(after_reduce) << "skip_tables = " << skip;
  }
}

}  // namespace
}  // namespace tandem

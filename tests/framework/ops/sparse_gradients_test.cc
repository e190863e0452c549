// Tests of sparse (IndexedSlices) gradients of variables read through ResourceGather:
// ComputeGradients' choice between sparse and dense, every optimizer's sparse update
// against the same optimizer applied to the densified gradient (bit for bit on the
// touched rows, untouched rows and slots kept), duplicate ids, bad ids,
// clipping, a large table of which only the touched rows change, and the ops behind
// them (ResourceScatterAdd/Sub, ResourceSparseApply*, Unique).
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "framework/ops/array_ops.h"
#include "framework/ops/clip_ops.h"
#include "framework/ops/initializers.h"
#include "framework/ops/layers.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/optimizers.h"
#include "framework/ops/state_ops.h"
#include "framework/ops/training_ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/ops/training_test_util.h"

namespace tandem {
namespace {

using ::tandem::testing::FetchFloats;
using ::tandem::testing::FloatTensor;
using ::tandem::testing::StartSession;
using ::tandem::testing::ToFloats;
using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;

constexpr int64_t kRows = 10;
constexpr int64_t kDim = 3;

// Initial table value: distinct per element.
std::vector<float> InitialTable(int64_t rows, int64_t dim) {
  std::vector<float> v(rows * dim);
  for (int64_t i = 0; i < rows * dim; ++i) v[i] = 0.1f * static_cast<float>(i % 17) - 0.7f;
  return v;
}

bool HasOp(Graph* g, absl::string_view op) {
  for (const auto& n : g->nodes()) {
    if (n != nullptr && n->op() == op) return true;
  }
  return false;
}

// A [kRows, kDim] table read only by a gather of `ids`; the loss is
// sum((gather(ids) - 0.25)^2 * weight), with weights that differ per gathered element.
struct EmbeddingModel {
  ops::Variable table;
  Output lookup;
  Output loss;
};

EmbeddingModel BuildEmbeddingModel(const Scope& root, const std::vector<int32_t>& ids) {
  EmbeddingModel m;
  m.table =
      ops::Variable(root, "emb",
                    ops::Const(root.WithOpName("emb_init"),
                               FloatTensor(InitialTable(kRows, kDim), TensorShape({kRows, kDim}))));
  Output id_t = ops::ConstInt32(root.WithOpName("ids"), ids);
  m.lookup = ops::ResourceGather(root.WithOpName("lookup"), m.table.handle(), id_t, DType::kFloat);
  std::vector<float> w;
  for (size_t i = 0; i < ids.size() * kDim; ++i) w.push_back(0.5f + 0.25f * (i % 5));
  Output weights =
      ops::Const(root.WithOpName("weights"),
                 FloatTensor(w, TensorShape({static_cast<int64_t>(ids.size()), kDim})));
  Output diff = ops::Sub(root, m.lookup, ops::Const(root, 0.25f));
  m.loss =
      ops::ReduceSumAll(root.WithOpName("loss"), ops::Mul(root, ops::Square(root, diff), weights));
  return m;
}

TEST(SparseGradientsTest, EmbeddingOnlyVariableGetsIndexedSlices) {
  Scope root = Scope::NewRootScope();
  Output ids = ops::ConstInt32(root.WithOpName("ids"), std::vector<int32_t>{4, 1, 4});
  Output looked_up =
      ops::Embedding(root, ids, kRows, kDim, "embedding", ops::ConstantInitializer(0.5f));
  Output loss = ops::ReduceSumAll(root.WithOpName("loss"), looked_up);
  ops::GradientDescentOptimizer opt(0.1f);
  auto gvs = opt.ComputeGradients(root, loss);
  ASSERT_TRUE(gvs.ok()) << gvs.status();
  ASSERT_EQ(gvs->size(), 1u);
  const ops::GradAndVar& gv = (*gvs)[0];
  EXPECT_EQ(gv.var.name(), "embedding/embeddings");
  EXPECT_FALSE(gv.grad.valid());
  ASSERT_TRUE(gv.sparse.has_value());
  EXPECT_TRUE(gv.has_gradient());
  auto session = StartSession(root);
  ASSERT_TRUE(session.ok()) << session.status();
  auto out = (*session)->Run(
      {}, {gv.sparse->values.name(), gv.sparse->indices.name(), gv.sparse->dense_shape.name()});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), TensorShape({3, kDim}));
  EXPECT_THAT(ToFloats((*out)[0]), ::testing::Each(1.0f));
  EXPECT_EQ((*out)[1].dtype(), DType::kInt32);
  EXPECT_THAT(ToFloats((*out)[1]), ElementsAre(4, 1, 4));
  EXPECT_THAT(ToFloats((*out)[2]), ElementsAre(kRows, kDim));
}

TEST(SparseGradientsTest, MatrixIdsAndSeveralGathersAreFlattenedAndConcatenated) {
  Scope root = Scope::NewRootScope();
  ops::Variable table(
      root, "emb",
      ops::Const(root.WithOpName("emb_init"),
                 FloatTensor(InitialTable(kRows, kDim), TensorShape({kRows, kDim}))));
  Output a = ops::ResourceGather(
      root, table.handle(),
      ops::Reshape(root, ops::ConstInt32(root, std::vector<int32_t>{0, 1, 2, 3}),
                   std::vector<int64_t>{2, 2}),
      DType::kFloat);
  Output b = ops::ResourceGather(root, table.handle(),
                                 ops::ConstInt64(root, std::vector<int64_t>{9}), DType::kFloat);
  Output loss = ops::Add(root, ops::ReduceSumAll(root, a),
                         ops::Mul(root, ops::ReduceSumAll(root, b), ops::Const(root, 2.0f)));
  ops::AdagradOptimizer opt(0.1f);
  auto gvs = opt.ComputeGradients(root, loss);
  ASSERT_TRUE(gvs.ok()) << gvs.status();
  ASSERT_TRUE((*gvs)[0].sparse.has_value());
  const ops::IndexedSlices& s = *(*gvs)[0].sparse;
  EXPECT_EQ(s.indices.dtype(), DType::kInt64);  // int32 and int64 ids mixed.
  auto session = StartSession(root);
  ASSERT_TRUE(session.ok()) << session.status();
  auto out = (*session)->Run({}, {s.values.name(), s.indices.name()});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), TensorShape({5, kDim}));
  EXPECT_THAT(ToFloats((*out)[1]), ::testing::UnorderedElementsAre(0, 1, 2, 3, 9));
  // Densified, it is the dense gradient: ones in rows 0..3, twos in row 9.
  Output dense = ops::IndexedSlicesToDense(root, s);
  auto session2 = StartSession(root);
  ASSERT_TRUE(session2.ok()) << session2.status();
  auto d = FetchFloats(**session2, dense);
  ASSERT_TRUE(d.ok()) << d.status();
  for (int64_t r = 0; r < kRows; ++r) {
    float want = r < 4 ? 1.0f : (r == 9 ? 2.0f : 0.0f);
    for (int64_t k = 0; k < kDim; ++k) EXPECT_EQ((*d)[r * kDim + k], want) << r;
  }
}

TEST(SparseGradientsTest, VariableAlsoReadDenselyGetsADenseGradient) {
  Scope root = Scope::NewRootScope();
  EmbeddingModel m = BuildEmbeddingModel(root, {1, 2});
  Output loss = ops::Add(root, m.loss, ops::ReduceSumAll(root, m.table.value()));
  ops::MomentumOptimizer opt(0.1f, 0.9f);
  auto gvs = opt.ComputeGradients(root, loss);
  ASSERT_TRUE(gvs.ok()) << gvs.status();
  EXPECT_FALSE((*gvs)[0].sparse.has_value());
  ASSERT_TRUE((*gvs)[0].grad.valid());
  EXPECT_EQ((*gvs)[0].grad.shape(), PartialShape({kRows, kDim}));
}

TEST(SparseGradientsTest, UnconnectedTableHasNoGradient) {
  Scope root = Scope::NewRootScope();
  EmbeddingModel m = BuildEmbeddingModel(root, {1});
  ops::Variable w(root, "w", ops::Const(root, 2.0f));
  Output loss = ops::Square(root, w.value());
  ops::GradientDescentOptimizer opt(0.1f);
  auto gvs = opt.ComputeGradients(root, loss, {m.table, w});
  ASSERT_TRUE(gvs.ok()) << gvs.status();
  EXPECT_FALSE((*gvs)[0].has_gradient());
  EXPECT_TRUE((*gvs)[1].has_gradient());
}

struct OptimizerCase {
  const char* name;
  std::function<std::unique_ptr<ops::Optimizer>()> make;
  const char* sparse_op;  // An op the sparse update must use.
  // Every optimizer but TF 1.x's Adam (whose sparse rule decays m and v of every row):
  // a touched row and its slots get the dense update's bits, the other rows and slots
  // keep theirs.
  bool lazy;
};

class SparseVsDenseTest : public ::testing::TestWithParam<OptimizerCase> {};

// Builds the embedding model, takes its sparse gradient, optionally densifies it, and
// applies `steps` steps; returns the table (and every slot) after them.
struct StepResult {
  std::vector<float> table;
  std::vector<std::vector<float>> slots;
  bool used_sparse_op = false;
};

absl::StatusOr<StepResult> RunSteps(const OptimizerCase& c, bool densify, int steps,
                                    const std::vector<int32_t>& ids) {
  Scope root = Scope::NewRootScope();
  EmbeddingModel m = BuildEmbeddingModel(root, ids);
  std::unique_ptr<ops::Optimizer> opt = c.make();
  TANDEM_ASSIGN_OR_RETURN(std::vector<ops::GradAndVar> gvs, opt->ComputeGradients(root, m.loss));
  if (!gvs[0].sparse.has_value()) return absl::InternalError("expected a sparse gradient");
  if (densify) {
    gvs[0].grad = ops::IndexedSlicesToDense(root, *gvs[0].sparse);
    gvs[0].sparse.reset();
  }
  TANDEM_ASSIGN_OR_RETURN(Node * train, opt->ApplyGradients(root, gvs));
  StepResult r;
  r.used_sparse_op = HasOp(root.graph(), c.sparse_op);
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, StartSession(root));
  for (int s = 0; s < steps; ++s) {
    TANDEM_RETURN_IF_ERROR(session->Run({}, {}, {train->name()}).status());
  }
  TANDEM_ASSIGN_OR_RETURN(r.table, FetchFloats(*session, m.table.value()));
  for (const std::string& slot : opt->GetSlotNames()) {
    std::optional<ops::Variable> v = opt->GetSlot(m.table, slot);
    if (!v.has_value()) return absl::InternalError("missing slot " + slot);
    TANDEM_ASSIGN_OR_RETURN(std::vector<float> values, FetchFloats(*session, v->value()));
    r.slots.push_back(std::move(values));
  }
  return r;
}

// `steps` steps on `ids`, sparse against densified: a touched row equal (bit for bit
// when lazy), an untouched row and its slots as they started (lazy) or as densified.
void ExpectSparseMatchesDense(const OptimizerCase& c, const std::vector<int32_t>& ids, int steps) {
  auto sparse = RunSteps(c, /*densify=*/false, steps, ids);
  ASSERT_TRUE(sparse.ok()) << sparse.status();
  auto dense = RunSteps(c, /*densify=*/true, steps, ids);
  ASSERT_TRUE(dense.ok()) << dense.status();
  auto start = RunSteps(c, /*densify=*/false, 0, ids);
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_TRUE(sparse->used_sparse_op) << c.sparse_op;
  auto touched = [&](size_t i) {
    const int32_t row = static_cast<int32_t>(i / kDim);
    return std::find(ids.begin(), ids.end(), row) != ids.end();
  };
  auto check = [&](const std::vector<float>& got, const std::vector<float>& want_dense,
                   const std::vector<float>& initial, const std::string& what) {
    ASSERT_EQ(got.size(), want_dense.size());
    bool any_changed = false;
    for (size_t i = 0; i < got.size(); ++i) {
      if (c.lazy && touched(i)) {
        EXPECT_EQ(got[i], want_dense[i]) << c.name << " " << what << " element " << i;
      } else if (c.lazy) {
        EXPECT_EQ(got[i], initial[i]) << c.name << " untouched " << what << " element " << i;
      } else {
        EXPECT_NEAR(got[i], want_dense[i], 1e-5) << c.name << " " << what << " element " << i;
      }
      any_changed |= touched(i) && got[i] != initial[i];
    }
    EXPECT_TRUE(any_changed) << c.name << " " << what;
  };
  check(sparse->table, dense->table, start->table, "table");
  ASSERT_EQ(sparse->slots.size(), dense->slots.size());
  for (size_t s = 0; s < sparse->slots.size(); ++s) {
    check(sparse->slots[s], dense->slots[s], start->slots[s], "slot " + std::to_string(s));
  }
}

TEST_P(SparseVsDenseTest, OneStepMatchesTheDensifiedGradient) {
  // Row 3 twice: duplicates must sum as in the dense gradient.
  ExpectSparseMatchesDense(GetParam(), {3, 1, 3, 7}, 1);
}

TEST_P(SparseVsDenseTest, ThreeStepsMatchTheDensifiedGradient) {
  ExpectSparseMatchesDense(GetParam(), {0, 9, 0, 5, 5, 5}, 3);
}

INSTANTIATE_TEST_SUITE_P(
    AllOptimizers, SparseVsDenseTest,
    ::testing::Values(
        OptimizerCase{"GradientDescent",
                      [] { return std::make_unique<ops::GradientDescentOptimizer>(0.1f); },
                      "ResourceSparseApplyGradientDescent", true},
        OptimizerCase{"Momentum",
                      [] { return std::make_unique<ops::MomentumOptimizer>(0.1f, 0.9f); },
                      "ResourceSparseApplyMomentum", true},
        OptimizerCase{"Nesterov",
                      [] { return std::make_unique<ops::MomentumOptimizer>(0.1f, 0.9f, true); },
                      "ResourceSparseApplyMomentum", true},
        OptimizerCase{"Adagrad", [] { return std::make_unique<ops::AdagradOptimizer>(0.1f); },
                      "ResourceSparseApplyAdagrad", true},
        OptimizerCase{"Adam", [] { return std::make_unique<ops::AdamOptimizer>(0.01f); },
                      "ResourceScatterAdd", false},
        OptimizerCase{"LazyAdam", [] { return std::make_unique<ops::LazyAdamOptimizer>(0.01f); },
                      "ResourceSparseApplyAdam", true},
        OptimizerCase{"RMSProp", [] { return std::make_unique<ops::RMSPropOptimizer>(0.01f); },
                      "ResourceSparseApplyRMSProp", true},
        OptimizerCase{
            "CenteredRMSProp",
            [] { return std::make_unique<ops::RMSPropOptimizer>(0.01f, 0.9f, 0.5f, 1e-10f, true); },
            "ResourceSparseApplyCenteredRMSProp", true},
        OptimizerCase{"Ftrl", [] { return std::make_unique<ops::FtrlOptimizer>(0.1f); },
                      "ResourceSparseApplyFtrl", true},
        OptimizerCase{"FtrlL1L2",
                      [] {
                        return std::make_unique<ops::FtrlOptimizer>(0.1f, -0.5f, 0.1f, 0.01f,
                                                                    0.05f);
                      },
                      "ResourceSparseApplyFtrl", true}),
    [](const ::testing::TestParamInfo<OptimizerCase>& info) { return info.param.name; });

TEST(SparseGradientsTest, DuplicateIdsAccumulate) {
  Scope root = Scope::NewRootScope();
  Output ids = ops::ConstInt32(root, std::vector<int32_t>{2, 2, 2, 5});
  Output looked_up =
      ops::Embedding(root, ids, kRows, kDim, "embedding", ops::ConstantInitializer(1.0f));
  Output loss = ops::ReduceSumAll(root, looked_up);
  ops::GradientDescentOptimizer opt(0.5f);
  auto train = opt.Minimize(root, loss);
  ASSERT_TRUE(train.ok()) << train.status();
  auto table = ops::Variable::FromGraph(root.graph(), "embedding/embeddings");
  ASSERT_TRUE(table.ok()) << table.status();
  auto session = StartSession(root);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Run({}, {}, {(*train)->name()}).ok());
  auto v = FetchFloats(**session, table->value());
  ASSERT_TRUE(v.ok()) << v.status();
  for (int64_t r = 0; r < kRows; ++r) {
    const float want = r == 2 ? 1.0f - 3 * 0.5f : (r == 5 ? 0.5f : 1.0f);
    for (int64_t k = 0; k < kDim; ++k) EXPECT_EQ((*v)[r * kDim + k], want) << "row " << r;
  }
}

TEST(SparseGradientsTest, OutOfRangeIdIsACleanErrorAndChangesNothing) {
  Scope root = Scope::NewRootScope();
  Output ids = ops::Placeholder(root.WithOpName("ids"), DType::kInt32, PartialShape({-1}));
  Output looked_up =
      ops::Embedding(root, ids, kRows, kDim, "embedding", ops::ConstantInitializer(1.0f));
  ops::AdagradOptimizer opt(0.5f);
  auto train = opt.Minimize(root, ops::ReduceSumAll(root, looked_up));
  ASSERT_TRUE(train.ok()) << train.status();
  auto table = ops::Variable::FromGraph(root.graph(), "embedding/embeddings");
  ASSERT_TRUE(table.ok());
  auto session = StartSession(root);
  ASSERT_TRUE(session.ok()) << session.status();
  auto run = (*session)->Run({{"ids", Tensor::FromVector<int32_t>({1, kRows}, TensorShape({2}))}},
                             {}, {(*train)->name()});
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(run.status().message(), HasSubstr(absl::StrCat("= ", kRows)));
  auto v = FetchFloats(**session, table->value());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_THAT(*v, ::testing::Each(1.0f));
}

// The kernels themselves check indices (a gradient built by hand may carry any).
TEST(SparseGradientsTest, SparseKernelsRejectOutOfRangeIndices) {
  Scope root = Scope::NewRootScope();
  ops::Variable var(root, "var", ops::Const(root, FloatTensor({1, 2, 3, 4}, TensorShape({2, 2}))));
  ops::Variable acc(root, "acc", ops::Const(root, FloatTensor({1, 1, 1, 1}, TensorShape({2, 2}))));
  Output grad = ops::Const(root, FloatTensor({1, 1, 1, 1}, TensorShape({2, 2})));
  Output bad = ops::ConstInt64(root, std::vector<int64_t>{1, -1});
  Output lr = ops::Const(root, 0.1f);
  Node* scatter = ops::ResourceScatterAdd(root.WithOpName("scatter"), var.handle(), bad, grad);
  Node* adagrad = ops::ResourceSparseApplyAdagrad(root.WithOpName("adagrad"), var.handle(),
                                                  acc.handle(), lr, grad, bad);
  Node* momentum = ops::ResourceSparseApplyMomentum(root.WithOpName("momentum"), var.handle(),
                                                    acc.handle(), lr, grad, bad, lr);
  ASSERT_TRUE(root.ok()) << root.status();
  auto session = StartSession(root);
  ASSERT_TRUE(session.ok()) << session.status();
  for (Node* n : {scatter, adagrad, momentum}) {
    auto run = (*session)->Run({}, {}, {n->name()});
    ASSERT_FALSE(run.ok()) << n->name();
    EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(run.status().message(), HasSubstr(n->op()));
    EXPECT_THAT(run.status().message(), HasSubstr("indices[1] = -1"));
  }
  auto v = FetchFloats(**session, var.value());
  ASSERT_TRUE(v.ok());
  EXPECT_THAT(*v, ElementsAre(1, 2, 3, 4));  // The valid index 1 was not applied either.
}

TEST(SparseGradientsTest, ScatterAddAndSubAccumulateDuplicates) {
  Scope root = Scope::NewRootScope();
  ops::Variable var(root, "var",
                    ops::Const(root, FloatTensor({0, 0, 0, 0, 0, 0}, TensorShape({3, 2}))));
  Output idx = ops::ConstInt32(root, std::vector<int32_t>{2, 0, 2});
  Output upd = ops::Const(root, FloatTensor({1, 2, 3, 4, 5, 6}, TensorShape({3, 2})));
  Node* add = ops::ResourceScatterAdd(root, var.handle(), idx, upd);
  Node* sub = ops::ResourceScatterSub(root.WithControlDependencies(std::vector<Node*>{add}),
                                      var.handle(), ops::ConstInt32(root, std::vector<int32_t>{1}),
                                      ops::Const(root, FloatTensor({1, 1}, TensorShape({1, 2}))));
  auto session = StartSession(root);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Run({}, {}, {sub->name()}).ok());
  auto v = FetchFloats(**session, var.value());
  ASSERT_TRUE(v.ok());
  EXPECT_THAT(*v, ElementsAre(3, 4, -1, -1, 6, 8));
}

TEST(SparseGradientsTest, ScatterShapeMismatchIsAGraphError) {
  Scope root = Scope::NewRootScope();
  ops::Variable var(root, "var", ops::Const(root, FloatTensor({0, 0, 0, 0}, TensorShape({2, 2}))));
  ops::ResourceScatterAdd(root, var.handle(), ops::ConstInt32(root, std::vector<int32_t>{0}),
                          ops::Const(root, FloatTensor({1, 2, 3}, TensorShape({1, 3}))));
  EXPECT_THAT(root.status().message(), HasSubstr("indices.shape + var.shape[1:]"));
}

TEST(SparseGradientsTest, UniqueKeepsFirstOccurrenceOrder) {
  Scope root = Scope::NewRootScope();
  std::vector<Output> u =
      ops::Unique(root, ops::ConstInt64(root, std::vector<int64_t>{7, 3, 7, 7, 1, 3}));
  ASSERT_EQ(u.size(), 2u);
  auto session = StartSession(root, false);
  ASSERT_TRUE(session.ok()) << session.status();
  auto out = (*session)->Run({}, {u[0].name(), u[1].name()});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DType::kInt64);
  EXPECT_EQ((*out)[1].dtype(), DType::kInt32);
  EXPECT_THAT(ToFloats((*out)[0]), ElementsAre(7, 3, 1));
  EXPECT_THAT(ToFloats((*out)[1]), ElementsAre(0, 1, 0, 0, 2, 1));
}

// A 1e5-row table: one step touches only the rows looked up (slots too), so the cost of
// the update does not grow with the table (GradientDescent, Momentum, Adagrad).
TEST(SparseGradientsTest, LargeTableOnlyTouchedRowsChange) {
  constexpr int64_t kBig = 100000;
  for (int which = 0; which < 6; ++which) {
    Scope root = Scope::NewRootScope();
    Output ids = ops::ConstInt64(root, std::vector<int64_t>{5, kBig - 1, 5});
    Output looked_up =
        ops::Embedding(root, ids, kBig, 4, "embedding", ops::ConstantInitializer(0.5f));
    Output loss = ops::ReduceSumAll(root, ops::Square(root, looked_up));
    std::unique_ptr<ops::Optimizer> opt;
    if (which == 0) opt = std::make_unique<ops::GradientDescentOptimizer>(0.1f);
    if (which == 1) opt = std::make_unique<ops::MomentumOptimizer>(0.1f, 0.9f);
    if (which == 2) opt = std::make_unique<ops::AdagradOptimizer>(0.1f);
    if (which == 3) opt = std::make_unique<ops::FtrlOptimizer>(0.1f);
    if (which == 4) opt = std::make_unique<ops::RMSPropOptimizer>(0.01f, 0.9f, 0.5f);
    if (which == 5) opt = std::make_unique<ops::LazyAdamOptimizer>(0.01f);
    auto train = opt->Minimize(root, loss);
    ASSERT_TRUE(train.ok()) << train.status();
    // No op of the update has the table's shape except the variable and its slots.
    for (const auto& n : root.graph()->nodes()) {
      if (n == nullptr || n->op() == "VarHandleOp" || n->op() == "ReadVariableOp" ||
          n->op() == "AssignVariableOp" || n->op() == "Fill" ||
          n->name().find("Initializer") != std::string::npos) {
        continue;
      }
      for (int k = 0; k < n->num_outputs(); ++k) {
        EXPECT_NE(n->output_shape(k), PartialShape({kBig, 4})) << n->name() << " " << n->op();
      }
    }
    auto table = ops::Variable::FromGraph(root.graph(), "embedding/embeddings");
    ASSERT_TRUE(table.ok());
    auto session = StartSession(root);
    ASSERT_TRUE(session.ok()) << session.status();
    for (int step = 0; step < 2; ++step) {
      ASSERT_TRUE((*session)->Run({}, {}, {(*train)->name()}).ok());
    }
    auto v = FetchFloats(**session, table->value());
    ASSERT_TRUE(v.ok()) << v.status();
    int64_t changed = 0;
    for (int64_t i = 0; i < kBig * 4; ++i) {
      const int64_t row = i / 4;
      if (row == 5 || row == kBig - 1) {
        EXPECT_LT((*v)[i], 0.5f) << which;
      } else if ((*v)[i] != 0.5f) {
        ++changed;
      }
    }
    EXPECT_EQ(changed, 0) << "optimizer " << opt->name() << " changed untouched rows";
    for (const std::string& slot : opt->GetSlotNames()) {
      auto s = FetchFloats(**session, opt->GetSlot(*table, slot)->value());
      ASSERT_TRUE(s.ok());
      const float init =
          slot == "accumulator" || slot == "accum" ? 0.1f : slot == "rms" ? 1.0f : 0.0f;
      int64_t slot_changed = 0;
      for (int64_t i = 0; i < kBig * 4; ++i) {
        const int64_t row = i / 4;
        if (row != 5 && row != kBig - 1 && (*s)[i] != init) ++slot_changed;
      }
      EXPECT_EQ(slot_changed, 0) << slot;
    }
  }
}

TEST(SparseGradientsTest, ClipByGlobalNormCountsSparseValues) {
  Scope root = Scope::NewRootScope();
  Output ids = ops::ConstInt32(root, std::vector<int32_t>{1, 1});
  Output looked_up = ops::Embedding(root, ids, 4, 2, "embedding", ops::ConstantInitializer(0.0f));
  ops::Variable w(root, "w", ops::Const(root, FloatTensor({0.0f}, TensorShape({1}))));
  // d/d(lookup) = 2 everywhere (4 values, norm 4); d/dw = 3 (norm 3): global norm 5.
  Output loss =
      ops::Add(root, ops::Mul(root, ops::ReduceSumAll(root, looked_up), ops::Const(root, 2.0f)),
               ops::Mul(root, ops::ReduceSumAll(root, w.value()), ops::Const(root, 3.0f)));
  ops::GradientDescentOptimizer opt(1.0f);
  auto gvs = opt.ComputeGradients(root, loss);
  ASSERT_TRUE(gvs.ok()) << gvs.status();
  ASSERT_TRUE((*gvs)[0].sparse.has_value());
  ops::ClippedGradients clipped = ops::ClipGradientsByGlobalNorm(root, *gvs, 1.0f);
  ASSERT_TRUE(root.ok()) << root.status();
  ASSERT_TRUE(clipped.grads_and_vars[0].sparse.has_value());
  auto train = opt.ApplyGradients(root, clipped.grads_and_vars);
  ASSERT_TRUE(train.ok()) << train.status();
  auto session = StartSession(root);
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_THAT(*FetchFloats(**session, clipped.global_norm), ElementsAre(FloatNear(5, 1e-5)));
  EXPECT_THAT(*FetchFloats(**session, clipped.grads_and_vars[0].sparse->values),
              ::testing::Each(FloatNear(0.4f, 1e-6)));
  ASSERT_TRUE((*session)->Run({}, {}, {(*train)->name()}).ok());
  EXPECT_THAT(*FetchFloats(**session, w.value()), ElementsAre(FloatNear(-0.6f, 1e-6)));
  auto table = ops::Variable::FromGraph(root.graph(), "embedding/embeddings");
  ASSERT_TRUE(table.ok());
  EXPECT_THAT(*FetchFloats(**session, table->value()),
              ElementsAre(0, 0, FloatNear(-0.8f, 1e-6), FloatNear(-0.8f, 1e-6), 0, 0, 0, 0));
}

TEST(SparseGradientsTest, DenseAndSparseGradientTogetherIsAnError) {
  Scope root = Scope::NewRootScope();
  EmbeddingModel m = BuildEmbeddingModel(root, {1});
  ops::GradientDescentOptimizer opt(0.1f);
  auto gvs = opt.ComputeGradients(root, m.loss);
  ASSERT_TRUE(gvs.ok()) << gvs.status();
  (*gvs)[0].grad = ops::IndexedSlicesToDense(root, *(*gvs)[0].sparse);
  auto train = opt.ApplyGradients(root, *gvs);
  ASSERT_FALSE(train.ok());
  EXPECT_THAT(train.status().message(), HasSubstr("both a dense and a sparse gradient"));
}

TEST(SparseGradientsTest, SparseValuesOfTheWrongRowShapeAreAnError) {
  Scope root = Scope::NewRootScope();
  EmbeddingModel m = BuildEmbeddingModel(root, {1});
  ops::GradientDescentOptimizer opt(0.1f);
  ops::GradAndVar gv{Output(), m.table,
                     ops::IndexedSlices{ops::Const(root, FloatTensor({1, 2}, TensorShape({1, 2}))),
                                        ops::ConstInt32(root, std::vector<int32_t>{0}),
                                        ops::ConstInt32(root, std::vector<int32_t>{kRows, kDim})}};
  auto train = opt.ApplyGradients(root, {gv});
  ASSERT_FALSE(train.ok());
  EXPECT_THAT(train.status().message(), HasSubstr("[n] + var.shape[1:]"));
}

}  // namespace
}  // namespace tandem

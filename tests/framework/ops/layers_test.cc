// Layers, initializers and losses through a DirectSession, including the seeds'
// linear regression: Dense(1), mean squared error and Adagrad(0.05).
#include "framework/ops/layers.h"

#include <cmath>

#include "framework/ops/array_ops.h"
#include "framework/ops/initializers.h"
#include "framework/ops/losses.h"
#include "framework/ops/optimizers.h"
#include "framework/ops/state_ops.h"
#include "framework/runtime/session.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Session> Start(const Scope& root) {
  EXPECT_TRUE(root.ok()) << root.status();
  Node* init = ops::GlobalVariablesInitializer(root);
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  auto s = NewDirectSession(def);
  EXPECT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->Run({}, {}, {init->name()}).ok());
  return std::move(s).value();
}

TEST(LayersTest, SeedsLinearRegressionLossGoesDown) {
  Scope root = Scope::NewRootScope();
  root.graph()->set_seed(3);
  Output x = ops::Const(root, {1, 1.5, 2, 2.5, 3, 3.5}, TensorShape({3, 2}));
  Output y = ops::Const(root, {0.3, 0.5, 0.7}, TensorShape({3, 1}));
  Output pred = ops::Dense(root, x, 1);
  Output loss = ops::MeanSquaredError(root, y, pred);
  ops::AdagradOptimizer opt(0.05f);
  auto train = opt.Minimize(root, loss);
  ASSERT_TRUE(train.ok()) << train.status();
  auto session = Start(root);
  std::vector<float> losses;
  for (int i = 0; i < 200; ++i) {
    auto out = session->Run({}, {loss.name()}, {(*train)->name()});
    ASSERT_TRUE(out.ok()) << out.status();
    losses.push_back((*out)[0].scalar<float>());
  }
  EXPECT_LT(losses.back(), 0.1f * losses.front()) << losses.front() << " -> " << losses.back();
  for (size_t i = 20; i < losses.size(); i += 20) EXPECT_LT(losses[i], losses[i - 20]);
}

TEST(LayersTest, DenseNamesVariablesAndComputesXwPlusB) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Const(root, {1, 2}, TensorShape({1, 2}));
  ops::DenseOptions o;
  o.kernel_initializer = ops::ConstantInitializer(0.5f);
  o.bias_initializer = ops::ConstantInitializer(1.0f);
  Output y = ops::Dense(root, x, 3, o);
  Output y2 = ops::Dense(root, y, 2);
  EXPECT_EQ(y2.shape().DebugString(), "[1,2]");
  const auto& trainable = root.graph()->GetCollection(ops::kTrainableVariables);
  EXPECT_THAT(trainable, ::testing::ElementsAre("dense/kernel", "dense/bias", "dense_1/kernel",
                                                "dense_1/bias"));
  auto session = Start(root);
  auto out = session->Run({}, {y.name()});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].flat<float>(), ::testing::ElementsAre(2.5f, 2.5f, 2.5f));
}

TEST(LayersTest, DenseNeedsAKnownInputDimension) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DType::kFloat, PartialShape({-1, -1}));
  ops::Dense(root, x, 3);
  EXPECT_THAT(std::string(root.status().message()), HasSubstr("last dimension"));
}

// Sizes come from configs: a negative one is a graph-building error, not a crash.
TEST(LayersTest, NonPositiveSizesAreErrorsNotCrashes) {
  Scope dense = Scope::NewRootScope();
  Output x = ops::Placeholder(dense.WithOpName("x"), DType::kFloat, PartialShape({-1, 4}));
  EXPECT_FALSE(ops::Dense(dense, x, -5).valid());
  EXPECT_THAT(std::string(dense.status().message()),
              HasSubstr("Dense: units must be >= 1, got -5"));
  Scope conv = Scope::NewRootScope();
  Output images =
      ops::Placeholder(conv.WithOpName("x"), DType::kFloat, PartialShape({-1, 28, 28, 1}));
  EXPECT_FALSE(ops::Conv2DLayer(conv, images, 8, {0, 5}).valid());
  EXPECT_THAT(std::string(conv.status().message()), HasSubstr("kernel height must be >= 1, got 0"));
}

TEST(LayersTest, ConvPoolFlattenShapes) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DType::kFloat, PartialShape({-1, 28, 28, 1}));
  ops::Conv2DLayerOptions c;
  c.padding = "SAME";
  Output h = ops::Conv2DLayer(root, x, 8, {5, 5}, c);
  EXPECT_EQ(h.shape().DebugString(), "[?,28,28,8]");
  h = ops::MaxPool2D(root, h, {2, 2}, {2, 2});
  EXPECT_EQ(h.shape().DebugString(), "[?,14,14,8]");
  Output valid = ops::Conv2DLayer(root, h, 4, {3, 3});
  EXPECT_EQ(valid.shape().DebugString(), "[?,12,12,4]");
  Output flat = ops::Flatten(root, valid);
  EXPECT_EQ(flat.shape().DebugString(), "[?,576]");
  EXPECT_TRUE(root.ok()) << root.status();
}

TEST(LayersTest, DropoutOnlyWhenTrainingAndBatchNormUpdatesMovingStats) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Const(root, Tensor::Filled(DType::kFloat, TensorShape({4, 100}), 1.0));
  EXPECT_EQ(ops::DropoutLayer(root, x, 0.5f, /*training=*/false), x);
  Output d = ops::DropoutLayer(root, x, 0.5f, /*training=*/true, 7);
  Output bx = ops::Const(root, {1, 10, 3, 30}, TensorShape({2, 2}));
  Output bn = ops::BatchNormalization(root, bx, /*training=*/true);
  const auto& updates = root.graph()->GetCollection(ops::kUpdateOps);
  ASSERT_EQ(updates.size(), 2u);
  auto session = Start(root);
  auto out = session->Run({}, {d.name(), bn.name()}, {updates[0], updates[1]});
  ASSERT_TRUE(out.ok()) << out.status();
  int zeros = 0;
  for (float v : (*out)[0].flat<float>()) {
    EXPECT_TRUE(v == 0.0f || v == 2.0f) << v;
    zeros += v == 0.0f;
  }
  EXPECT_GT(zeros, 100);
  EXPECT_LT(zeros, 300);
  // Batch-normalised columns: mean 0, values +-1 (epsilon shrinks them slightly).
  auto bnv = (*out)[1].flat<float>();
  EXPECT_NEAR(bnv[0], -1.0f, 0.01f);
  EXPECT_NEAR(bnv[2], 1.0f, 0.01f);
  auto moving = session->Run({}, {"batch_normalization/moving_mean/Read/ReadVariableOp"});
  ASSERT_TRUE(moving.ok()) << moving.status();
  // 0.99 * 0 + 0.01 * batch mean (2, 20).
  EXPECT_NEAR((*moving)[0].flat<float>()[0], 0.02f, 1e-5f);
  EXPECT_NEAR((*moving)[0].flat<float>()[1], 0.2f, 1e-5f);
}

TEST(LayersTest, EmbeddingLooksUpRows) {
  Scope root = Scope::NewRootScope();
  Output ids = ops::ConstInt32(root, std::vector<int32_t>{2, 0, 2});
  Output e = ops::Embedding(root, ids, 5, 3, "embedding", ops::ConstantInitializer(0.25f));
  EXPECT_EQ(e.shape().DebugString(), "[3,3]");
  auto session = Start(root);
  auto out = session->Run({}, {e.name()});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].flat<float>(), ::testing::Each(0.25f));
  auto bad = ops::Embedding(root.NewSubScope("bad"), ops::ConstInt32(root, std::vector<int32_t>{9}),
                            5, 3, "e2");
  Node* init2 = ops::GlobalVariablesInitializer(root.NewSubScope("again"));
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  ASSERT_TRUE(session->Extend(def).ok());
  ASSERT_TRUE(session->Run({}, {}, {init2->name()}).ok());
  auto err = session->Run({}, {bad.name()});
  EXPECT_EQ(err.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(err.status().message()), HasSubstr("9"));
}

TEST(InitializersTest, GlorotAndHeStatisticsAndSeeds) {
  auto sample = [](ops::Initializer init, int64_t graph_seed) {
    Scope root = Scope::NewRootScope();
    root.graph()->set_seed(graph_seed);
    Output v = init(root, TensorShape({400, 600}), DType::kFloat);
    proto::GraphDef def;
    root.graph()->ToGraphDef(&def);
    auto s = NewDirectSession(def);
    return (*(*s)->Run({}, {v.name()}))[0];
  };
  Tensor g = sample(ops::GlorotUniformInitializer(), 1);
  float limit = std::sqrt(6.0f / 1000.0f), maxabs = 0;
  double sumsq = 0;
  for (float v : g.flat<float>()) {
    maxabs = std::max(maxabs, std::fabs(v));
    sumsq += v * v;
  }
  EXPECT_LE(maxabs, limit);
  EXPECT_GT(maxabs, 0.99f * limit);
  EXPECT_NEAR(sumsq / g.NumElements(), limit * limit / 3, 0.05 * limit * limit / 3);
  Tensor h = sample(ops::HeNormalInitializer(), 1);
  double hs = 0;
  for (float v : h.flat<float>()) hs += v * v;
  EXPECT_NEAR(hs / h.NumElements(), 2.0 / 400, 0.1 * 2.0 / 400);
  Tensor g2 = sample(ops::GlorotUniformInitializer(), 1);
  Tensor g3 = sample(ops::GlorotUniformInitializer(), 2);
  EXPECT_EQ(g.flat<float>()[123], g2.flat<float>()[123]);
  EXPECT_NE(g.flat<float>()[123], g3.flat<float>()[123]);
  EXPECT_EQ(ops::ComputeFans(TensorShape({5, 5, 3, 32})), std::make_pair(75.0, 800.0));
}

TEST(LossesTest, ReductionsAndCollection) {
  Scope root = Scope::NewRootScope();
  Output labels = ops::Const(root, {1, 2, 3, 4}, TensorShape({2, 2}));
  Output preds = ops::Const(root, {1, 0, 3, 8}, TensorShape({2, 2}));
  Output mean = ops::MeanSquaredError(root, labels, preds);
  Output sum = ops::MeanSquaredError(root, labels, preds, ops::Reduction::kSum);
  Output logits = ops::Const(root, {0, 0, 0, 0}, TensorShape({2, 2}));
  Output xent = ops::SparseSoftmaxCrossEntropy(
      root, ops::ConstInt32(root, std::vector<int32_t>{0, 1}), logits);
  EXPECT_EQ(root.graph()->GetCollection(ops::kLosses).size(), 3u);
  Output total = ops::GetTotalLoss(root);
  auto session = Start(root);
  auto out = session->Run({}, {mean.name(), sum.name(), xent.name(), total.name()});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FLOAT_EQ((*out)[0].scalar<float>(), 5.0f);  // (0 + 4 + 0 + 16) / 4
  EXPECT_FLOAT_EQ((*out)[1].scalar<float>(), 20.0f);
  EXPECT_NEAR((*out)[2].scalar<float>(), std::log(2.0f), 1e-6);
  EXPECT_NEAR((*out)[3].scalar<float>(), 25.0f + std::log(2.0f), 1e-5);
}

}  // namespace
}  // namespace tandem

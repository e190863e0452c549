// Tests of the ResourceApply* ops against TensorFlow's update formulas (re-computed here
// in double precision, two steps each), their errors, copy-on-write, and Floor/Cos.
#include "framework/ops/training_ops.h"

#include <cmath>
#include <vector>

#include "framework/ops/array_ops.h"
#include "framework/ops/state_ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/ops/training_test_util.h"

namespace tandem {
namespace {

using ::tandem::testing::FloatTensor;
using ::tandem::testing::StartSession;
using ::tandem::testing::ToFloats;
using ::testing::HasSubstr;
using Vec = std::vector<double>;

class ApplyOpTest : public ::testing::Test {
 protected:
  ops::Variable Var(const std::string& name, const std::vector<float>& v) {
    return ops::Variable(root_, name, ops::Const(root_.WithOpName(name + "_init"), FloatTensor(v)));
  }
  // A float placeholder of unknown shape, fed per step.
  Output In(const std::string& name) {
    return ops::Placeholder(root_.WithOpName(name), DType::kFloat);
  }
  void Start() {
    auto s = StartSession(root_);
    ASSERT_TRUE(s.ok()) << s.status();
    session_ = std::move(*s);
  }
  absl::Status Run(Node* op, const FeedMap& feeds) {
    return session_->Run(feeds, {}, {op->name()}).status();
  }
  std::vector<float> Value(const ops::Variable& v) {
    auto out = session_->Run({}, {v.value().name()});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? ToFloats((*out)[0]) : std::vector<float>();
  }
  static FeedMap::value_type Feed(const Output& o, float v) {
    return {o.name(), Tensor::Scalar<float>(v)};
  }
  static FeedMap::value_type Feed(const Output& o, const std::vector<float>& v) {
    return {o.name(), FloatTensor(v)};
  }

  Scope root_ = Scope::NewRootScope();
  std::unique_ptr<Session> session_;
};

void ExpectNear(const std::vector<float>& actual, const Vec& expected, const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], 1e-5 * (1 + std::abs(expected[i])))
        << what << " element " << i;
  }
}

TEST_F(ApplyOpTest, GradientDescentTwoSteps) {
  ops::Variable var = Var("var", {1.0f, 2.0f, -3.0f});
  Output alpha = In("alpha"), delta = In("delta");
  Node* op = ops::ResourceApplyGradientDescent(root_, var.handle(), alpha, delta);
  Start();
  ASSERT_TRUE(Run(op, {Feed(alpha, 0.5f), Feed(delta, {0.1f, 0.2f, -0.4f})}).ok());
  ExpectNear(Value(var), {0.95, 1.9, -2.8}, "var after step 1");
  ASSERT_TRUE(Run(op, {Feed(alpha, 0.25f), Feed(delta, {1.0f, -1.0f, 2.0f})}).ok());
  ExpectNear(Value(var), {0.7, 2.15, -3.3}, "var after step 2");
}

// TensorFlow's ApplyMomentum.
void RefMomentum(Vec& var, Vec& accum, double lr, const Vec& g, double m, bool nesterov) {
  for (size_t i = 0; i < var.size(); ++i) {
    accum[i] = accum[i] * m + g[i];
    var[i] -= nesterov ? g[i] * lr + accum[i] * m * lr : lr * accum[i];
  }
}

TEST_F(ApplyOpTest, MomentumTwoSteps) {
  for (bool nesterov : {false, true}) {
    SCOPED_TRACE(nesterov ? "nesterov" : "plain");
    root_ = Scope::NewRootScope();
    ops::Variable var = Var("var", {1.0f, -2.0f});
    ops::Variable accum = Var("accum", {0.0f, 0.5f});
    Output lr = In("lr"), grad = In("grad"), momentum = In("momentum");
    Node* op = ops::ResourceApplyMomentum(root_, var.handle(), accum.handle(), lr, grad, momentum,
                                          nesterov);
    Start();
    Vec v = {1, -2}, a = {0, 0.5};
    const std::vector<std::vector<float>> grads = {{0.3f, -0.1f}, {-0.2f, 0.4f}};
    for (const auto& g : grads) {
      ASSERT_TRUE(Run(op, {Feed(lr, 0.1f), Feed(grad, g), Feed(momentum, 0.9f)}).ok());
      RefMomentum(v, a, 0.1, Vec(g.begin(), g.end()), 0.9, nesterov);
      ExpectNear(Value(var), v, "var");
      ExpectNear(Value(accum), a, "accum");
    }
  }
}

TEST_F(ApplyOpTest, MomentumHandComputed) {
  ops::Variable var = Var("var", {1.0f});
  ops::Variable accum = Var("accum", {0.0f});
  Output lr = In("lr"), grad = In("grad"), momentum = In("momentum");
  Node* op = ops::ResourceApplyMomentum(root_, var.handle(), accum.handle(), lr, grad, momentum);
  Start();
  // accum = 0.3, var = 1 - 0.1 * 0.3; then accum = 0.27 - 0.2, var = 0.97 - 0.1 * 0.07.
  ASSERT_TRUE(
      Run(op, {Feed(lr, 0.1f), Feed(grad, std::vector<float>{0.3f}), Feed(momentum, 0.9f)}).ok());
  ExpectNear(Value(var), {0.97}, "var after step 1");
  ASSERT_TRUE(
      Run(op, {Feed(lr, 0.1f), Feed(grad, std::vector<float>{-0.2f}), Feed(momentum, 0.9f)}).ok());
  ExpectNear(Value(accum), {0.07}, "accum after step 2");
  ExpectNear(Value(var), {0.963}, "var after step 2");
}

TEST_F(ApplyOpTest, AdagradTwoSteps) {
  ops::Variable var = Var("var", {1.0f, 2.0f});
  ops::Variable accum = Var("accum", {0.1f, 0.1f});
  Output lr = In("lr"), grad = In("grad");
  Node* op = ops::ResourceApplyAdagrad(root_, var.handle(), accum.handle(), lr, grad);
  Start();
  ASSERT_TRUE(Run(op, {Feed(lr, 0.1f), Feed(grad, {0.5f, -1.0f})}).ok());
  // accum = 0.1 + 0.25 = 0.35; var = 1 - 0.1 * 0.5 / sqrt(0.35).
  ExpectNear(Value(accum), {0.35, 1.1}, "accum after step 1");
  ExpectNear(Value(var), {1 - 0.05 / std::sqrt(0.35), 2 + 0.1 / std::sqrt(1.1)}, "var");
  ASSERT_TRUE(Run(op, {Feed(lr, 0.1f), Feed(grad, {0.5f, -1.0f})}).ok());
  ExpectNear(Value(accum), {0.6, 2.1}, "accum after step 2");
  ExpectNear(Value(var),
             {1 - 0.05 / std::sqrt(0.35) - 0.05 / std::sqrt(0.6),
              2 + 0.1 / std::sqrt(1.1) + 0.1 / std::sqrt(2.1)},
             "var after step 2");
}

// TensorFlow's ApplyAdam.
void RefAdam(Vec& var, Vec& m, Vec& v, double b1p, double b2p, double lr, double b1, double b2,
             double eps, const Vec& g, bool nesterov) {
  const double alpha = lr * std::sqrt(1 - b2p) / (1 - b1p);
  for (size_t i = 0; i < var.size(); ++i) {
    m[i] += (g[i] - m[i]) * (1 - b1);
    v[i] += (g[i] * g[i] - v[i]) * (1 - b2);
    const double num = nesterov ? (g[i] * (1 - b1) + b1 * m[i]) : m[i];
    var[i] -= num * alpha / (std::sqrt(v[i]) + eps);
  }
}

TEST_F(ApplyOpTest, AdamTwoStepsWithBetaPowers) {
  for (bool nesterov : {false, true}) {
    SCOPED_TRACE(nesterov ? "nesterov" : "plain");
    root_ = Scope::NewRootScope();
    // Five elements: exercises the 4-lane loop and the scalar tail.
    const std::vector<float> init = {1.0f, -2.0f, 0.5f, 3.0f, -0.25f};
    ops::Variable var = Var("var", init);
    ops::Variable m = Var("m", {0, 0, 0, 0, 0});
    ops::Variable v = Var("v", {0, 0, 0, 0, 0});
    Output b1p = In("beta1_power"), b2p = In("beta2_power"), lr = In("lr"), b1 = In("beta1"),
           b2 = In("beta2"), eps = In("epsilon"), grad = In("grad");
    Node* op = ops::ResourceApplyAdam(root_, var.handle(), m.handle(), v.handle(), b1p, b2p, lr, b1,
                                      b2, eps, grad, nesterov);
    Start();
    Vec rv(init.begin(), init.end()), rm(5, 0), rvv(5, 0);
    const std::vector<std::vector<float>> grads = {{0.1f, -0.2f, 0.3f, 0.0f, 1.5f},
                                                   {-0.4f, 0.5f, 0.3f, 0.2f, -1.0f}};
    double p1 = 0.9, p2 = 0.999;
    for (const auto& g : grads) {
      ASSERT_TRUE(Run(op, {Feed(b1p, static_cast<float>(p1)), Feed(b2p, static_cast<float>(p2)),
                           Feed(lr, 0.01f), Feed(b1, 0.9f), Feed(b2, 0.999f), Feed(eps, 1e-8f),
                           Feed(grad, g)})
                      .ok());
      RefAdam(rv, rm, rvv, p1, p2, 0.01, 0.9, 0.999, 1e-8, Vec(g.begin(), g.end()), nesterov);
      ExpectNear(Value(var), rv, "var");
      ExpectNear(Value(m), rm, "m");
      ExpectNear(Value(v), rvv, "v");
      p1 *= 0.9;
      p2 *= 0.999;
    }
  }
}

TEST_F(ApplyOpTest, RMSPropAndCenteredTwoSteps) {
  for (bool centered : {false, true}) {
    SCOPED_TRACE(centered ? "centered" : "plain");
    root_ = Scope::NewRootScope();
    const std::vector<float> init = {1.0f, -2.0f, 0.5f, 3.0f, -0.25f, 7.0f};
    ops::Variable var = Var("var", init);
    ops::Variable mg = Var("mg", std::vector<float>(6, 0.0f));
    ops::Variable ms = Var("ms", std::vector<float>(6, 1.0f));
    ops::Variable mom = Var("mom", std::vector<float>(6, 0.0f));
    Output lr = In("lr"), rho = In("rho"), momentum = In("momentum"), eps = In("epsilon"),
           grad = In("grad");
    Node* op =
        centered ? ops::ResourceApplyCenteredRMSProp(root_, var.handle(), mg.handle(), ms.handle(),
                                                     mom.handle(), lr, rho, momentum, eps, grad)
                 : ops::ResourceApplyRMSProp(root_, var.handle(), ms.handle(), mom.handle(), lr,
                                             rho, momentum, eps, grad);
    Start();
    Vec rv(init.begin(), init.end()), rmg(6, 0), rms(6, 1), rmom(6, 0);
    const std::vector<std::vector<float>> grads = {{0.1f, -0.2f, 0.3f, 0.0f, 1.5f, -2.0f},
                                                   {-0.4f, 0.5f, 0.3f, 0.2f, -1.0f, 0.7f}};
    const double kLr = 0.01, kRho = 0.9, kMomentum = 0.5, kEps = 1e-6;
    for (const auto& g : grads) {
      ASSERT_TRUE(Run(op, {Feed(lr, kLr), Feed(rho, kRho), Feed(momentum, kMomentum),
                           Feed(eps, kEps), Feed(grad, g)})
                      .ok());
      for (size_t i = 0; i < rv.size(); ++i) {
        rms[i] += (g[i] * g[i] - rms[i]) * (1 - kRho);
        double denom = rms[i] + kEps;
        if (centered) {
          rmg[i] += (g[i] - rmg[i]) * (1 - kRho);
          denom = rms[i] - rmg[i] * rmg[i] + kEps;
        }
        rmom[i] = rmom[i] * kMomentum + kLr * g[i] / std::sqrt(denom);
        rv[i] -= rmom[i];
      }
      ExpectNear(Value(var), rv, "var");
      ExpectNear(Value(ms), rms, "ms");
      ExpectNear(Value(mom), rmom, "mom");
      if (centered) ExpectNear(Value(mg), rmg, "mg");
    }
  }
}

// TensorFlow's ApplyFtrl (multiply_linear_by_lr = false).
void RefFtrl(Vec& var, Vec& accum, Vec& linear, const Vec& g, double lr, double l1, double l2,
             double lr_power) {
  for (size_t i = 0; i < var.size(); ++i) {
    const double new_accum = accum[i] + g[i] * g[i];
    linear[i] +=
        g[i] - (std::pow(new_accum, -lr_power) - std::pow(accum[i], -lr_power)) / lr * var[i];
    const double quadratic = std::pow(new_accum, -lr_power) / lr + 2 * l2;
    const double sign = linear[i] > 0 ? 1 : (linear[i] < 0 ? -1 : 0);
    var[i] = std::abs(linear[i]) > l1 ? (sign * l1 - linear[i]) / quadratic : 0.0;
    accum[i] = new_accum;
  }
}

TEST_F(ApplyOpTest, FtrlTwoSteps) {
  for (float lr_power : {-0.5f, -0.7f}) {
    SCOPED_TRACE(lr_power);
    root_ = Scope::NewRootScope();
    const std::vector<float> init = {1.0f, -2.0f, 0.05f, 3.0f};
    ops::Variable var = Var("var", init);
    ops::Variable accum = Var("accum", std::vector<float>(4, 0.1f));
    ops::Variable linear = Var("linear", std::vector<float>(4, 0.0f));
    Output grad = In("grad"), lr = In("lr"), l1 = In("l1"), l2 = In("l2"), lrp = In("lr_power");
    Node* op = ops::ResourceApplyFtrl(root_, var.handle(), accum.handle(), linear.handle(), grad,
                                      lr, l1, l2, lrp);
    Start();
    Vec rv(init.begin(), init.end()), ra(4, 0.1), rl(4, 0);
    // Large and small gradients so that some |linear| stay below l1 (var shrunk to 0).
    const std::vector<std::vector<float>> grads = {{0.5f, -0.01f, 0.02f, 2.0f},
                                                   {0.3f, 0.01f, -0.01f, -1.0f}};
    for (const auto& g : grads) {
      ASSERT_TRUE(Run(op, {Feed(grad, g), Feed(lr, 0.1f), Feed(l1, 0.05f), Feed(l2, 0.01f),
                           Feed(lrp, lr_power)})
                      .ok());
      RefFtrl(rv, ra, rl, Vec(g.begin(), g.end()), 0.1, 0.05, 0.01, lr_power);
      ExpectNear(Value(var), rv, "var");
      ExpectNear(Value(accum), ra, "accum");
      ExpectNear(Value(linear), rl, "linear");
    }
    bool some_zero = false;
    for (double x : rv) some_zero |= x == 0.0;
    EXPECT_TRUE(some_zero) << "the test should exercise the l1 shrinkage to zero";
  }
}

TEST_F(ApplyOpTest, FtrlRejectsBadHyperParameters) {
  ops::Variable var = Var("var", {1.0f});
  ops::Variable accum = Var("accum", {0.1f});
  ops::Variable linear = Var("linear", {0.0f});
  Output grad = In("grad"), lr = In("lr"), l1 = In("l1"), l2 = In("l2"), lrp = In("lr_power");
  Node* op = ops::ResourceApplyFtrl(root_, var.handle(), accum.handle(), linear.handle(), grad, lr,
                                    l1, l2, lrp);
  Start();
  auto run = [&](float lr_v, float l1_v, float l2_v, float p) {
    return Run(op, {Feed(grad, std::vector<float>{0.5f}), Feed(lr, lr_v), Feed(l1, l1_v),
                    Feed(l2, l2_v), Feed(lrp, p)});
  };
  EXPECT_THAT(run(0, 0, 0, -0.5f).message(), HasSubstr("lr is not a positive scalar"));
  EXPECT_THAT(run(0.1f, -1, 0, -0.5f).message(), HasSubstr("l1 regularization strength"));
  EXPECT_THAT(run(0.1f, 0, -1, -0.5f).message(), HasSubstr("l2 regularization strength"));
  EXPECT_THAT(run(0.1f, 0, 0, 0.5f).message(), HasSubstr("lr_power is not a non-positive"));
  ExpectNear(Value(var), {1.0}, "var untouched by rejected updates");
}

TEST_F(ApplyOpTest, UninitializedVariableIsFailedPrecondition) {
  ops::Variable var = Var("dense/kernel", {1.0f, 2.0f});
  Output accum =
      ops::VarHandleOp(root_.WithOpName("dense/kernel/Adagrad"), DType::kFloat, PartialShape({2}));
  Output lr = In("lr"), grad = In("grad");
  Node* op = ops::ResourceApplyAdagrad(root_, var.handle(), accum, lr, grad);
  Start();
  absl::Status s = Run(op, {Feed(lr, 0.1f), Feed(grad, {1.0f, 1.0f})});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("Attempting to use uninitialized value dense/kernel/Adagrad"));
  ExpectNear(Value(var), {1.0, 2.0}, "var untouched");
}

TEST_F(ApplyOpTest, GradShapeMismatchIsClear) {
  ops::Variable var = Var("w", {1.0f, 2.0f, 3.0f});
  Output alpha = In("alpha"), delta = In("delta");
  Node* op = ops::ResourceApplyGradientDescent(root_, var.handle(), alpha, delta);
  Start();
  absl::Status s = Run(op, {Feed(alpha, 0.1f), Feed(delta, {1.0f, 2.0f})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("var and delta do not have the same shape: [3] vs [2]"));
  // A scalar hyper-parameter with several elements.
  s = Run(op, {Feed(alpha, {0.1f, 0.2f}), Feed(delta, {1.0f, 2.0f, 3.0f})});
  EXPECT_THAT(s.message(), HasSubstr("alpha is not a scalar: [2]"));
  ExpectNear(Value(var), {1.0, 2.0, 3.0}, "var untouched");
}

TEST_F(ApplyOpTest, StaticShapeMismatchFailsAtBuild) {
  ops::Variable var = Var("w", {1.0f, 2.0f, 3.0f});
  ops::ResourceApplyGradientDescent(root_, var.handle(), ops::Const(root_, 0.1f),
                                    ops::Const(root_, {1.0f, 2.0f}, TensorShape({2})));
  EXPECT_EQ(root_.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(root_.status().message(),
              HasSubstr("var and grad do not have the same shape: [3] vs [2]"));
}

TEST_F(ApplyOpTest, NonFloatInputsFailAtBuild) {
  ops::Variable var = Var("w", {1.0f});
  ops::ResourceApplyGradientDescent(root_, var.handle(), ops::ConstInt32(root_, 1),
                                    ops::Const(root_, {1.0f}, TensorShape({1})));
  EXPECT_THAT(root_.status().message(), HasSubstr("alpha must be float32, not int32"));
}

TEST_F(ApplyOpTest, EarlierReadsKeepTheirValue) {
  ops::Variable var = Var("w", {1.0f, 2.0f});
  Output alpha = In("alpha"), delta = In("delta");
  Node* op = ops::ResourceApplyGradientDescent(root_, var.handle(), alpha, delta);
  Start();
  auto before = session_->Run({}, {var.value().name()});
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(Run(op, {Feed(alpha, 1.0f), Feed(delta, {1.0f, 1.0f})}).ok());
  ExpectNear(ToFloats((*before)[0]), {1.0, 2.0}, "snapshot read before the update");
  ExpectNear(Value(var), {0.0, 1.0}, "var after the update");
}

TEST_F(ApplyOpTest, LargeVariableUsesEveryElement) {
  // Big enough for the update to be split over the intra-op pool.
  const int64_t n = 200003;
  std::vector<float> init(n), g(n);
  for (int64_t i = 0; i < n; ++i) {
    init[i] = static_cast<float>(i % 17) * 0.25f;
    g[i] = static_cast<float>((i * 7) % 13) - 6.0f;
  }
  ops::Variable var = Var("w", init);
  ops::Variable accum = Var("accum", std::vector<float>(n, 0.1f));
  Output lr = In("lr"), grad = In("grad");
  Node* op = ops::ResourceApplyAdagrad(root_, var.handle(), accum.handle(), lr, grad);
  Start();
  ASSERT_TRUE(Run(op, {Feed(lr, 0.5f), Feed(grad, g)}).ok());
  std::vector<float> got = Value(var);
  ASSERT_EQ(static_cast<int64_t>(got.size()), n);
  int bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double acc = 0.1 + static_cast<double>(g[i]) * g[i];
    const double want = init[i] - 0.5 * g[i] / std::sqrt(acc);
    bad += std::abs(got[i] - want) > 1e-5 * (1 + std::abs(want));
  }
  EXPECT_EQ(bad, 0);
}

TEST(FloorCosTest, Values) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Const(root, {-1.5f, -0.0f, 0.25f, 2.0f, 3.75f}, TensorShape({5}));
  Output f = ops::Floor(root, x);
  Output c = ops::Cos(root, x);
  auto session = StartSession(root);
  ASSERT_TRUE(session.ok()) << session.status();
  auto out = (*session)->Run({}, {f.name(), c.name()});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(ToFloats((*out)[0]), {-2, 0, 0, 2, 3}, "floor");
  ExpectNear(ToFloats((*out)[1]),
             {std::cos(-1.5), 1, std::cos(0.25), std::cos(2.0), std::cos(3.75)}, "cos");
}

}  // namespace
}  // namespace tandem

// tests/framework/ops/nn_ops_test.cc
//
// Numeric tests of the nn ops (and MatMul) through NewDirectSession: every kernel is
// compared with a naive reference written here (loops over every index), and bad
// shapes and labels must come back as INVALID_ARGUMENT naming the problem.
#include "framework/ops/nn_ops.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/gradients.h"
#include "framework/ops/math_ops.h"
#include "framework/runtime/session.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/ops/gradient_check.h"
#include "tests/util/window_geometry.h"

namespace tandem {
namespace {

using ::tandem::testing::RandomTensor;
using ::testing::HasSubstr;

// Runs `fetches` of the scope's graph once.
absl::StatusOr<std::vector<Tensor>> RunGraph(const Scope& scope, const std::vector<Output>& fetches,
                                             const FeedMap& feeds = {}) {
  if (!scope.ok()) return scope.status();
  proto::GraphDef def;
  scope.graph()->ToGraphDef(&def);
  auto session = NewDirectSession(def);
  if (!session.ok()) return session.status();
  std::vector<std::string> names;
  for (const Output& o : fetches) names.push_back(o.name());
  return (*session)->Run(feeds, names);
}

std::vector<Tensor> MustRun(const Scope& scope, const std::vector<Output>& fetches,
                            const FeedMap& feeds = {}) {
  auto out = RunGraph(scope, fetches, feeds);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::vector<Tensor>(fetches.size());
}

// A node of `op` (for the backward ops, which have no public builders).
Output Raw(const Scope& s, absl::string_view op, std::vector<Output> inputs) {
  Node* n = s.AddNode(op, op, std::move(inputs));
  return n == nullptr ? Output() : Output(n, 0);
}

void ExpectNear(const Tensor& got, const std::vector<float>& want, const TensorShape& shape,
                float tol = 1e-4f) {
  ASSERT_EQ(got.shape(), shape);
  ASSERT_EQ(got.dtype(), DType::kFloat);
  for (int64_t i = 0; i < got.NumElements(); ++i) {
    ASSERT_NEAR(got.flat<float>()[i], want[i], tol * (1 + std::fabs(want[i]))) << "element " << i;
  }
}

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.flat<float>().begin(), t.flat<float>().end());
}

// ---------------------------------------------------------------------------------------
// MatMul.

std::vector<float> NaiveMatMul(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  const int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1);
  const int64_t n = tb ? b.dim(0) : b.dim(1);
  std::vector<float> c(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        float av = ta ? a.flat<float>()[p * m + i] : a.flat<float>()[i * k + p];
        float bv = tb ? b.flat<float>()[j * k + p] : b.flat<float>()[p * n + j];
        acc += static_cast<double>(av) * bv;
      }
      c[i * n + j] = static_cast<float>(acc);
    }
  }
  return c;
}

TEST(MatMulTest, AllTransposesMatchNaive) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Scope s = Scope::NewRootScope();
      Tensor a = RandomTensor(ta ? TensorShape({7, 5}) : TensorShape({5, 7}), 1);
      Tensor b = RandomTensor(tb ? TensorShape({3, 7}) : TensorShape({7, 3}), 2);
      Output c = ops::MatMul(s, ops::Const(s, a), ops::Const(s, b), ta, tb);
      auto out = MustRun(s, {c});
      ExpectNear(out[0], NaiveMatMul(a, b, ta, tb), TensorShape({5, 3}), 1e-5f);
    }
  }
}

TEST(MatMulTest, MlpShapesMatchNaive) {
  Scope s = Scope::NewRootScope();
  Tensor a = RandomTensor(TensorShape({128, 784}), 3);
  Tensor b = RandomTensor(TensorShape({784, 256}), 4);
  Output x = ops::Placeholder(s, DType::kFloat, PartialShape({-1, 784}));
  Output c = ops::MatMul(s, x, ops::Const(s, b));
  auto out = MustRun(s, {c}, {{x.name(), a}});
  ExpectNear(out[0], NaiveMatMul(a, b, false, false), TensorShape({128, 256}), 1e-4f);
}

TEST(MatMulTest, InnerDimensionMismatchAtGraphBuilding) {
  Scope s = Scope::NewRootScope();
  Output a = ops::Placeholder(s, DType::kFloat, PartialShape({-1, 784}));
  Output b = ops::Placeholder(s, DType::kFloat, PartialShape({100, 10}));
  ops::MatMul(s.WithOpName("dense/MatMul"), a, b);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("dense/MatMul"));
  EXPECT_THAT(s.status().message(), HasSubstr("[?,784] x [100,10]"));
}

TEST(MatMulTest, InnerDimensionMismatchAtRunTime) {
  Scope s = Scope::NewRootScope();
  Output a = ops::Placeholder(s, DType::kFloat);
  Output b = ops::Placeholder(s, DType::kFloat);
  Output c = ops::MatMul(s.WithOpName("mm"), a, b);
  auto out = RunGraph(s, {c},
                      {{a.name(), RandomTensor(TensorShape({2, 3}), 1)},
                       {b.name(), RandomTensor(TensorShape({4, 5}), 2)}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("'mm'"));
  EXPECT_THAT(out.status().message(), HasSubstr("[2,3] x [4,5]"));
}

// ---------------------------------------------------------------------------------------
// Activations, bias, losses.

TEST(ActivationTest, ValuesAndBackwardOps) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Const(s, {-2.0f, -0.5f, 0.5f, 7.0f}, TensorShape({4}));
  Output g = ops::Const(s, {1.0f, 2.0f, 3.0f, 4.0f}, TensorShape({4}));
  auto out = MustRun(
      s, {ops::Relu(s, x), ops::Relu6(s, x), ops::Elu(s, x), ops::Softplus(s, x),
          Raw(s, "ReluGrad", {g, x}), Raw(s, "Relu6Grad", {g, x}), Raw(s, "SoftplusGrad", {g, x})});
  const TensorShape sh({4});
  ExpectNear(out[0], {0, 0, 0.5f, 7}, sh);
  ExpectNear(out[1], {0, 0, 0.5f, 6}, sh);
  ExpectNear(out[2], {std::expm1(-2.0f), std::expm1(-0.5f), 0.5f, 7}, sh);
  std::vector<float> sp, sg;
  for (float v : {-2.0f, -0.5f, 0.5f, 7.0f}) sp.push_back(std::log1p(std::exp(v)));
  ExpectNear(out[3], sp, sh);
  ExpectNear(out[4], {0, 0, 3, 4}, sh);
  ExpectNear(out[5], {0, 0, 3, 0}, sh);
  int i = 0;
  for (float v : {-2.0f, -0.5f, 0.5f, 7.0f}) sg.push_back((++i) / (1 + std::exp(-v)));
  ExpectNear(out[6], sg, sh);
}

TEST(BiasAddTest, AddsAlongLastDimensionAndSumsBack) {
  Scope s = Scope::NewRootScope();
  Output v = ops::Const(s, {1, 2, 3, 4, 5, 6}, TensorShape({2, 3}));
  Output b = ops::Const(s, {10, 20, 30}, TensorShape({3}));
  auto out = MustRun(s, {ops::BiasAdd(s, v, b), Raw(s, "BiasAddGrad", {v})});
  ExpectNear(out[0], {11, 22, 33, 14, 25, 36}, TensorShape({2, 3}));
  ExpectNear(out[1], {5, 7, 9}, TensorShape({3}));
}

TEST(BiasAddTest, WrongBiasSizeIsAnError) {
  Scope s = Scope::NewRootScope();
  ops::BiasAdd(s, ops::Placeholder(s, DType::kFloat, PartialShape({-1, 4})),
               ops::Const(s, {1, 2, 3}, TensorShape({3})));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("4 vs 3"));
}

std::vector<float> RefSoftmax(const std::vector<float>& x, int64_t c, bool log) {
  std::vector<float> y(x.size());
  for (size_t r = 0; r < x.size() / c; ++r) {
    double mx = -1e30, sum = 0;
    for (int64_t j = 0; j < c; ++j) mx = std::max<double>(mx, x[r * c + j]);
    for (int64_t j = 0; j < c; ++j) sum += std::exp(x[r * c + j] - mx);
    for (int64_t j = 0; j < c; ++j) {
      double v = x[r * c + j] - mx - std::log(sum);
      y[r * c + j] = static_cast<float>(log ? v : std::exp(v));
    }
  }
  return y;
}

TEST(SoftmaxTest, SoftmaxAndLogSoftmax) {
  Scope s = Scope::NewRootScope();
  Tensor x = RandomTensor(TensorShape({4, 10}), 5, -30, 30);
  auto out = MustRun(s, {ops::Softmax(s, ops::Const(s, x)), ops::LogSoftmax(s, ops::Const(s, x))});
  ExpectNear(out[0], RefSoftmax(Values(x), 10, false), x.shape(), 1e-5f);
  ExpectNear(out[1], RefSoftmax(Values(x), 10, true), x.shape(), 1e-5f);
}

TEST(CrossEntropyTest, SparseLossAndBackprop) {
  for (DType label_type : {DType::kInt32, DType::kInt64}) {
    Scope s = Scope::NewRootScope();
    Tensor x = RandomTensor(TensorShape({3, 4}), 6, -3, 3);
    Output labels = label_type == DType::kInt32 ? ops::ConstInt32(s, std::vector<int32_t>{2, 0, 3})
                                                : ops::ConstInt64(s, {2, 0, 3});
    auto xent = ops::SparseSoftmaxCrossEntropyWithLogits(s, ops::Const(s, x), labels);
    auto out = MustRun(s, {xent[0], xent[1]});
    std::vector<float> logp = RefSoftmax(Values(x), 4, true);
    std::vector<float> back(12);
    for (int i = 0; i < 12; ++i) back[i] = std::exp(logp[i]);
    const int lab[] = {2, 0, 3};
    for (int r = 0; r < 3; ++r) back[r * 4 + lab[r]] -= 1;
    ExpectNear(out[0], {-logp[2], -logp[4], -logp[11]}, TensorShape({3}));
    ExpectNear(out[1], back, TensorShape({3, 4}));
  }
}

TEST(CrossEntropyTest, LabelOutOfRangeIsNamed) {
  Scope s = Scope::NewRootScope();
  Output labels = ops::Placeholder(s, DType::kInt32, PartialShape({3}));
  auto xent = ops::SparseSoftmaxCrossEntropyWithLogits(
      s.WithOpName("xent"), ops::Const(s, RandomTensor(TensorShape({3, 10}), 7)), labels);
  for (int32_t bad : {12, -1}) {
    auto out =
        RunGraph(s, {xent[0]},
                 {{labels.name(), Tensor::FromVector<int32_t>({1, bad, 0}, TensorShape({3}))}});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(out.status().message(), HasSubstr(absl::StrCat("label value of ", bad)));
    EXPECT_THAT(out.status().message(), HasSubstr("[0, 10)"));
    EXPECT_THAT(out.status().message(), HasSubstr("xent"));
  }
}

TEST(CrossEntropyTest, DenseAndSigmoid) {
  Scope s = Scope::NewRootScope();
  Tensor x = RandomTensor(TensorShape({2, 3}), 8, -3, 3);
  Tensor z = RandomTensor(TensorShape({2, 3}), 9, 0, 1);
  auto xent = ops::SoftmaxCrossEntropyWithLogits(s, ops::Const(s, x), ops::Const(s, z));
  Output sig = ops::SigmoidCrossEntropyWithLogits(s, ops::Const(s, x), ops::Const(s, z));
  auto out = MustRun(s, {xent[0], xent[1], sig});
  std::vector<float> logp = RefSoftmax(Values(x), 3, true);
  std::vector<float> loss(2, 0), back(6), sg(6);
  for (int i = 0; i < 6; ++i) {
    float zi = z.flat<float>()[i], xi = x.flat<float>()[i];
    loss[i / 3] -= zi * logp[i];
    back[i] = std::exp(logp[i]) - zi;
    sg[i] =
        -zi * std::log(1 / (1 + std::exp(-xi))) - (1 - zi) * std::log(1 - 1 / (1 + std::exp(-xi)));
  }
  ExpectNear(out[0], loss, TensorShape({2}));
  ExpectNear(out[1], back, TensorShape({2, 3}));
  ExpectNear(out[2], sg, TensorShape({2, 3}), 1e-4f);
}

TEST(L2LossTest, HalfSumOfSquares) {
  Scope s = Scope::NewRootScope();
  auto out = MustRun(s, {ops::L2Loss(s, ops::Const(s, {1, -2, 3}, TensorShape({3})))});
  ExpectNear(out[0], {7}, TensorShape({}));
}

// ---------------------------------------------------------------------------------------
// Convolution and pooling against naive loops.

using Geometry = testing::WindowGeometry;
constexpr auto Geo = testing::Window;

// Naive NHWC x HWIO convolution.
Tensor NaiveConv(const Tensor& in, const Tensor& f, int64_t stride, int64_t dil, bool same) {
  const int64_t n = in.dim(0), h = in.dim(1), w = in.dim(2), c = in.dim(3);
  const int64_t kh = f.dim(0), kw = f.dim(1), o = f.dim(3);
  Geometry gh = Geo(h, kh, stride, dil, same), gw = Geo(w, kw, stride, dil, same);
  Tensor out(DType::kFloat, TensorShape({n, gh.out, gw.out, o}));
  auto X = in.flat<float>();
  auto F = f.flat<float>();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oy = 0; oy < gh.out; ++oy)
      for (int64_t ox = 0; ox < gw.out; ++ox)
        for (int64_t oc = 0; oc < o; ++oc) {
          double acc = 0;
          for (int64_t ky = 0; ky < kh; ++ky)
            for (int64_t kx = 0; kx < kw; ++kx) {
              int64_t y = oy * stride + ky * dil - gh.pad, x = ox * stride + kx * dil - gw.pad;
              if (y < 0 || y >= h || x < 0 || x >= w) continue;
              for (int64_t ic = 0; ic < c; ++ic) {
                acc += X[((b * h + y) * w + x) * c + ic] * F[((ky * kw + kx) * c + ic) * o + oc];
              }
            }
          out.flat<float>()[((b * gh.out + oy) * gw.out + ox) * o + oc] = static_cast<float>(acc);
        }
  return out;
}

struct ConvParam {
  std::string name;
  TensorShape input, filter;
  int64_t stride, dilation;
  bool same;
};

class ConvTest : public ::testing::TestWithParam<ConvParam> {};

TEST_P(ConvTest, ForwardAndBackpropMatchNaive) {
  const ConvParam& p = GetParam();
  Tensor in = RandomTensor(p.input, 20), f = RandomTensor(p.filter, 21);
  Tensor want = NaiveConv(in, f, p.stride, p.dilation, p.same);
  Tensor g = RandomTensor(want.shape(), 22);
  Scope s = Scope::NewRootScope();
  ops::Conv2DAttrs a{
      {1, p.stride, p.stride, 1}, p.same ? "SAME" : "VALID", {1, p.dilation, p.dilation, 1}};
  Output x = ops::Const(s, in), w = ops::Const(s, f);
  Output y = ops::Conv2D(s, x, w, a);
  auto grads = Gradients(s, {y}, {x, w}, {ops::Const(s, g)});
  ASSERT_TRUE(grads.ok()) << grads.status();
  auto out = MustRun(s, {y, (*grads)[0], (*grads)[1]});
  ExpectNear(out[0], Values(want), want.shape(), 1e-4f);
  // Backprops: d sum(g * conv(x, w)) by central differences would be slow; instead the
  // adjoint identity <g, conv(x, w)> = <dx, x> = <dw, w> (conv is linear in each).
  double gy = 0, dxx = 0, dww = 0;
  for (int64_t i = 0; i < g.NumElements(); ++i) gy += g.flat<float>()[i] * want.flat<float>()[i];
  for (int64_t i = 0; i < in.NumElements(); ++i)
    dxx += out[1].flat<float>()[i] * in.flat<float>()[i];
  for (int64_t i = 0; i < f.NumElements(); ++i) dww += out[2].flat<float>()[i] * f.flat<float>()[i];
  ASSERT_EQ(out[1].shape(), p.input);
  ASSERT_EQ(out[2].shape(), p.filter);
  EXPECT_NEAR(dxx, gy, 1e-3 * (1 + std::fabs(gy)));
  EXPECT_NEAR(dww, gy, 1e-3 * (1 + std::fabs(gy)));
  // And element by element against the naive conv's linearity: dx[i] = sum g * d y / d x[i],
  // checked at a few positions.
  for (int64_t i : {int64_t{0}, in.NumElements() / 2, in.NumElements() - 1}) {
    Tensor e(DType::kFloat, in.shape());
    std::fill_n(e.data<float>(), e.NumElements(), 0.0f);
    e.flat<float>()[i] = 1;
    Tensor ye = NaiveConv(e, f, p.stride, p.dilation, p.same);
    double d = 0;
    for (int64_t k = 0; k < ye.NumElements(); ++k) d += g.flat<float>()[k] * ye.flat<float>()[k];
    EXPECT_NEAR(out[1].flat<float>()[i], d, 1e-4 * (1 + std::fabs(d))) << "dx element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ConvTest,
    ::testing::Values(ConvParam{"same1", {2, 5, 5, 3}, {3, 3, 3, 4}, 1, 1, true},
                      ConvParam{"valid1", {2, 6, 5, 2}, {3, 2, 2, 3}, 1, 1, false},
                      ConvParam{"same_stride2", {1, 7, 8, 2}, {3, 3, 2, 2}, 2, 1, true},
                      ConvParam{"valid_stride2", {2, 9, 7, 3}, {3, 3, 3, 5}, 2, 1, false},
                      ConvParam{"same_dilated", {1, 8, 8, 2}, {3, 3, 2, 3}, 1, 2, true},
                      ConvParam{"valid_dilated", {1, 9, 8, 1}, {2, 3, 1, 2}, 1, 3, false},
                      ConvParam{"mnist_conv1", {4, 28, 28, 1}, {5, 5, 1, 32}, 1, 1, true},
                      ConvParam{"mnist_conv2", {2, 14, 14, 32}, {5, 5, 32, 64}, 1, 1, true}),
    [](const ::testing::TestParamInfo<ConvParam>& info) { return info.param.name; });

TEST(ConvErrorTest, ChannelMismatchAndOversizedValidWindow) {
  Scope s = Scope::NewRootScope();
  ops::Conv2D(s.WithOpName("c1"), ops::Placeholder(s, DType::kFloat, PartialShape({-1, 8, 8, 3})),
              ops::Placeholder(s, DType::kFloat, PartialShape({3, 3, 2, 4})));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("c1"));
  EXPECT_THAT(s.status().message(), HasSubstr("3 vs 2"));

  Scope s2 = Scope::NewRootScope();
  ops::Conv2D(s2, ops::Placeholder(s2, DType::kFloat, PartialShape({1, 2, 2, 1})),
              ops::Placeholder(s2, DType::kFloat, PartialShape({3, 3, 1, 1})),
              {{1, 1, 1, 1}, "VALID"});
  EXPECT_EQ(s2.status().code(), absl::StatusCode::kInvalidArgument);

  // Shapes only known at run time reach the kernel's own checks.
  Scope s3 = Scope::NewRootScope();
  Output x = ops::Placeholder(s3, DType::kFloat);
  Output y = ops::Conv2D(s3.WithOpName("c3"), x,
                         ops::Const(s3, RandomTensor(TensorShape({3, 3, 2, 4}), 1)));
  auto out = RunGraph(s3, {y}, {{x.name(), RandomTensor(TensorShape({1, 5, 5, 3}), 2)}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("c3"));
  EXPECT_THAT(out.status().message(), HasSubstr("[1,5,5,3]"));
}

TEST(ConvErrorTest, BackpropWithWrongGradientShapeIsNamed) {
  Scope s = Scope::NewRootScope();
  Output filter = ops::Const(s, RandomTensor(TensorShape({3, 3, 2, 4}), 1));
  Output grad = ops::Placeholder(s, DType::kFloat);
  Output dx = ops::Conv2DBackpropInput(s.WithOpName("bp"), ops::ConstInt32(s, {1, 5, 5, 2}), filter,
                                       grad, {});
  auto out = RunGraph(s, {dx}, {{grad.name(), RandomTensor(TensorShape({1, 4, 4, 4}), 2)}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("'bp'"));
  EXPECT_THAT(out.status().message(), HasSubstr("[1,4,4,4]"));
  EXPECT_THAT(out.status().message(), HasSubstr("[1,5,5,4]"));
}

TEST(BuilderTest, MultiOutputBuildersReturnInvalidOutputsOnError) {
  Scope s = Scope::NewRootScope();
  Output bad = ops::MatMul(s, ops::Const(s, {1, 2}, TensorShape({1, 2})),
                           ops::Const(s, {1, 2, 3}, TensorShape({3, 1})));
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(ops::SparseSoftmaxCrossEntropyWithLogits(s, bad, ops::ConstInt32(s, {0})).size(), 2u);
  EXPECT_EQ(ops::SoftmaxCrossEntropyWithLogits(s, bad, bad).size(), 2u);
  EXPECT_EQ(ops::FusedBatchNorm(s, bad, bad, bad, bad, bad, 1e-3f, true).size(), 5u);
  auto d = ops::Dropout(s, bad, 0.5f);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_FALSE(d[0].valid());
}

// Naive pooling: max, or average over the in-bounds window elements.
Tensor NaivePool(const Tensor& in, int64_t k, int64_t stride, bool same, bool max) {
  const int64_t n = in.dim(0), h = in.dim(1), w = in.dim(2), c = in.dim(3);
  Geometry gh = Geo(h, k, stride, 1, same), gw = Geo(w, k, stride, 1, same);
  Tensor out(DType::kFloat, TensorShape({n, gh.out, gw.out, c}));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oy = 0; oy < gh.out; ++oy)
      for (int64_t ox = 0; ox < gw.out; ++ox)
        for (int64_t ch = 0; ch < c; ++ch) {
          double acc = max ? -1e30 : 0;
          int count = 0;
          for (int64_t y = oy * stride - gh.pad; y < oy * stride - gh.pad + k; ++y)
            for (int64_t x = ox * stride - gw.pad; x < ox * stride - gw.pad + k; ++x) {
              if (y < 0 || y >= h || x < 0 || x >= w) continue;
              float v = in.flat<float>()[((b * h + y) * w + x) * c + ch];
              acc = max ? std::max<double>(acc, v) : acc + v;
              ++count;
            }
          out.flat<float>()[((b * gh.out + oy) * gw.out + ox) * c + ch] =
              static_cast<float>(max ? acc : acc / count);
        }
  return out;
}

TEST(PoolTest, MaxAndAvgMatchNaiveWithGradients) {
  struct P {
    int64_t k, stride;
    bool same;
    TensorShape shape;
  };
  for (const P& p :
       {P{2, 2, false, TensorShape({2, 6, 6, 3})}, P{3, 2, true, TensorShape({1, 7, 6, 2})},
        P{3, 1, true, TensorShape({1, 4, 5, 2})}, P{2, 2, true, TensorShape({2, 28, 28, 32})},
        P{2, 2, true, TensorShape({1, 7, 5, 3})}, P{2, 3, false, TensorShape({1, 8, 8, 2})},
        P{2, 2, false, TensorShape({2, 7, 5, 19})}}) {
    for (bool max : {true, false}) {
      SCOPED_TRACE(absl::StrCat("k=", p.k, " stride=", p.stride, " same=", p.same, " max=", max));
      Tensor in = RandomTensor(p.shape, 30);
      Tensor want = NaivePool(in, p.k, p.stride, p.same, max);
      Tensor g = RandomTensor(want.shape(), 31);
      Scope s = Scope::NewRootScope();
      ops::PoolAttrs a{{1, p.k, p.k, 1}, {1, p.stride, p.stride, 1}, p.same ? "SAME" : "VALID"};
      Output x = ops::Const(s, in);
      Output y = max ? ops::MaxPool(s, x, a) : ops::AvgPool(s, x, a);
      auto grads = Gradients(s, {y}, {x}, {ops::Const(s, g)});
      ASSERT_TRUE(grads.ok()) << grads.status();
      // Twice: the second run's buffers come from the allocator's pool, holding the first
      // run's values, so elements a kernel fails to write are not zero by luck.
      MustRun(s, {y, (*grads)[0]});
      auto out = MustRun(s, {y, (*grads)[0]});
      ExpectNear(out[0], Values(want), want.shape(), 1e-5f);
      // Adjoint identity: pooling is linear for avg, piecewise linear (homogeneous) for max.
      double gy = 0, dxx = 0;
      for (int64_t i = 0; i < g.NumElements(); ++i)
        gy += g.flat<float>()[i] * want.flat<float>()[i];
      for (int64_t i = 0; i < in.NumElements(); ++i)
        dxx += out[1].flat<float>()[i] * in.flat<float>()[i];
      EXPECT_NEAR(dxx, gy, 1e-3 * (1 + std::fabs(gy)));
    }
  }
}

// On bfloat16, max pooling and its gradient only compare and copy: the results equal
// the float32 kernels' on the same (bfloat16-representable) values, bit for bit, but
// where overlapping windows add gradients: that sum is the float32 one rounded once.
// The shapes cover full 2x2 windows (the row kernels, also with a row and a column left
// over: VALID, odd sizes), partial ones (SAME, odd sizes), disjoint windows that skip
// elements (stride 3 > 2) and overlapping ones (3x3 stride 2).
TEST(PoolTest, MaxPoolOnBfloat16EqualsFloat32Exactly) {
  struct P {
    int64_t k, stride;
    bool same;
    TensorShape shape;
  };
  for (const P& p :
       {P{2, 2, true, TensorShape({2, 28, 28, 32})}, P{2, 2, true, TensorShape({1, 7, 5, 3})},
        P{2, 3, false, TensorShape({1, 8, 8, 2})}, P{3, 2, true, TensorShape({1, 7, 6, 2})},
        P{2, 2, false, TensorShape({2, 7, 5, 19})}}) {
    SCOPED_TRACE(absl::StrCat("k=", p.k, " stride=", p.stride, " same=", p.same));
    Scope s = Scope::NewRootScope();
    // Inputs rounded to bfloat16 first, so both paths see the same values.
    Output x32 = ops::Cast(
        s, ops::Cast(s, ops::Const(s, RandomTensor(p.shape, 32)), DType::kBFloat16), DType::kFloat);
    ops::PoolAttrs a{{1, p.k, p.k, 1}, {1, p.stride, p.stride, 1}, p.same ? "SAME" : "VALID"};
    Output y32 = ops::MaxPool(s, x32, a);
    Output y16 = ops::MaxPool(s, ops::Cast(s, x32, DType::kBFloat16), a);
    auto shape = MustRun(s, {y32})[0].shape();
    Output g32 = ops::Cast(
        s, ops::Cast(s, ops::Const(s, RandomTensor(shape, 33)), DType::kBFloat16), DType::kFloat);
    auto d32 = Gradients(s, {y32}, {x32}, {g32});
    auto d16 = Gradients(s, {y16}, {x32}, {ops::Cast(s, g32, DType::kBFloat16)});
    ASSERT_TRUE(d32.ok() && d16.ok());
    Output rounded = ops::Cast(s, ops::Cast(s, (*d32)[0], DType::kBFloat16), DType::kFloat);
    auto out = MustRun(s, {y32, ops::Cast(s, y16, DType::kFloat), rounded, (*d16)[0]});
    ASSERT_EQ(out[1].dtype(), DType::kFloat);
    for (int pair : {0, 2}) {
      ASSERT_EQ(out[pair].NumElements(), out[pair + 1].NumElements());
      for (int64_t i = 0; i < out[pair].NumElements(); ++i) {
        ASSERT_EQ(out[pair].flat<float>()[i], out[pair + 1].flat<float>()[i])
            << (pair == 0 ? "MaxPool" : "MaxPoolGrad") << " element " << i;
      }
    }
  }
}

TEST(PoolTest, MaxPoolGradTiesGoToTheFirstMaximum) {
  struct P {
    int64_t k, stride;
    TensorShape shape;
    std::vector<float> want;
  };
  for (const P& p :
       {P{2, 2, TensorShape({1, 4, 4, 1}), {1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0}},
        P{2, 1, TensorShape({1, 3, 3, 1}), {1, 1, 0, 1, 1, 0, 0, 0, 0}}}) {
    Scope s = Scope::NewRootScope();
    Output x = ops::Const(s, Tensor::Filled(DType::kFloat, p.shape, 3.0));
    Output y = ops::MaxPool(s, x, {{1, p.k, p.k, 1}, {1, p.stride, p.stride, 1}, "VALID"});
    auto grads = Gradients(s, {y}, {x});
    ASSERT_TRUE(grads.ok()) << grads.status();
    auto out = MustRun(s, {(*grads)[0]});
    ExpectNear(out[0], p.want, p.shape);
  }
}

// ---------------------------------------------------------------------------------------
// Batch normalisation and dropout.

TEST(FusedBatchNormTest, TrainingUsesBatchStatistics) {
  Scope s = Scope::NewRootScope();
  Tensor x = RandomTensor(TensorShape({2, 3, 2, 2}), 40, -2, 3);
  Output empty = ops::Const(s, Tensor(DType::kFloat, TensorShape({0})));
  auto bn =
      ops::FusedBatchNorm(s, ops::Const(s, x), ops::Const(s, {2, 0.5f}, TensorShape({2})),
                          ops::Const(s, {1, -1}, TensorShape({2})), empty, empty, 1e-3f, true);
  auto out = MustRun(s, {bn[0], bn[1], bn[2], bn[3], bn[4]});
  const int64_t m = 12;
  std::vector<float> mean(2, 0), var(2, 0), y(24);
  for (int64_t i = 0; i < 24; ++i) mean[i % 2] += x.flat<float>()[i] / m;
  for (int64_t i = 0; i < 24; ++i) var[i % 2] += std::pow(x.flat<float>()[i] - mean[i % 2], 2) / m;
  const float scale[] = {2, 0.5f}, offset[] = {1, -1};
  for (int64_t i = 0; i < 24; ++i) {
    y[i] = (x.flat<float>()[i] - mean[i % 2]) / std::sqrt(var[i % 2] + 1e-3f) * scale[i % 2] +
           offset[i % 2];
  }
  ExpectNear(out[0], y, x.shape());
  ExpectNear(out[1], mean, TensorShape({2}));
  ExpectNear(out[2], {var[0] * m / (m - 1), var[1] * m / (m - 1)}, TensorShape({2}));
  ExpectNear(out[3], mean, TensorShape({2}));
  ExpectNear(out[4], {1 / std::sqrt(var[0] + 1e-3f), 1 / std::sqrt(var[1] + 1e-3f)},
             TensorShape({2}));
}

TEST(FusedBatchNormTest, InferenceUsesGivenStatistics) {
  Scope s = Scope::NewRootScope();
  auto bn = ops::FusedBatchNorm(
      s, ops::Const(s, {1, 2, 3, 4}, TensorShape({2, 2})), ops::Const(s, {1, 2}, TensorShape({2})),
      ops::Const(s, {0, 1}, TensorShape({2})), ops::Const(s, {1, 1}, TensorShape({2})),
      ops::Const(s, {4, 0.25f}, TensorShape({2})), 0.0f, false);
  auto out = MustRun(s, {bn[0], bn[1], bn[2]});
  ExpectNear(out[0], {0, 1 + 2 * 1 / 0.5f, 1, 1 + 2 * 3 / 0.5f}, TensorShape({2, 2}));
  ExpectNear(out[1], {1, 1}, TensorShape({2}));
  ExpectNear(out[2], {4, 0.25f}, TensorShape({2}));
}

TEST(FusedBatchNormTest, WrongScaleSizeIsAnError) {
  Scope s = Scope::NewRootScope();
  Output empty = ops::Const(s, Tensor(DType::kFloat, TensorShape({0})));
  ops::FusedBatchNorm(s, ops::Placeholder(s, DType::kFloat, PartialShape({-1, 4, 4, 3})),
                      ops::Const(s, {1, 2}, TensorShape({2})),
                      ops::Const(s, {1, 2}, TensorShape({2})), empty, empty, 1e-3f, true);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("3 elements"));
}

TEST(DropoutTest, SeededMaskIsScaledBernoulliAndGradientUsesIt) {
  Tensor xv = RandomTensor(TensorShape({64, 100}), 50);
  std::vector<std::vector<float>> masks;
  for (int session = 0; session < 2; ++session) {
    Scope s = Scope::NewRootScope();
    Output x = ops::Const(s, xv);
    auto d = ops::Dropout(s, x, 0.25f, /*seed=*/42);
    Tensor gv = RandomTensor(xv.shape(), 51);
    auto grads = Gradients(s, {d[0]}, {x}, {ops::Const(s, gv)});
    ASSERT_TRUE(grads.ok()) << grads.status();
    proto::GraphDef def;
    s.graph()->ToGraphDef(&def);
    auto sess = NewDirectSession(def);
    ASSERT_TRUE(sess.ok()) << sess.status();
    const std::vector<std::string> fetches = {d[0].name(), d[1].name(), (*grads)[0].name()};
    auto run1 = (*sess)->Run({}, fetches);
    auto run2 = (*sess)->Run({}, fetches);
    ASSERT_TRUE(run1.ok() && run2.ok());
    const Tensor& y = (*run1)[0];
    const Tensor& mask = (*run1)[1];
    const Tensor& dx = (*run1)[2];
    int64_t kept = 0;
    for (int64_t i = 0; i < mask.NumElements(); ++i) {
      float m = mask.flat<float>()[i];
      ASSERT_TRUE(m == 0.0f || std::fabs(m - 1 / 0.75f) < 1e-6f) << m;
      kept += m != 0;
      ASSERT_FLOAT_EQ(y.flat<float>()[i], xv.flat<float>()[i] * m);
      ASSERT_FLOAT_EQ(dx.flat<float>()[i], gv.flat<float>()[i] * m);
    }
    EXPECT_NEAR(static_cast<double>(kept) / mask.NumElements(), 0.75, 0.03);
    EXPECT_NE(Values(mask), Values((*run2)[1])) << "the stream must advance between runs";
    masks.push_back(Values(mask));
  }
  EXPECT_EQ(masks[0], masks[1]) << "same seed, same first mask";
}

TEST(DropoutTest, BadRateIsAnError) {
  Scope s = Scope::NewRootScope();
  ops::Dropout(s, ops::Const(s, 1.0f), 1.0f);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("rate"));
}

}  // namespace
}  // namespace tandem

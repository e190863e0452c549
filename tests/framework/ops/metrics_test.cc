// tests/framework/ops/metrics_test.cc
//
// Streaming metrics through DirectSession: every metric is fed two or three batches
// through placeholders, and after each batch update_op (and afterwards value) must
// equal a plain C++ reference over everything fed so far. Also: weights, a metric
// without data is 0, re-initialising the local variables resets it, the variables'
// collections and name scopes, and the errors recorded in the scope.
#include "framework/ops/metrics.h"

#include <cmath>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "framework/ops/array_ops.h"
#include "framework/ops/state_ops.h"
#include "framework/runtime/session.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

Tensor Floats(const std::vector<float>& v, const TensorShape& shape) {
  return Tensor::FromVector<float>(v, shape);
}
Tensor Floats(const std::vector<float>& v) {
  return Floats(v, TensorShape({static_cast<int64_t>(v.size())}));
}
Tensor Ints64(const std::vector<int64_t>& v) {
  return Tensor::FromVector<int64_t>(v, TensorShape({static_cast<int64_t>(v.size())}));
}
Tensor Ints32(const std::vector<int32_t>& v) {
  return Tensor::FromVector<int32_t>(v, TensorShape({static_cast<int64_t>(v.size())}));
}

// A session on the graph of `root` as built so far, local variables initialised.
class MetricSession {
 public:
  explicit MetricSession(const Scope& root) {
    Node* init = ops::LocalVariablesInitializer(root);
    EXPECT_TRUE(root.ok()) << root.status();
    if (!root.ok()) return;
    init_ = init->name();
    proto::GraphDef def;
    root.graph()->ToGraphDef(&def);
    auto session = NewDirectSession(def);
    EXPECT_TRUE(session.ok()) << session.status();
    if (!session.ok()) return;
    session_ = std::move(*session);
    Reset();
  }
  bool ok() const { return session_ != nullptr; }
  void Reset() {
    auto s = session_->Run({}, {}, {init_});
    EXPECT_TRUE(s.ok()) << s.status();
  }
  // Fetches a float32 scalar; NaN (with a failure) on error.
  float Fetch(const Output& o, const FeedMap& feeds = {}) {
    auto out = session_->Run(feeds, {o.name()});
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return NAN;
    EXPECT_EQ((*out)[0].dtype(), DType::kFloat);
    EXPECT_EQ((*out)[0].NumElements(), 1);
    return (*out)[0].data<float>()[0];
  }

 private:
  std::string init_;
  std::unique_ptr<Session> session_;
};

// Running weighted sums of a reference implementation.
struct RefMean {
  double total = 0, count = 0;
  void Add(double v, double w = 1) {
    total += v * w;
    count += w;
  }
  double Value() const { return count == 0 ? 0 : total / count; }
};

// ---- Accuracy ----

TEST(MetricsTest, AccuracyOverThreeBatches) {
  Scope root = Scope::NewRootScope();
  Output labels = ops::Placeholder(root.WithOpName("labels"), DType::kInt64, PartialShape({-1}));
  Output preds = ops::Placeholder(root.WithOpName("preds"), DType::kInt64, PartialShape({-1}));
  ops::metrics::Metric acc = ops::metrics::Accuracy(root, labels, preds);
  ASSERT_TRUE(root.ok()) << root.status();
  MetricSession session(root);
  ASSERT_TRUE(session.ok());
  EXPECT_EQ(session.Fetch(acc.value), 0.0f);  // No data yet.

  const std::vector<std::vector<int64_t>> l = {{1, 2, 3, 4}, {0, 0}, {5, 6, 7}};
  const std::vector<std::vector<int64_t>> p = {{1, 0, 3, 0}, {0, 1}, {5, 6, 7}};
  RefMean ref;
  for (size_t b = 0; b < l.size(); ++b) {
    for (size_t i = 0; i < l[b].size(); ++i) ref.Add(l[b][i] == p[b][i] ? 1 : 0);
    float got =
        session.Fetch(acc.update_op, {{"labels:0", Ints64(l[b])}, {"preds:0", Ints64(p[b])}});
    EXPECT_NEAR(got, ref.Value(), 1e-6) << "batch " << b;
  }
  EXPECT_NEAR(session.Fetch(acc.value), 6.0 / 9.0, 1e-6);
  session.Reset();
  EXPECT_EQ(session.Fetch(acc.value), 0.0f);
}

TEST(MetricsTest, WeightedAccuracyComparesFloatsAfterCasting) {
  Scope root = Scope::NewRootScope();
  Output labels = ops::Placeholder(root.WithOpName("labels"), DType::kInt32, PartialShape({-1}));
  Output preds = ops::Placeholder(root.WithOpName("preds"), DType::kFloat, PartialShape({-1}));
  Output w = ops::Placeholder(root.WithOpName("w"), DType::kFloat, PartialShape({-1}));
  ops::metrics::Metric acc = ops::metrics::Accuracy(root, labels, preds, w);
  ASSERT_TRUE(root.ok()) << root.status();
  MetricSession session(root);
  ASSERT_TRUE(session.ok());
  const std::vector<std::vector<int32_t>> l = {{1, 2, 3}, {4, 5}};
  const std::vector<std::vector<float>> p = {{1.0f, 2.5f, 3.0f}, {0.0f, 5.0f}};
  const std::vector<std::vector<float>> wt = {{0.5f, 2.0f, 1.0f}, {3.0f, 0.0f}};
  RefMean ref;
  for (size_t b = 0; b < l.size(); ++b) {
    for (size_t i = 0; i < l[b].size(); ++i) {
      ref.Add(static_cast<float>(l[b][i]) == p[b][i] ? 1 : 0, wt[b][i]);
    }
    float got = session.Fetch(
        acc.update_op,
        {{"labels:0", Ints32(l[b])}, {"preds:0", Floats(p[b])}, {"w:0", Floats(wt[b])}});
    EXPECT_NEAR(got, ref.Value(), 1e-6) << "batch " << b;
  }
  EXPECT_NEAR(session.Fetch(acc.value), 1.5 / 6.5, 1e-6);
}

TEST(MetricsTest, ZeroTotalWeightIsZeroNotNan) {
  Scope root = Scope::NewRootScope();
  Output l = ops::Const(root, {1, 2}, TensorShape({2}));
  Output w = ops::Const(root, {0, 0}, TensorShape({2}));
  ops::metrics::Metric acc = ops::metrics::Accuracy(root, l, l, w);
  ops::metrics::Metric mean = ops::metrics::Mean(root, l, w);
  ASSERT_TRUE(root.ok()) << root.status();
  MetricSession session(root);
  ASSERT_TRUE(session.ok());
  EXPECT_EQ(session.Fetch(acc.update_op), 0.0f);
  EXPECT_EQ(session.Fetch(mean.update_op), 0.0f);
  EXPECT_EQ(session.Fetch(mean.value), 0.0f);
}

// ---- Mean ----

TEST(MetricsTest, MeanWithRowWeightsBroadcastOverColumns) {
  Scope root = Scope::NewRootScope();
  Output v = ops::Placeholder(root.WithOpName("v"), DType::kFloat, PartialShape({-1, 2}));
  Output w = ops::Placeholder(root.WithOpName("w"), DType::kFloat, PartialShape({-1, 1}));
  ops::metrics::Metric mean = ops::metrics::Mean(root, v, w);
  ops::metrics::Metric plain = ops::metrics::Mean(root, v);
  ASSERT_TRUE(root.ok()) << root.status();
  MetricSession session(root);
  ASSERT_TRUE(session.ok());
  const std::vector<std::vector<float>> vals = {{1, 2, 3, 4}, {-1, 5}, {10, 20, 30, 40, 50, 60}};
  const std::vector<std::vector<float>> wts = {{1, 3}, {0.5}, {0, 1, 2}};
  RefMean ref, ref_plain;
  for (size_t b = 0; b < vals.size(); ++b) {
    const int64_t rows = static_cast<int64_t>(wts[b].size());
    for (int64_t r = 0; r < rows; ++r) {
      for (int c = 0; c < 2; ++c) {
        ref.Add(vals[b][r * 2 + c], wts[b][r]);
        ref_plain.Add(vals[b][r * 2 + c]);
      }
    }
    FeedMap feeds = {{"v:0", Floats(vals[b], TensorShape({rows, 2}))},
                     {"w:0", Floats(wts[b], TensorShape({rows, 1}))}};
    EXPECT_NEAR(session.Fetch(mean.update_op, feeds), ref.Value(), 1e-5) << "batch " << b;
    EXPECT_NEAR(session.Fetch(plain.update_op, feeds), ref_plain.Value(), 1e-5) << "batch " << b;
  }
  EXPECT_NEAR(session.Fetch(mean.value), ref.Value(), 1e-5);
  EXPECT_NEAR(session.Fetch(plain.value), ref_plain.Value(), 1e-5);
}

// ---- Precision and recall ----

TEST(MetricsTest, PrecisionAndRecallTreatNonZeroAsPositive) {
  Scope root = Scope::NewRootScope();
  Output labels = ops::Placeholder(root.WithOpName("labels"), DType::kInt32, PartialShape({-1}));
  Output preds = ops::Placeholder(root.WithOpName("preds"), DType::kFloat, PartialShape({-1}));
  Output w = ops::Placeholder(root.WithOpName("w"), DType::kFloat, PartialShape({-1}));
  auto precision = ops::metrics::Precision(root, labels, preds);
  auto recall = ops::metrics::Recall(root, labels, preds);
  auto wprecision = ops::metrics::Precision(root, labels, preds, w);
  auto wrecall = ops::metrics::Recall(root, labels, preds, w);
  ASSERT_TRUE(root.ok()) << root.status();
  MetricSession session(root);
  ASSERT_TRUE(session.ok());
  const std::vector<std::vector<int32_t>> l = {{1, 0, 1, 1}, {0, 0, 1}, {2, 0}};
  const std::vector<std::vector<float>> p = {{1, 1, 0, 0.3f}, {0, -1, 1}, {0, 0}};
  const std::vector<std::vector<float>> wt = {{1, 2, 3, 0.5f}, {1, 4, 2}, {7, 1}};
  double tp = 0, fp = 0, fn = 0, wtp = 0, wfp = 0, wfn = 0;
  auto div = [](double a, double b) { return b == 0 ? 0.0 : a / b; };
  for (size_t b = 0; b < l.size(); ++b) {
    for (size_t i = 0; i < l[b].size(); ++i) {
      const bool lp = l[b][i] != 0, pp = p[b][i] != 0;
      tp += lp && pp;
      fp += !lp && pp;
      fn += lp && !pp;
      wtp += (lp && pp) * wt[b][i];
      wfp += (!lp && pp) * wt[b][i];
      wfn += (lp && !pp) * wt[b][i];
    }
    FeedMap feeds = {{"labels:0", Ints32(l[b])}, {"preds:0", Floats(p[b])}, {"w:0", Floats(wt[b])}};
    EXPECT_NEAR(session.Fetch(precision.update_op, feeds), div(tp, tp + fp), 1e-6) << b;
    EXPECT_NEAR(session.Fetch(recall.update_op, feeds), div(tp, tp + fn), 1e-6) << b;
    EXPECT_NEAR(session.Fetch(wprecision.update_op, feeds), div(wtp, wtp + wfp), 1e-6) << b;
    EXPECT_NEAR(session.Fetch(wrecall.update_op, feeds), div(wtp, wtp + wfn), 1e-6) << b;
  }
  EXPECT_NEAR(session.Fetch(precision.value), 3.0 / 5.0, 1e-6);  // tp 3, fp 2.
  EXPECT_NEAR(session.Fetch(recall.value), 3.0 / 5.0, 1e-6);     // tp 3, fn 2.
  EXPECT_NEAR(session.Fetch(wprecision.value), div(wtp, wtp + wfp), 1e-6);
  EXPECT_NEAR(session.Fetch(wrecall.value), div(wtp, wtp + wfn), 1e-6);
}

TEST(MetricsTest, PrecisionWithoutPositivePredictionsIsZero) {
  Scope root = Scope::NewRootScope();
  Output l = ops::Const(root, Tensor::FromVector<bool>({true, false}, TensorShape({2})));
  Output p = ops::Const(root, Tensor::FromVector<bool>({false, false}, TensorShape({2})));
  auto precision = ops::metrics::Precision(root, l, p);
  auto recall = ops::metrics::Recall(root, l, p);
  ASSERT_TRUE(root.ok()) << root.status();
  MetricSession session(root);
  ASSERT_TRUE(session.ok());
  EXPECT_EQ(session.Fetch(precision.update_op), 0.0f);
  EXPECT_EQ(session.Fetch(recall.update_op), 0.0f);  // tp 0, fn 1.
}

// ---- AUC ----

// TensorFlow's tf.metrics.auc (trapezoidal), brute force over the same thresholds.
double ReferenceAuc(const std::vector<float>& labels, const std::vector<float>& preds,
                    const std::vector<float>& weights, int n, ops::metrics::Curve curve) {
  std::vector<float> thresholds(n);
  for (int i = 1; i + 1 < n; ++i) thresholds[i] = static_cast<float>(i) / static_cast<float>(n - 1);
  thresholds[0] = -1e-7f;
  thresholds[n - 1] = 1.0f + 1e-7f;
  std::vector<double> x(n), y(n);
  const double eps = 1e-6;
  for (int t = 0; t < n; ++t) {
    double tp = 0, fp = 0, tn = 0, fn = 0;
    for (size_t i = 0; i < preds.size(); ++i) {
      const double w = weights.empty() ? 1.0 : weights[i];
      const bool pos = preds[i] > thresholds[t];
      const bool label = labels[i] != 0;
      tp += (label && pos) * w;
      fp += (!label && pos) * w;
      tn += (!label && !pos) * w;
      fn += (label && !pos) * w;
    }
    const double recall = (tp + eps) / (tp + fn + eps);
    if (curve == ops::metrics::Curve::kRoc) {
      x[t] = fp / (fp + tn + eps);
      y[t] = recall;
    } else {
      x[t] = recall;
      y[t] = (tp + eps) / (tp + fp + eps);
    }
  }
  double area = 0;
  for (int t = 0; t + 1 < n; ++t) area += (x[t] - x[t + 1]) * (y[t] + y[t + 1]) / 2;
  return area;
}

struct AucCase {
  const char* label;
  int num_thresholds;
  ops::metrics::Curve curve;
  bool weighted;
};

void PrintTo(const AucCase& c, std::ostream* os) { *os << c.label; }

class AucTest : public ::testing::TestWithParam<AucCase> {};

TEST_P(AucTest, MatchesBruteForceTrapezoidAfterEachBatch) {
  const AucCase& c = GetParam();
  Scope root = Scope::NewRootScope();
  Output labels = ops::Placeholder(root.WithOpName("labels"), DType::kFloat, PartialShape({-1}));
  Output preds = ops::Placeholder(root.WithOpName("preds"), DType::kFloat, PartialShape({-1}));
  Output w = c.weighted ? ops::Placeholder(root.WithOpName("w"), DType::kFloat, PartialShape({-1}))
                        : Output();
  auto auc = ops::metrics::Auc(root, labels, preds, c.num_thresholds, c.curve, w);
  ASSERT_TRUE(root.ok()) << root.status();
  MetricSession session(root);
  ASSERT_TRUE(session.ok());
  EXPECT_EQ(session.Fetch(auc.value), 0.0f);
  // Includes the edges 0 and 1 and 0.5 (a threshold when n is odd: not above it).
  const std::vector<std::vector<float>> l = {{1, 0, 1, 0, 1}, {0, 0, 1}, {1, 0, 0, 1}};
  const std::vector<std::vector<float>> p = {
      {0.9f, 0.1f, 0.5f, 0.5f, 1.0f}, {0.0f, 0.73f, 0.41f}, {0.66f, 0.2f, 0.95f, 0.05f}};
  const std::vector<std::vector<float>> wt = {{1, 2, 0.5f, 1, 3}, {1, 1, 2}, {0.25f, 1, 1, 4}};
  std::vector<float> all_l, all_p, all_w;
  for (size_t b = 0; b < l.size(); ++b) {
    all_l.insert(all_l.end(), l[b].begin(), l[b].end());
    all_p.insert(all_p.end(), p[b].begin(), p[b].end());
    all_w.insert(all_w.end(), wt[b].begin(), wt[b].end());
    FeedMap feeds = {{"labels:0", Floats(l[b])}, {"preds:0", Floats(p[b])}};
    if (c.weighted) feeds.push_back({"w:0", Floats(wt[b])});
    const double want = ReferenceAuc(all_l, all_p, c.weighted ? all_w : std::vector<float>{},
                                     c.num_thresholds, c.curve);
    EXPECT_NEAR(session.Fetch(auc.update_op, feeds), want, 1e-5) << "batch " << b;
  }
  const double want = ReferenceAuc(all_l, all_p, c.weighted ? all_w : std::vector<float>{},
                                   c.num_thresholds, c.curve);
  EXPECT_GT(want, 0.1);  // A non-trivial curve.
  EXPECT_NEAR(session.Fetch(auc.value), want, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Curves, AucTest,
    ::testing::Values(AucCase{"roc_200", 200, ops::metrics::Curve::kRoc, false},
                      AucCase{"roc_5", 5, ops::metrics::Curve::kRoc, false},
                      AucCase{"roc_3_w", 3, ops::metrics::Curve::kRoc, true},
                      AucCase{"roc_2", 2, ops::metrics::Curve::kRoc, false},
                      AucCase{"pr_200", 200, ops::metrics::Curve::kPr, false},
                      AucCase{"pr_5_w", 5, ops::metrics::Curve::kPr, true}),
    [](const ::testing::TestParamInfo<AucCase>& info) { return std::string(info.param.label); });

TEST(MetricsTest, RocAucWithFineThresholdsIsTheRankStatistic) {
  // With no two predictions between adjacent thresholds, the trapezoid ROC area is
  // P(score of a positive > score of a negative).
  Scope root = Scope::NewRootScope();
  const std::vector<float> l = {1, 0, 1, 1, 0, 0, 1, 0};
  const std::vector<float> p = {0.91f, 0.12f, 0.47f, 0.78f, 0.55f, 0.33f, 0.64f, 0.81f};
  auto auc =
      ops::metrics::Auc(root, ops::Const(root, Floats(l)), ops::Const(root, Floats(p)), 1000);
  ASSERT_TRUE(root.ok()) << root.status();
  MetricSession session(root);
  ASSERT_TRUE(session.ok());
  double pairs = 0, wins = 0;
  for (size_t i = 0; i < l.size(); ++i) {
    for (size_t j = 0; j < l.size(); ++j) {
      if (l[i] == 1 && l[j] == 0) {
        pairs += 1;
        wins += p[i] > p[j];
      }
    }
  }
  EXPECT_NEAR(session.Fetch(auc.update_op), wins / pairs, 1e-4);
}

// ---- Mean squared error ----

TEST(MetricsTest, MeanSquaredErrorWeighted) {
  Scope root = Scope::NewRootScope();
  Output labels = ops::Placeholder(root.WithOpName("labels"), DType::kFloat, PartialShape({-1}));
  Output preds = ops::Placeholder(root.WithOpName("preds"), DType::kFloat, PartialShape({-1}));
  Output w = ops::Placeholder(root.WithOpName("w"), DType::kFloat, PartialShape({-1}));
  auto mse = ops::metrics::MeanSquaredError(root, labels, preds);
  auto wmse = ops::metrics::MeanSquaredError(root, labels, preds, w);
  ASSERT_TRUE(root.ok()) << root.status();
  MetricSession session(root);
  ASSERT_TRUE(session.ok());
  EXPECT_EQ(session.Fetch(mse.value), 0.0f);
  const std::vector<std::vector<float>> l = {{1, 2, 3}, {0.5f, -1}};
  const std::vector<std::vector<float>> p = {{1.5f, 2, 0}, {0.5f, 1}};
  const std::vector<std::vector<float>> wt = {{2, 1, 0.5f}, {1, 3}};
  RefMean ref, wref;
  for (size_t b = 0; b < l.size(); ++b) {
    for (size_t i = 0; i < l[b].size(); ++i) {
      const double d = l[b][i] - p[b][i];
      ref.Add(d * d);
      wref.Add(d * d, wt[b][i]);
    }
    FeedMap feeds = {{"labels:0", Floats(l[b])}, {"preds:0", Floats(p[b])}, {"w:0", Floats(wt[b])}};
    EXPECT_NEAR(session.Fetch(mse.update_op, feeds), ref.Value(), 1e-5) << b;
    EXPECT_NEAR(session.Fetch(wmse.update_op, feeds), wref.Value(), 1e-5) << b;
  }
  EXPECT_NEAR(session.Fetch(mse.value), (0.25 + 0 + 9 + 0 + 4) / 5, 1e-5);
  EXPECT_NEAR(session.Fetch(wmse.value), wref.Value(), 1e-5);
}

// ---- Top-k accuracy ----

// tf.nn.in_top_k: fewer than k scores strictly above the label's; out of range: out.
bool ReferenceInTopK(const std::vector<float>& row, int64_t label, int k) {
  if (label < 0 || label >= static_cast<int64_t>(row.size())) return false;
  int above = 0;
  for (float s : row) above += s > row[label];
  return above < k;
}

TEST(MetricsTest, TopKAccuracyCountsTiesAsIn) {
  Scope root = Scope::NewRootScope();
  Output labels = ops::Placeholder(root.WithOpName("labels"), DType::kInt64, PartialShape({-1}));
  Output scores = ops::Placeholder(root.WithOpName("scores"), DType::kFloat, PartialShape({-1, 4}));
  // An unknown class count takes the run-time depth path.
  Output dyn_scores =
      ops::Placeholder(root.WithOpName("dyn"), DType::kFloat, PartialShape({-1, -1}));
  auto top1 = ops::metrics::TopKAccuracy(root, labels, scores, 1);
  auto top2 = ops::metrics::TopKAccuracy(root, labels, scores, 2);
  auto top2_dyn = ops::metrics::TopKAccuracy(root, labels, dyn_scores, 2);
  ASSERT_TRUE(root.ok()) << root.status();
  MetricSession session(root);
  ASSERT_TRUE(session.ok());
  EXPECT_EQ(session.Fetch(top2.value), 0.0f);
  const std::vector<std::vector<float>> s = {
      {0.1f, 0.7f, 0.2f, 0.0f, /**/ 0.3f, 0.3f, 0.3f, 0.1f, /**/ 0.5f, 0.1f, 0.2f, 0.2f},
      {1, 2, 3, 4, /**/ 4, 3, 2, 1},
      {0, 0, 0, 0, /**/ 0.2f, 0.9f, 0.4f, 0.6f}};
  const std::vector<std::vector<int64_t>> l = {{1, 2, 2}, {2, 7}, {3, 2}};  // 7: out of range.
  RefMean ref1, ref2;
  for (size_t b = 0; b < l.size(); ++b) {
    const int64_t rows = static_cast<int64_t>(l[b].size());
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> row(s[b].begin() + r * 4, s[b].begin() + (r + 1) * 4);
      ref1.Add(ReferenceInTopK(row, l[b][r], 1));
      ref2.Add(ReferenceInTopK(row, l[b][r], 2));
    }
    Tensor st = Floats(s[b], TensorShape({rows, 4}));
    FeedMap feeds = {{"labels:0", Ints64(l[b])}, {"scores:0", st}, {"dyn:0", st}};
    EXPECT_NEAR(session.Fetch(top1.update_op, feeds), ref1.Value(), 1e-6) << b;
    EXPECT_NEAR(session.Fetch(top2.update_op, feeds), ref2.Value(), 1e-6) << b;
    EXPECT_NEAR(session.Fetch(top2_dyn.update_op, feeds), ref2.Value(), 1e-6) << b;
  }
  // By hand: top-1 hits rows 0, 1 (a three-way tie) and 5 (all tied); top-2 also rows
  // 2 and 3; row 4's label is out of range and row 6 has two scores above its label.
  EXPECT_NEAR(session.Fetch(top1.value), 3.0 / 7.0, 1e-6);
  EXPECT_NEAR(session.Fetch(top2.value), 5.0 / 7.0, 1e-6);
  EXPECT_NEAR(session.Fetch(top2_dyn.value), 5.0 / 7.0, 1e-6);
}

TEST(MetricsTest, AnEmptyBatchChangesNothing) {
  Scope root = Scope::NewRootScope();
  Output labels = ops::Placeholder(root.WithOpName("labels"), DType::kInt32, PartialShape({-1}));
  Output probs = ops::Placeholder(root.WithOpName("probs"), DType::kFloat, PartialShape({-1}));
  Output scores = ops::Placeholder(root.WithOpName("scores"), DType::kFloat, PartialShape({-1, 2}));
  auto acc = ops::metrics::Accuracy(root, labels, probs);
  auto auc = ops::metrics::Auc(root, labels, probs, 4);
  auto top1 = ops::metrics::TopKAccuracy(root, labels, scores, 1);
  ASSERT_TRUE(root.ok()) << root.status();
  MetricSession session(root);
  ASSERT_TRUE(session.ok());
  FeedMap empty = {{"labels:0", Ints32({})},
                   {"probs:0", Floats({})},
                   {"scores:0", Floats({}, TensorShape({0, 2}))}};
  EXPECT_EQ(session.Fetch(acc.update_op, empty), 0.0f);
  EXPECT_EQ(session.Fetch(auc.update_op, empty), 0.0f);
  EXPECT_EQ(session.Fetch(top1.update_op, empty), 0.0f);
  FeedMap batch = {{"labels:0", Ints32({1, 0})},
                   {"probs:0", Floats({1.0f, 0.8f})},
                   {"scores:0", Floats({0, 1, 1, 0}, TensorShape({2, 2}))}};
  EXPECT_NEAR(session.Fetch(acc.update_op, batch), 0.5, 1e-6);
  const float auc_value = session.Fetch(auc.update_op, batch);
  EXPECT_NEAR(session.Fetch(top1.update_op, batch), 1.0, 1e-6);
  EXPECT_NEAR(session.Fetch(acc.update_op, empty), 0.5, 1e-6);
  EXPECT_EQ(session.Fetch(auc.update_op, empty), auc_value);
  EXPECT_NEAR(session.Fetch(top1.update_op, empty), 1.0, 1e-6);
}

// ---- Variables, names, errors ----

TEST(MetricsTest, TotalsAreLocalMetricVariablesUnderTheMetricScope) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Const(root, {1, 2}, TensorShape({2}));
  auto a = ops::metrics::Accuracy(root, x, x);
  auto a2 = ops::metrics::Accuracy(root, x, x);
  auto auc = ops::metrics::Auc(root, x, x, 10);
  ASSERT_TRUE(root.ok()) << root.status();
  const Graph& g = *root.graph();
  const auto& local = g.GetCollection(ops::kLocalVariables);
  const auto& metric = g.GetCollection(ops::metrics::kMetricVariables);
  EXPECT_THAT(g.GetCollection(ops::kGlobalVariables), IsEmpty());
  EXPECT_THAT(g.GetCollection(ops::kTrainableVariables), IsEmpty());
  EXPECT_EQ(local, metric);
  EXPECT_THAT(local, Contains("accuracy/total"));
  EXPECT_THAT(local, Contains("accuracy/count"));
  EXPECT_THAT(local, Contains("accuracy_1/total"));
  EXPECT_THAT(local, Contains("auc/true_positives"));
  EXPECT_EQ(local.size(), 8u);
  EXPECT_THAT(a.value.node->name(), StartsWith("accuracy/"));
  EXPECT_THAT(a.update_op.node->name(), StartsWith("accuracy/"));
  EXPECT_THAT(a2.value.node->name(), StartsWith("accuracy_1/"));
  EXPECT_THAT(auc.update_op.node->name(), StartsWith("auc/"));
  for (const Output& o : {a.value, a.update_op, auc.value, auc.update_op}) {
    EXPECT_EQ(o.dtype(), DType::kFloat);
    EXPECT_EQ(o.shape(), PartialShape({}));
  }
  auto vars = ops::VariablesInCollection(root.graph(), ops::metrics::kMetricVariables);
  ASSERT_TRUE(vars.ok()) << vars.status();
  for (const auto& v : *vars) EXPECT_EQ(v.dtype(), DType::kFloat) << v.name();
}

TEST(MetricsTest, MismatchedShapesAreRecordedInTheScope) {
  Scope root = Scope::NewRootScope();
  auto m = ops::metrics::Accuracy(root, ops::Const(root, {1, 2, 3}, TensorShape({3})),
                                  ops::Const(root, {1, 2, 3, 4}, TensorShape({4})));
  EXPECT_FALSE(m.value.valid());
  EXPECT_FALSE(m.update_op.valid());
  EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(root.status().message(), HasSubstr("accuracy"));
  EXPECT_THAT(root.status().message(), HasSubstr("[3]"));
  EXPECT_THAT(root.status().message(), HasSubstr("[4]"));
}

TEST(MetricsTest, OtherBuildErrors) {
  struct Case {
    const char* want;
    std::function<ops::metrics::Metric(const Scope&)> build;
  };
  const std::vector<Case> cases = {
      {"k must be >= 1",
       [](const Scope& s) {
         return ops::metrics::TopKAccuracy(s, ops::Const(s, Ints32({0})),
                                           ops::Const(s, Floats({1, 2}, TensorShape({1, 2}))), 0);
       }},
      {"int32 or int64",
       [](const Scope& s) {
         return ops::metrics::TopKAccuracy(s, ops::Const(s, Floats({0})),
                                           ops::Const(s, Floats({1, 2}, TensorShape({1, 2}))), 1);
       }},
      {"[N, C]",
       [](const Scope& s) {
         return ops::metrics::TopKAccuracy(s, ops::Const(s, Ints32({0, 1})),
                                           ops::Const(s, Floats({1, 2}, TensorShape({1, 2}))), 1);
       }},
      {"num_thresholds must be >= 2",
       [](const Scope& s) {
         Output x = ops::Const(s, Floats({0.5f}));
         return ops::metrics::Auc(s, x, x, 1);
       }},
      {"weights of shape [3]",
       [](const Scope& s) {
         Output x = ops::Const(s, Floats({1, 2}));
         return ops::metrics::Mean(s, x, ops::Const(s, Floats({1, 1, 1})));
       }},
      {"resource",
       [](const Scope& s) {
         ops::Variable v(s, "v", ops::Const(s, 1.0f));
         return ops::metrics::Mean(s, v.handle());
       }},
      {"mean_squared_error: labels of shape [2]",
       [](const Scope& s) {
         return ops::metrics::MeanSquaredError(s, ops::Const(s, Floats({1, 2})),
                                               ops::Const(s, Floats({1, 2, 3})));
       }},
      {"precision",
       [](const Scope& s) {
         return ops::metrics::Precision(s, ops::Const(s, Floats({1, 2})),
                                        ops::Const(s, Floats({1, 2, 3})));
       }},
      {"recall", [](const Scope& s) {
         return ops::metrics::Recall(s, Output(), ops::Const(s, Floats({1, 2, 3})));
       }}};
  for (const Case& c : cases) {
    Scope root = Scope::NewRootScope();
    ops::metrics::Metric m = c.build(root);
    EXPECT_FALSE(m.update_op.valid()) << c.want;
    EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument) << c.want;
    EXPECT_THAT(root.status().message(), HasSubstr(c.want));
  }
}

}  // namespace
}  // namespace tandem

// framework/ops/metrics.cc
//
// Streaming metrics (see metrics.h), built from existing ops only: every total is a
// float32 local variable (kLocalVariables + kMetricVariables, zero-initialised);
// `value` divides the variables' cached reads; `update_op` divides the outputs of the
// AssignAddVariableOps, which are the totals after this batch's contributions.
//
// Name scopes: "accuracy", "mean", "precision", "recall", "auc", "mean_squared_error",
// "top_k_accuracy" (made unique: "accuracy_1"); in each, the variables ("total",
// "count", "true_positives", ...) and the outputs "value" and "update_op".
//
// Decisions worth knowing (all as tf.compat.v1.metrics unless said):
//  - Division is TensorFlow's div_no_nan: x / 0 is 0, so a metric without data is 0.
//  - Weights are cast to float32 and must be broadcastable to the values (checked
//    where the shapes are known); a value's weight counts in the denominator, so
//    Mean(values, weights) = sum(w * v) / sum(w broadcast to v's shape).
//  - Precision and Recall: a label or prediction is positive when != 0 (a cast to
//    bool), so 0.3 is a positive prediction; use a threshold upstream if needed.
//  - Auc: thresholds i / (n - 1) for 0 < i < n - 1, plus -1e-7 and 1 + 1e-7 at the
//    ends; a prediction is positive at a threshold when it is strictly greater.
//    Rates use TensorFlow's epsilon 1e-6: tpr = recall = (tp + e) / (tp + fn + e),
//    fpr = fp / (fp + tn + e), precision = (tp + e) / (tp + fp + e); the area is the
//    trapezoid sum over (x[i] - x[i+1]) * (y[i] + y[i+1]) / 2 with x = fpr, y = tpr
//    (ROC) or x = recall, y = precision (PR). Without data it is 0. Predictions
//    outside [0, 1] are not checked (below 0: negative everywhere; above 1: positive
//    everywhere).
//  - TopKAccuracy: a row is in when fewer than k of its scores are strictly greater
//    than the score of its label (so ties with the k-th count as in, as in_top_k); a
//    label outside [0, C) is never in. Non-finite scores are not special-cased.
#include "framework/ops/metrics.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/internal/build.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/state_ops.h"

namespace tandem::ops::metrics {
namespace {

bool Fail(const Scope& scope, absl::string_view metric, absl::string_view message) {
  scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat("metric ", metric, ": ", message)));
  return false;
}

// `x` is a valid tensor of a dtype metrics read (numeric or bool).
bool CheckInput(const Scope& scope, absl::string_view metric, absl::string_view what, Output x) {
  if (!scope.ok()) return false;
  if (!x.valid()) return Fail(scope, metric, absl::StrCat(what, " is an invalid Output"));
  switch (x.dtype()) {
    case DType::kFloat:
    case DType::kBFloat16:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUInt8:
    case DType::kBool:
      return true;
    default:
      return Fail(scope, metric,
                  absl::StrCat(what, " has dtype ", DTypeName(x.dtype()), ", expected a number"));
  }
}

// labels and predictions have equal (compatible) static shapes.
bool CheckSameShape(const Scope& scope, absl::string_view metric, Output labels,
                    Output predictions) {
  if (!labels.shape().Merge(predictions.shape()).ok()) {
    return Fail(
        scope, metric,
        absl::StrCat("labels of shape ", labels.shape().DebugString(), " and predictions of shape ",
                     predictions.shape().DebugString(), " must have the same shape"));
  }
  return true;
}

// Optional weights: numeric, broadcastable to `values` where the shapes are known.
bool CheckWeights(const Scope& scope, absl::string_view metric, Output weights, Output values) {
  if (!weights.valid()) return true;
  if (!CheckInput(scope, metric, "weights", weights)) return false;
  const PartialShape& w = weights.shape();
  const PartialShape& v = values.shape();
  if (!w.known_rank() || !v.known_rank()) return true;
  bool ok = w.rank() <= v.rank();
  for (int i = 1; ok && i <= w.rank(); ++i) {
    const int64_t wd = w.dim(w.rank() - i), vd = v.dim(v.rank() - i);
    ok = wd < 0 || wd == 1 || vd < 0 || wd == vd;
  }
  if (!ok) {
    return Fail(
        scope, metric,
        absl::StrCat("weights of shape ", w.DebugString(), " cannot be broadcast to the shape ",
                     v.DebugString(), " of the values"));
  }
  return true;
}

// The inputs of a metric of labels and predictions: both valid and of one shape, the
// optional weights broadcastable to them.
bool CheckLabelsAndPredictions(const Scope& scope, absl::string_view metric, Output labels,
                               Output predictions, Output weights) {
  return CheckInput(scope, metric, "labels", labels) &&
         CheckInput(scope, metric, "predictions", predictions) &&
         CheckSameShape(scope, metric, labels, predictions) &&
         CheckWeights(scope, metric, weights, predictions);
}

Output ToFloat(const Scope& scope, Output x) {
  return x.dtype() == DType::kFloat ? x : Cast(scope, x, DType::kFloat);
}

// 1.0 where x != 0, else 0.0 (float32).
Output IsPositive(const Scope& scope, Output x) {
  Output b = x.dtype() == DType::kBool ? x : Cast(scope, x, DType::kBool);
  return Cast(scope, b, DType::kFloat);
}

// Weights broadcast to the shape of `values` (float32), or invalid for none.
Output BroadcastWeights(const Scope& scope, Output weights, Output values) {
  if (!weights.valid()) return Output();
  return Mul(scope, ToFloat(scope, weights), OnesLike(scope, values));
}

// x * w, or x when w is invalid (no weights).
Output Weighted(const Scope& scope, Output x, Output w) { return w.valid() ? Mul(scope, x, w) : x; }

// TensorFlow's div_no_nan: num / den where den != 0, else 0. The last node is built in
// `scope` (which may carry an op name); the others in its name scope.
Output DivNoNan(const Scope& scope, Output num, Output den) {
  if (!scope.ok()) return Output();
  Scope aux = internal::Aux(scope);
  Output zeros = ZerosLike(aux, den);
  Output is_zero = Equal(aux, den, zeros);
  Output safe_den = Select(aux, is_zero, OnesLike(aux, den), den);
  return Select(scope, is_zero, zeros, Div(aux, num, safe_den));
}

// A zero-initialised float32 metric variable of `shape` in the metric's name scope.
Variable MetricVariable(const Scope& scope, absl::string_view name, const TensorShape& shape) {
  Tensor zeros = Tensor::FromVector<float>(std::vector<float>(shape.num_elements(), 0.0f), shape);
  Output init =
      Const(scope.WithNoControlDependencies().WithOpName(absl::StrCat(name, "/Initializer/zeros")),
            zeros);
  return Variable(
      scope, name, init,
      VariableOptions{.trainable = false, .collections = {kMetricVariables}, .local = true});
}

// The streaming weighted mean of float32 `values` with `weights` (float32 of the values'
// shape, or invalid) in the metric scope `ms`.
Metric StreamingMean(const Scope& ms, Output values, Output weights) {
  if (!ms.ok()) return {};
  Scope aux = internal::Aux(ms);
  Variable total = MetricVariable(ms, "total", TensorShape({}));
  Variable count = MetricVariable(ms, "count", TensorShape({}));
  if (!total.valid() || !count.valid()) return {};
  Output batch_total = ReduceSumAll(aux, Weighted(aux, values, weights));
  Output batch_count =
      weights.valid() ? ReduceSumAll(aux, weights) : Cast(aux, Size(aux, values), DType::kFloat);
  Output update_total = AssignAdd(aux, total, batch_total);
  Output update_count = AssignAdd(aux, count, batch_count);
  Metric m;
  m.value = DivNoNan(ms.WithOpName("value"), total.value(), count.value());
  m.update_op = DivNoNan(ms.WithOpName("update_op"), update_total, update_count);
  if (!ms.ok()) return {};
  return m;
}

// Precision (tp / (tp + fp)) or recall (tp / (tp + fn)) of binary labels/predictions.
Metric PrecisionOrRecall(const Scope& scope, absl::string_view metric, Output labels,
                         Output predictions, Output weights) {
  if (!CheckLabelsAndPredictions(scope, metric, labels, predictions, weights)) return {};
  const bool precision = metric == "precision";
  Scope ms = scope.NewSubScope(metric);
  Scope aux = internal::Aux(ms);
  Output l = IsPositive(aux, labels);
  Output p = IsPositive(aux, predictions);
  Output w = BroadcastWeights(aux, weights, p);
  Output one = Const(aux, 1.0f);
  // The second count: false positives (precision) or false negatives (recall).
  Output other = precision ? Mul(aux, Sub(aux, one, l), p) : Mul(aux, l, Sub(aux, one, p));
  Variable tp = MetricVariable(ms, "true_positives", TensorShape({}));
  Variable fx =
      MetricVariable(ms, precision ? "false_positives" : "false_negatives", TensorShape({}));
  if (!tp.valid() || !fx.valid()) return {};
  Output update_tp = AssignAdd(aux, tp, ReduceSumAll(aux, Weighted(aux, Mul(aux, l, p), w)));
  Output update_fx = AssignAdd(aux, fx, ReduceSumAll(aux, Weighted(aux, other, w)));
  Metric m;
  m.value = DivNoNan(ms.WithOpName("value"), tp.value(), Add(aux, tp.value(), fx.value()));
  m.update_op = DivNoNan(ms.WithOpName("update_op"), update_tp, Add(aux, update_tp, update_fx));
  if (!ms.ok()) return {};
  return m;
}

// The area under the curve from the four confusion-count vectors (see the top).
Output AreaUnderCurve(const Scope& scope, Output tp, Output fp, Output tn, Output fn,
                      int num_thresholds, Curve curve) {
  Scope aux = internal::Aux(scope);
  Output eps = Const(aux, 1e-6f);
  Output tp_eps = Add(aux, tp, eps);
  Output recall = Div(aux, tp_eps, Add(aux, Add(aux, tp, fn), eps));
  Output x, y;
  if (curve == Curve::kRoc) {
    x = Div(aux, fp, Add(aux, Add(aux, fp, tn), eps));
    y = recall;
  } else {
    x = recall;
    y = Div(aux, tp_eps, Add(aux, Add(aux, tp, fp), eps));
  }
  Output head_begin = ConstInt32(aux, std::vector<int32_t>{0});
  Output tail_begin = ConstInt32(aux, std::vector<int32_t>{1});
  Output size = ConstInt32(aux, std::vector<int32_t>{num_thresholds - 1});
  Output dx = Sub(aux, Slice(aux, x, head_begin, size), Slice(aux, x, tail_begin, size));
  Output y_sum = Add(aux, Slice(aux, y, head_begin, size), Slice(aux, y, tail_begin, size));
  Output areas = Mul(aux, dx, Mul(aux, y_sum, Const(aux, 0.5f)));
  return Sum(scope, areas, std::vector<int32_t>{0});
}

}  // namespace

Metric Mean(const Scope& scope, Output values, Output weights) {
  constexpr absl::string_view kName = "mean";
  if (!CheckInput(scope, kName, "values", values) || !CheckWeights(scope, kName, weights, values)) {
    return {};
  }
  Scope ms = scope.NewSubScope(kName);
  Scope aux = internal::Aux(ms);
  Output v = ToFloat(aux, values);
  return StreamingMean(ms, v, BroadcastWeights(aux, weights, v));
}

Metric Accuracy(const Scope& scope, Output labels, Output predictions, Output weights) {
  constexpr absl::string_view kName = "accuracy";
  if (!CheckLabelsAndPredictions(scope, kName, labels, predictions, weights)) return {};
  Scope ms = scope.NewSubScope(kName);
  Scope aux = internal::Aux(ms);
  Output correct =
      Cast(aux, Equal(aux, ToFloat(aux, labels), ToFloat(aux, predictions)), DType::kFloat);
  return StreamingMean(ms, correct, BroadcastWeights(aux, weights, correct));
}

Metric Precision(const Scope& scope, Output labels, Output predictions, Output weights) {
  return PrecisionOrRecall(scope, "precision", labels, predictions, weights);
}

Metric Recall(const Scope& scope, Output labels, Output predictions, Output weights) {
  return PrecisionOrRecall(scope, "recall", labels, predictions, weights);
}

Metric Auc(const Scope& scope, Output labels, Output predictions, int num_thresholds, Curve curve,
           Output weights) {
  constexpr absl::string_view kName = "auc";
  if (num_thresholds < 2) {
    Fail(scope, kName, absl::StrCat("num_thresholds must be >= 2, got ", num_thresholds));
    return {};
  }
  if (!CheckLabelsAndPredictions(scope, kName, labels, predictions, weights)) return {};
  Scope ms = scope.NewSubScope(kName);
  Scope aux = internal::Aux(ms);
  // Thresholds as a column [T, 1]; everything per element as a row [1, N].
  constexpr float kEpsilon = 1e-7f;
  std::vector<float> thresholds(num_thresholds);
  for (int i = 1; i + 1 < num_thresholds; ++i) {
    thresholds[i] = static_cast<float>(i) / static_cast<float>(num_thresholds - 1);
  }
  thresholds.front() = 0.0f - kEpsilon;
  thresholds.back() = 1.0f + kEpsilon;
  Output thresh = Const(ms.WithOpName("thresholds"),
                        Tensor::FromVector<float>(thresholds, TensorShape({num_thresholds, 1})));
  Output pf = ToFloat(aux, predictions);
  Output preds = Reshape(aux, pf, std::vector<int64_t>{1, -1});
  Output pos = Cast(aux, Greater(aux, preds, thresh), DType::kFloat);  // [T, N]
  Output not_pos = Sub(aux, Const(aux, 1.0f), pos);
  Output w = BroadcastWeights(aux, weights, pf);
  Output w_row = w.valid() ? Reshape(aux, w, std::vector<int64_t>{1, -1}) : Output();
  Output label = Reshape(aux, IsPositive(aux, labels), std::vector<int64_t>{1, -1});
  Output label_w = Weighted(aux, label, w_row);
  Output not_label_w = Weighted(aux, Sub(aux, Const(aux, 1.0f), label), w_row);
  auto count = [&](Output pred_mask, Output label_mask) {
    return Sum(aux, Mul(aux, pred_mask, label_mask), std::vector<int32_t>{1});
  };
  const TensorShape vec({num_thresholds});
  Variable tp = MetricVariable(ms, "true_positives", vec);
  Variable fn = MetricVariable(ms, "false_negatives", vec);
  Variable tn = MetricVariable(ms, "true_negatives", vec);
  Variable fp = MetricVariable(ms, "false_positives", vec);
  if (!tp.valid() || !fn.valid() || !tn.valid() || !fp.valid()) return {};
  Output update_tp = AssignAdd(aux, tp, count(pos, label_w));
  Output update_fn = AssignAdd(aux, fn, count(not_pos, label_w));
  Output update_tn = AssignAdd(aux, tn, count(not_pos, not_label_w));
  Output update_fp = AssignAdd(aux, fp, count(pos, not_label_w));
  Metric m;
  m.value = AreaUnderCurve(ms.WithOpName("value"), tp.value(), fp.value(), tn.value(), fn.value(),
                           num_thresholds, curve);
  m.update_op = AreaUnderCurve(ms.WithOpName("update_op"), update_tp, update_fp, update_tn,
                               update_fn, num_thresholds, curve);
  if (!ms.ok()) return {};
  return m;
}

Metric MeanSquaredError(const Scope& scope, Output labels, Output predictions, Output weights) {
  constexpr absl::string_view kName = "mean_squared_error";
  if (!CheckLabelsAndPredictions(scope, kName, labels, predictions, weights)) return {};
  Scope ms = scope.NewSubScope(kName);
  Scope aux = internal::Aux(ms);
  Output sq = SquaredDifference(aux, ToFloat(aux, labels), ToFloat(aux, predictions));
  return StreamingMean(ms, sq, BroadcastWeights(aux, weights, sq));
}

Metric TopKAccuracy(const Scope& scope, Output labels, Output predictions, int k) {
  constexpr absl::string_view kName = "top_k_accuracy";
  if (k < 1) {
    Fail(scope, kName, absl::StrCat("k must be >= 1, got ", k));
    return {};
  }
  if (!CheckInput(scope, kName, "labels", labels) ||
      !CheckInput(scope, kName, "predictions", predictions)) {
    return {};
  }
  if (labels.dtype() != DType::kInt32 && labels.dtype() != DType::kInt64) {
    Fail(scope, kName,
         absl::StrCat("labels must be int32 or int64 class ids, got ", DTypeName(labels.dtype())));
    return {};
  }
  const PartialShape& ls = labels.shape();
  const PartialShape& ps = predictions.shape();
  const bool rank_ok = (!ls.known_rank() || ls.rank() == 1) && (!ps.known_rank() || ps.rank() == 2);
  const bool rows_ok = !ls.known_rank() || !ps.known_rank() || !rank_ok || ls.dim(0) < 0 ||
                       ps.dim(0) < 0 || ls.dim(0) == ps.dim(0);
  if (!rank_ok || !rows_ok) {
    Fail(scope, kName,
         absl::StrCat("labels must have shape [N] and predictions [N, C], got ", ls.DebugString(),
                      " and ", ps.DebugString()));
    return {};
  }
  Scope ms = scope.NewSubScope(kName);
  Scope aux = internal::Aux(ms);
  Output scores = ToFloat(aux, predictions);  // [N, C]
  Output depth = ps.known_rank() && ps.dim(1) >= 0
                     ? ConstInt32(aux, static_cast<int32_t>(ps.dim(1)))
                     : Gather(aux, Shape(aux, scores), ConstInt32(aux, 1));
  Output one_hot = OneHot(aux, labels, depth, Const(aux, 1.0f), Const(aux, 0.0f));     // [N, C]
  Output target = Sum(aux, Mul(aux, one_hot, scores), std::vector<int32_t>{1}, true);  // [N, 1]
  Output above = Cast(aux, Greater(aux, scores, target), DType::kFloat);
  Output num_above = Sum(aux, above, std::vector<int32_t>{1});  // [N]
  Output in_top_k = Less(aux, num_above, Const(aux, static_cast<float>(k)));
  // A label outside [0, C) has an all-zero one-hot row: never in.
  Output valid = Greater(aux, Sum(aux, one_hot, std::vector<int32_t>{1}), Const(aux, 0.5f));
  Output hit = Cast(aux, LogicalAnd(aux, in_top_k, valid), DType::kFloat);
  return StreamingMean(ms, hit, Output());
}

}  // namespace tandem::ops::metrics

// framework/ops/metrics.h
//
// Streaming metrics (tf.compat.v1.metrics): each metric keeps its totals in local
// variables (collections ops::kLocalVariables and kMetricVariables, not saved in
// checkpoints) and returns a Metric of two tensors:
//   value      the metric over everything seen so far (reads the totals)
//   update_op  adds one batch to the totals and outputs the updated metric
// Evaluate runs LocalVariablesInitializer, then update_op on every batch, then value.
//
//   ops::metrics::Metric acc = ops::metrics::Accuracy(scope, labels, predicted_class);
//
// Labels and predictions are broadcast-compatible numeric tensors of equal shape
// unless stated; optional weights (invalid Output = all ones) weight each element.
// A metric with no data yet is 0 (TensorFlow's div_no_nan). Errors (mismatched shapes,
// wrong dtypes, k < 1) are recorded in the scope; all variables and ops live under a
// name scope named after the metric ("accuracy", "mean", ...).
//
// Thread safety: graph building, one thread.
#ifndef TANDEM_FRAMEWORK_OPS_METRICS_H_
#define TANDEM_FRAMEWORK_OPS_METRICS_H_

#include "framework/graph/scope.h"

namespace tandem::ops::metrics {

inline constexpr char kMetricVariables[] = "metric_variables";

struct Metric {
  Output value;      // float32 scalar.
  Output update_op;  // float32 scalar: the value after this batch.
};

// Fraction of elements where labels == predictions (compared after casting both to
// float32).
Metric Accuracy(const Scope& scope, Output labels, Output predictions, Output weights = {});
// Weighted mean of `values`.
Metric Mean(const Scope& scope, Output values, Output weights = {});
// Binary: a label or prediction is positive when != 0 (bool, int or float).
// precision = tp / (tp + fp), recall = tp / (tp + fn).
Metric Precision(const Scope& scope, Output labels, Output predictions, Output weights = {});
Metric Recall(const Scope& scope, Output labels, Output predictions, Output weights = {});
// Area under the ROC (or precision-recall) curve from confusion counts at
// `num_thresholds` (>= 2) evenly spaced thresholds in [0, 1], as tf.metrics.auc with
// summation_method "trapezoidal". predictions are probabilities in [0, 1].
enum class Curve { kRoc, kPr };
Metric Auc(const Scope& scope, Output labels, Output predictions, int num_thresholds = 200,
           Curve curve = Curve::kRoc, Output weights = {});
// Weighted mean of (labels - predictions)^2.
Metric MeanSquaredError(const Scope& scope, Output labels, Output predictions,
                        Output weights = {});
// Fraction of rows whose integer label [N] is among the k highest scores of
// predictions [N, C] (tf.nn.in_top_k: a score tied with the k-th counts as in).
Metric TopKAccuracy(const Scope& scope, Output labels, Output predictions, int k);

}  // namespace tandem::ops::metrics

#endif  // TANDEM_FRAMEWORK_OPS_METRICS_H_

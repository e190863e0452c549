// estimator/canned/head.h
//
// Heads of the premade estimators (TensorFlow's canned heads, v1): how a model's logits
// become predictions, a training loss and evaluation metrics.
//
//   binary classification (n_classes = 2): logits [batch, 1]; sigmoid cross-entropy.
//     Predictions: logits, logistic, probabilities [batch, 2], class_ids [batch, 1]
//     (1 when the logit is > 0), classes (the class's label_vocabulary entry, or "0" /
//     "1"). Metrics: accuracy, accuracy_baseline (max(label mean, 1 - label mean)),
//     auc, auc_precision_recall (tf.metrics.auc, 200 thresholds, trapezoidal),
//     average_loss, label/mean, prediction/mean, precision, recall.
//   multi-class (n_classes > 2): logits [batch, n_classes]; softmax cross-entropy.
//     Predictions: logits, probabilities, class_ids, classes. Metrics: accuracy,
//     average_loss.
//   regression: logits [batch, label_dimension]; squared error. Predictions:
//     predictions. Metrics: average_loss, label/mean, prediction/mean.
//
// Labels: a classifier's are class ids (integers or bools in [0, n_classes)), or, with
// label_vocabulary, strings looked up in it; a label outside either is an error at run
// time naming it. A regressor's are numbers. Weights (weight_column), when given,
// multiply each example's loss and weigh every metric.
//
// The training loss reduces the weighted per-example losses by `loss_reduction`: kSum,
// TensorFlow 1.x's canned estimators' (the hyper-parameters of its census example were
// chosen with it), or kSumOverBatchSize (TensorFlow 2's: divided by the batch size).
// Evaluate also reports "loss", the mean of that training loss over the eval batches.
//
// Thread safety: heads are immutable.
#ifndef TANDEM_ESTIMATOR_CANNED_HEAD_H_
#define TANDEM_ESTIMATOR_CANNED_HEAD_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "estimator/model.h"

namespace tandem::canned {

enum class LossReduction { kSum, kSumOverBatchSize };

struct HeadOptions {
  bool regression = false;
  int64_t n_classes = 2;        // Classifiers: >= 2.
  int64_t label_dimension = 1;  // Regressors: >= 1.
  std::vector<std::string> label_vocabulary;  // Classifiers: empty, or n_classes strings.
  LossReduction loss_reduction = LossReduction::kSum;
};

class Head {
 public:
  // INVALID_ARGUMENT (a config error) for options out of range.
  static absl::StatusOr<std::unique_ptr<Head>> Create(const HeadOptions& options);
  virtual ~Head() = default;

  // Columns of the logits the model must produce.
  virtual int64_t logits_dimension() const = 0;
  // The dtype a label of the input must have (string with a vocabulary, int64 for
  // classifiers, float32 for regressors), for inputs that declare it (tf.Example).
  virtual DType label_dtype() const = 0;

  // The spec of `mode` without its train op: predictions, and with labels the loss and
  // (EVAL) the metrics. `weights` may be invalid.
  virtual absl::StatusOr<EstimatorSpec> Spec(const Scope& scope, Output logits, Output labels,
                                             Output weights, ModeKey mode) const = 0;

 protected:
  explicit Head(HeadOptions options) : options_(std::move(options)) {}
  const HeadOptions options_;
};

}  // namespace tandem::canned

#endif  // TANDEM_ESTIMATOR_CANNED_HEAD_H_

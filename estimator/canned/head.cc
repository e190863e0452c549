// estimator/canned/head.cc
//
// The binary, multi-class and regression heads (head.h).
#include "estimator/canned/head.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/feature_ops.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/metrics.h"
#include "framework/ops/nn_ops.h"
#include "framework/ops/summary_ops.h"

namespace tandem::canned {
namespace {

namespace metrics = ops::metrics;

// "0", "1", ..., the class names without a vocabulary.
std::vector<std::string> ClassNames(const HeadOptions& o) {
  if (!o.label_vocabulary.empty()) return o.label_vocabulary;
  std::vector<std::string> names;
  for (int64_t i = 0; i < o.n_classes; ++i) names.push_back(absl::StrCat(i));
  return names;
}

// Weights as float32 [batch, 1], or invalid.
Output WeightColumn(const Scope& scope, Output weights) {
  if (!weights.valid()) return weights;
  Output w = weights.dtype() == DType::kFloat ? weights : ops::Cast(scope, weights, DType::kFloat);
  return ops::Reshape(scope, w, std::vector<int64_t>{-1, 1});
}

// The training loss: the weighted per-example losses reduced.
Output Reduce(const Scope& scope, Output unreduced, Output weights, LossReduction reduction) {
  Output weighted = weights.valid() ? ops::Mul(scope, unreduced, weights) : unreduced;
  Output sum = ops::ReduceSumAll(scope.WithOpName("weighted_loss/Sum"), weighted);
  if (reduction == LossReduction::kSum) return sum;
  Output n = ops::Cast(scope, ops::Size(scope, unreduced), DType::kFloat);
  return ops::Div(scope.WithOpName("weighted_loss/value"), sum, n);
}

class ClassifierHead : public Head {
 public:
  explicit ClassifierHead(HeadOptions o) : Head(std::move(o)), names_(ClassNames(options_)) {}

  DType label_dtype() const override {
    return options_.label_vocabulary.empty() ? DType::kInt64 : DType::kString;
  }

 protected:
  // Class ids int64 [batch, 1] of the labels; a label that is no class fails the step.
  absl::StatusOr<Output> LabelIds(const Scope& scope, Output labels) const {
    const PartialShape& s = labels.shape();
    if (s.known_rank() && (s.rank() > 2 || (s.rank() == 2 && s.dim(1) != 1 && s.dim(1) >= 0))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "classifier labels must be [batch] or [batch, 1], got ", s.DebugString()));
    }
    ops::VocabularyOptions o;
    o.unknown_is_error = true;
    if (labels.dtype() == DType::kString) {
      if (options_.label_vocabulary.empty()) {
        return ConfigError(
            "the labels are strings: set [model.params] label_vocabulary to the class names");
      }
      return ops::CategoricalVocabulary(scope, labels, options_.label_vocabulary, o);
    }
    if (!options_.label_vocabulary.empty()) {
      return ConfigError(absl::StrCat("label_vocabulary needs string labels, the labels are ",
                                      DTypeName(labels.dtype())));
    }
    if (labels.dtype() != DType::kInt64 && labels.dtype() != DType::kInt32 &&
        labels.dtype() != DType::kBool && labels.dtype() != DType::kUInt8) {
      return ConfigError(absl::StrCat(
          "classifier labels must be class ids (integers or bools) or strings with "
          "label_vocabulary, got ",
          DTypeName(labels.dtype())));
    }
    Output ids = labels.dtype() == DType::kInt64 ? labels : ops::Cast(scope, labels, DType::kInt64);
    return ops::CategoricalVocabulary(scope, ids, names_without_vocabulary(), o);
  }

  std::vector<std::string> names_without_vocabulary() const {
    std::vector<std::string> ids;
    for (int64_t i = 0; i < options_.n_classes; ++i) ids.push_back(absl::StrCat(i));
    return ids;
  }

  const std::vector<std::string> names_;
};

class BinaryHead : public ClassifierHead {
 public:
  using ClassifierHead::ClassifierHead;
  int64_t logits_dimension() const override { return 1; }

  absl::StatusOr<EstimatorSpec> Spec(const Scope& scope, Output logits, Output labels,
                                     Output weights, ModeKey mode) const override {
    const Scope s = scope.NewSubScope("head");
    EstimatorSpec spec;
    spec.mode = mode;
    Output logistic = ops::Sigmoid(s.WithOpName("predictions/logistic"), logits);
    Output class_ids = ops::Cast(s.WithOpName("predictions/class_ids"),
                                 ops::Greater(s, logits, ops::Const(s, 0.f)), DType::kInt64);
    if (mode != ModeKey::kTrain) {
      spec.predictions["logits"] = logits;
      spec.predictions["logistic"] = logistic;
      spec.predictions["probabilities"] = ops::Concat(
          s.WithOpName("predictions/probabilities"),
          {ops::Sub(s, ops::Const(s, 1.f), logistic), logistic}, 1);
      spec.predictions["class_ids"] = class_ids;
      spec.predictions["classes"] =
          ops::IdsToStrings(s.WithOpName("predictions/classes"), class_ids, names_);
    }
    if (mode == ModeKey::kPredict || !labels.valid()) return spec;
    TANDEM_ASSIGN_OR_RETURN(Output ids, LabelIds(s, labels));
    Output labels_f = ops::Cast(s, ids, DType::kFloat);
    Output w = WeightColumn(s, weights);
    Output unreduced = ops::SigmoidCrossEntropyWithLogits(s, logits, labels_f);
    spec.loss = Reduce(s, unreduced, w, options_.loss_reduction);
    if (mode == ModeKey::kTrain) {
      ops::summary::Scalar(s, "average_loss", metrics_mean_now(s, unreduced, w));
      return spec;
    }
    auto& m = spec.eval_metric_ops;
    m["accuracy"] = metrics::Accuracy(s, ids, class_ids, w);
    metrics::Metric label_mean = metrics::Mean(s.NewSubScope("label"), labels_f, w);
    m["label/mean"] = label_mean;
    m["accuracy_baseline"] = {Baseline(s, label_mean.value), Baseline(s, label_mean.update_op)};
    m["prediction/mean"] = metrics::Mean(s.NewSubScope("prediction"), logistic, w);
    m["average_loss"] = metrics::Mean(s.NewSubScope("average_loss"), unreduced, w);
    m["precision"] = metrics::Precision(s, ids, class_ids, w);
    m["recall"] = metrics::Recall(s, ids, class_ids, w);
    m["auc"] = metrics::Auc(s, labels_f, logistic, 200, metrics::Curve::kRoc, w);
    m["auc_precision_recall"] =
        metrics::Auc(s.NewSubScope("auc_precision_recall"), labels_f, logistic, 200,
                     metrics::Curve::kPr, w);
    return spec;
  }

 private:
  // max(mean, 1 - mean): the accuracy of always predicting the larger class.
  static Output Baseline(const Scope& s, Output mean) {
    return ops::Maximum(s, mean, ops::Sub(s, ops::Const(s, 1.f), mean));
  }
  // This batch's weighted mean loss, for the training summary.
  static Output metrics_mean_now(const Scope& s, Output unreduced, Output w) {
    if (!w.valid()) return ops::ReduceMeanAll(s, unreduced);
    return ops::Div(s, ops::ReduceSumAll(s, ops::Mul(s, unreduced, w)), ops::ReduceSumAll(s, w));
  }
};

class MultiClassHead : public ClassifierHead {
 public:
  using ClassifierHead::ClassifierHead;
  int64_t logits_dimension() const override { return options_.n_classes; }

  absl::StatusOr<EstimatorSpec> Spec(const Scope& scope, Output logits, Output labels,
                                     Output weights, ModeKey mode) const override {
    const Scope s = scope.NewSubScope("head");
    EstimatorSpec spec;
    spec.mode = mode;
    Output class_ids = ops::Reshape(s.WithOpName("predictions/class_ids"),
                                    ops::ArgMax(s, logits, 1), std::vector<int64_t>{-1, 1});
    if (mode != ModeKey::kTrain) {
      spec.predictions["logits"] = logits;
      spec.predictions["probabilities"] =
          ops::Softmax(s.WithOpName("predictions/probabilities"), logits);
      spec.predictions["class_ids"] = class_ids;
      spec.predictions["classes"] =
          ops::IdsToStrings(s.WithOpName("predictions/classes"), class_ids, names_);
    }
    if (mode == ModeKey::kPredict || !labels.valid()) return spec;
    TANDEM_ASSIGN_OR_RETURN(Output ids, LabelIds(s, labels));
    Output w = WeightColumn(s, weights);
    Output flat = ops::Reshape(s, ids, std::vector<int64_t>{-1});
    Output unreduced = ops::Reshape(
        s, ops::SparseSoftmaxCrossEntropyWithLogits(s, logits, flat)[0], std::vector<int64_t>{-1, 1});
    spec.loss = Reduce(s, unreduced, w, options_.loss_reduction);
    if (mode == ModeKey::kTrain) return spec;
    spec.eval_metric_ops["accuracy"] = metrics::Accuracy(s, ids, class_ids, w);
    spec.eval_metric_ops["average_loss"] =
        metrics::Mean(s.NewSubScope("average_loss"), unreduced, w);
    return spec;
  }
};

class RegressionHead : public Head {
 public:
  using Head::Head;
  int64_t logits_dimension() const override { return options_.label_dimension; }
  DType label_dtype() const override { return DType::kFloat; }

  absl::StatusOr<EstimatorSpec> Spec(const Scope& scope, Output logits, Output labels,
                                     Output weights, ModeKey mode) const override {
    const Scope s = scope.NewSubScope("head");
    EstimatorSpec spec;
    spec.mode = mode;
    if (mode != ModeKey::kTrain) spec.predictions["predictions"] = logits;
    if (mode == ModeKey::kPredict || !labels.valid()) return spec;
    if (labels.dtype() == DType::kString || labels.dtype() == DType::kBool) {
      return ConfigError(absl::StrCat("regressor labels must be numbers, got ",
                                      DTypeName(labels.dtype())));
    }
    Output y = ops::Reshape(
        s, labels.dtype() == DType::kFloat ? labels : ops::Cast(s, labels, DType::kFloat),
        std::vector<int64_t>{-1, options_.label_dimension});
    Output w = WeightColumn(s, weights);
    Output unreduced = ops::SquaredDifference(s, y, logits);
    spec.loss = Reduce(s, unreduced, w, options_.loss_reduction);
    if (mode == ModeKey::kTrain) return spec;
    spec.eval_metric_ops["average_loss"] =
        metrics::Mean(s.NewSubScope("average_loss"), unreduced, w);
    spec.eval_metric_ops["label/mean"] = metrics::Mean(s.NewSubScope("label"), y, w);
    spec.eval_metric_ops["prediction/mean"] = metrics::Mean(s.NewSubScope("prediction"), logits, w);
    return spec;
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<Head>> Head::Create(const HeadOptions& o) {
  if (o.regression) {
    if (o.label_dimension < 1 || o.label_dimension > 1 << 16) {
      return ConfigError(absl::StrCat("label_dimension must be in [1, 65536], got ",
                                      o.label_dimension));
    }
    if (!o.label_vocabulary.empty()) return ConfigError("a regressor takes no label_vocabulary");
    return std::unique_ptr<Head>(new RegressionHead(o));
  }
  if (o.n_classes < 2 || o.n_classes > 1 << 20) {
    return ConfigError(absl::StrCat("n_classes must be in [2, 2^20], got ", o.n_classes));
  }
  if (!o.label_vocabulary.empty() &&
      static_cast<int64_t>(o.label_vocabulary.size()) != o.n_classes) {
    return ConfigError(absl::StrCat("label_vocabulary has ", o.label_vocabulary.size(),
                                    " entries, n_classes is ", o.n_classes));
  }
  for (size_t i = 0; i < o.label_vocabulary.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (o.label_vocabulary[i] == o.label_vocabulary[j]) {
        return ConfigError(absl::StrCat("label_vocabulary has \"", o.label_vocabulary[i],
                                        "\" twice"));
      }
    }
  }
  if (o.n_classes == 2) return std::unique_ptr<Head>(new BinaryHead(o));
  return std::unique_ptr<Head>(new MultiClassHead(o));
}

}  // namespace tandem::canned

// estimator/canned/premade.h
//
// The premade estimators' model function: TensorFlow's LinearClassifier / Regressor,
// DNNClassifier / Regressor and DNNLinearCombinedClassifier / Regressor (wide & deep)
// over feature columns, usable from C++ model code and from a TOML file alone
// (canned_model.h).
//
//   linear part: LinearModel(linear_feature_columns) in scope "linear"
//     ("linear/linear_model/<column>/weights", ".../bias_weights"), zeros.
//   dnn part: InputLayer(dnn_feature_columns) in "dnn/input_from_feature_columns", then
//     per hidden layer "dnn/hiddenlayer_<i>" (Glorot-uniform kernel, zero bias,
//     activation), dropout (training only), batch normalization (momentum 0.999),
//     then "dnn/logits" without activation.
//   logits: the sum of the parts (wide & deep), or the one part.
//
// Training: each part's optimizer updates its own variables (a CompositeOptimizer,
// one train op and one global-step increment); the batch-norm updates run with it.
//
// Thread safety: pure functions of their arguments.
#ifndef TANDEM_ESTIMATOR_CANNED_PREMADE_H_
#define TANDEM_ESTIMATOR_CANNED_PREMADE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "estimator/canned/head.h"
#include "estimator/model.h"
#include "framework/feature_column/feature_column.h"
#include "framework/ops/layers.h"
#include "framework/ops/optimizer.h"

namespace tandem::canned {

using OptimizerFactory = std::function<absl::StatusOr<std::unique_ptr<ops::Optimizer>>()>;

struct PremadeOptions {
  std::vector<feature_column::Column> linear_feature_columns;  // Empty: no linear part.
  std::vector<feature_column::Column> dnn_feature_columns;     // Empty: no DNN part.
  std::vector<int64_t> dnn_hidden_units;
  ops::Activation dnn_activation = ops::Activation::kRelu;
  float dnn_dropout = 0;  // Probability of dropping a unit while training; 0: none.
  bool batch_norm = false;
  ops::Combiner linear_sparse_combiner = ops::Combiner::kSum;
  OptimizerFactory linear_optimizer;  // Required with a linear part.
  OptimizerFactory dnn_optimizer;     // Required with a DNN part.
  std::string weight_column;          // A raw feature of example weights; "" = none.
  // Splits the tables (embedding weights, the linear part's weights of categorical
  // columns) along their rows; null: whole tables (feature_column::Builder::partitioner).
  ops::Partitioner table_partitioner;
};

// Whether the options' columns create any table a partitioner would split.
bool PremadeHasTables(const PremadeOptions& o);

// The raw features the options' columns (and weight column) read.
absl::StatusOr<feature_column::RawFeatureSpec> PremadeRawFeatures(const PremadeOptions& o);

absl::StatusOr<EstimatorSpec> PremadeModelFn(const PremadeOptions& o, const Head& head,
                                             const Scope& scope, const Features& features,
                                             Output labels, ModeKey mode);

}  // namespace tandem::canned

#endif  // TANDEM_ESTIMATOR_CANNED_PREMADE_H_

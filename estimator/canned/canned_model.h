// estimator/canned/canned_model.h
//
// The premade estimators as registered models, configured by a TOML file alone: the
// columns in [features] (estimator/feature_config.h), the estimator and its
// hyper-parameters in [model] / [model.params] (TensorFlow's argument names), the data
// in [data] (estimator/internal/data_config.h).
//
//   [model] name                     [model.params]
//   linear_classifier / _regressor   feature_columns, optimizer = "ftrl",
//                                    learning_rate = 0.2, sparse_combiner = "sum"
//   dnn_classifier / _regressor      feature_columns, hidden_units, optimizer =
//                                    "adagrad", learning_rate = 0.05, activation_fn =
//                                    "relu", dropout = 0, batch_norm = false
//   dnn_linear_combined_classifier   linear_feature_columns, dnn_feature_columns,
//     / _regressor (wide & deep)     dnn_hidden_units, linear_optimizer = "ftrl",
//                                    linear_learning_rate = min(0.005, 1/sqrt(number of
//                                    linear columns)), dnn_optimizer = "adagrad",
//                                    dnn_learning_rate = 0.001, dnn_activation_fn,
//                                    dnn_dropout, batch_norm, linear_sparse_combiner
//   every one                        weight_column, loss_reduction = "sum"
//                                    ("sum_over_batch_size": TensorFlow 2's); the
//                                    optimizer keys of estimator/optimizer_params.h
//   classifiers                      n_classes = 2, label_vocabulary
//   regressors                       label_dimension = 1
// The defaults are those of TensorFlow's canned estimators (v1). [distribute]
// partitioner splits their tables (internal/partition_config.h; by default, on a
// cluster with ps tasks, TensorFlow's rule: parts of at least 64 MiB, at most one per
// ps task). The input reads the
// raw features the columns need (make_parse_example_spec) and the label from [data]
// train_path / eval_path; a variable-length feature's batches are padded ('' / -1).
//
// Thread safety: as Model.
#ifndef TANDEM_ESTIMATOR_CANNED_CANNED_MODEL_H_
#define TANDEM_ESTIMATOR_CANNED_CANNED_MODEL_H_

#include "absl/status/status.h"
#include "estimator/model.h"

namespace tandem::canned {

absl::Status RegisterPremadeEstimators(ModelRegistry& registry);

}  // namespace tandem::canned

#endif  // TANDEM_ESTIMATOR_CANNED_CANNED_MODEL_H_

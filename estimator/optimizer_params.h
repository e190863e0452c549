// estimator/optimizer_params.h
//
// An optimizer from [model.params] (tf.train's optimizers, TensorFlow 1.x defaults):
//   <prefix>optimizer      "sgd", "momentum", "adagrad", "adam", "lazy_adam" (sparse
//                          updates touch only the named rows), "rmsprop" or "ftrl"
//   <prefix>learning_rate  > 0
//   and the chosen one's own keys: <prefix>momentum (momentum, 0.9),
//   <prefix>initial_accumulator_value (adagrad and ftrl, 0.1), <prefix>learning_rate_power
//   (ftrl, -0.5), <prefix>l1_regularization_strength and <prefix>l2_regularization_strength
//   (ftrl, 0). Another optimizer's key is left unread, so the Estimator reports it as
//   unknown.
// `prefix` is "" or a part's ("linear_", "dnn_" for wide & deep). Errors are config
// errors naming the key.
//
// Thread safety: a pure function.
#ifndef TANDEM_ESTIMATOR_OPTIMIZER_PARAMS_H_
#define TANDEM_ESTIMATOR_OPTIMIZER_PARAMS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "estimator/job_config.h"
#include "framework/ops/optimizer.h"

namespace tandem {

absl::StatusOr<std::unique_ptr<ops::Optimizer>> OptimizerFromParams(
    const ModelSection& params, absl::string_view prefix, absl::string_view default_name,
    double default_learning_rate);

}  // namespace tandem

#endif  // TANDEM_ESTIMATOR_OPTIMIZER_PARAMS_H_

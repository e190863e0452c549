// apps/examples/models.h
//
// The example models as estimator Models, registered by RegisterExampleModels:
//
//   linear_regression  Dense(1) + mean squared error on a synthetic y = w.x + b + noise
//                      problem ([data] dataset = "synthetic_linear"; params
//                      num_features, noise_stddev, optimizer, learning_rate)
//   fashion_mlp        784 - hidden_units (ReLU) - num_classes on Fashion-MNIST
//   fashion_cnn        conv5x5x32 ReLU, maxpool 2, conv5x5x64 ReLU, maxpool 2, dense 1024
//                      ReLU, dropout 0.4 (training only), dense 10
//
// The Fashion models read [data] data_dir (IDX files; "" = $TANDEM_DATA_DIR or the
// Debian package's directory), shuffle with [data] shuffle_buffer and the run's seed,
// batch [train] batch_size (eval: [data] eval_batch_size) and prefetch; training input
// repeats forever (max_steps ends training), evaluation reads the test split once.
// Their metrics: accuracy; predictions: "classes" (int64) and "probabilities".
// Optimizers ([model.params] optimizer): sgd, momentum, adagrad, adam, rmsprop, ftrl.
#ifndef TANDEM_APPS_EXAMPLES_MODELS_H_
#define TANDEM_APPS_EXAMPLES_MODELS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "estimator/model.h"
#include "framework/ops/optimizer.h"

namespace tandem::examples {

absl::Status RegisterExampleModels(ModelRegistry& registry);

// The optimizer named by params "optimizer" (default `default_name`) with
// "learning_rate" (and "momentum" for momentum). INVALID_ARGUMENT for an unknown name.
absl::StatusOr<std::unique_ptr<ops::Optimizer>> OptimizerFromParams(
    const ModelSection& params, absl::string_view default_name = "adam");

}  // namespace tandem::examples

#endif  // TANDEM_APPS_EXAMPLES_MODELS_H_

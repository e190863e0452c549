// tests/estimator/linear_model.h
//
// The estimator tests' model: a linear regression y = 2 x0 - x1 + 0.5 learned by one
// Dense layer with SGD at g_learning_rate, its input ("x", labels) and metric ("mse").
#ifndef TANDEM_TESTS_ESTIMATOR_LINEAR_MODEL_H_
#define TANDEM_TESTS_ESTIMATOR_LINEAR_MODEL_H_

#include <random>

#include "estimator/estimator.h"
#include "framework/ops/layers.h"
#include "framework/ops/losses.h"
#include "framework/ops/metrics.h"
#include "framework/ops/optimizers.h"

namespace tandem::testing {

// y = 2 x0 - x1 + 0.5, 512 examples, batches of 32.
inline InputFn LinearInput(int64_t batch = 32, bool repeat = true) {
  return [=](ModeKey mode, const InputContext&) -> absl::StatusOr<InputData> {
    const int64_t n = 512;
    Tensor x(DType::kFloat, TensorShape({n, 2}));
    Tensor y(DType::kFloat, TensorShape({n, 1}));
    std::mt19937 rng(mode == ModeKey::kTrain ? 1 : 2);
    std::normal_distribution<float> normal;
    for (int64_t i = 0; i < n; ++i) {
      float a = normal(rng), b = normal(rng);
      x.data<float>()[2 * i] = a;
      x.data<float>()[2 * i + 1] = b;
      y.data<float>()[i] = 2 * a - b + 0.5f;
    }
    auto ds = data::FromTensors({x, y});
    if (!ds.ok()) return ds.status();
    data::DatasetPtr d = (*ds)->Batch(batch);
    if (mode == ModeKey::kTrain && repeat) d = d->Repeat(-1);
    return InputData{d, {"x"}, true};
  };
}

inline float g_learning_rate = 0.05f;

inline absl::StatusOr<EstimatorSpec> LinearModelFn(const Scope& scope, const Features& features,
                                                   Output labels, ModeKey mode,
                                                   const ModelSection&) {
  EstimatorSpec spec;
  spec.mode = mode;
  Output pred = ops::Dense(scope, features.at("x"), 1);
  spec.predictions["y"] = pred;
  if (mode == ModeKey::kPredict) return spec;
  spec.loss = ops::MeanSquaredError(scope, labels, pred);
  if (mode == ModeKey::kEval) {
    spec.eval_metric_ops["mse"] = ops::metrics::MeanSquaredError(scope, labels, pred);
    return spec;
  }
  ops::GradientDescentOptimizer sgd(g_learning_rate);
  std::optional<ops::Variable> step = ops::GetGlobalStep(scope.graph());
  auto train = sgd.Minimize(scope, spec.loss, &*step);
  if (!train.ok()) return train.status();
  spec.train_op = *train;
  return spec;
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_ESTIMATOR_LINEAR_MODEL_H_

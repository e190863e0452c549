// apps/examples/models.cc
//
// linear_regression, fashion_mlp and fashion_cnn as estimator Models.
#include "apps/examples/models.h"

#include <cmath>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "estimator/input_pipeline.h"
#include "estimator/optimizer_params.h"
#include "framework/core/status.h"
#include "framework/data/readers.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/layers.h"
#include "framework/ops/losses.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/metrics.h"
#include "framework/ops/nn_ops.h"
#include "framework/ops/optimizers.h"
#include "framework/ops/summary_ops.h"

namespace tandem::examples {
namespace {

uint64_t Seed(const JobConfig& job) {
  return static_cast<uint64_t>(job.run.random_seed.value_or(0));
}

// Loss, train op, metrics and predictions of a classifier's logits.
absl::StatusOr<EstimatorSpec> ClassifierSpec(const Scope& scope, Output logits, Output labels,
                                             ModeKey mode, const ModelSection& params) {
  EstimatorSpec spec;
  spec.mode = mode;
  Output classes = ops::ArgMax(scope.WithOpName("classes"), logits, 1);
  spec.predictions["classes"] = classes;
  spec.predictions["probabilities"] = ops::Softmax(scope.WithOpName("probabilities"), logits);
  if (mode == ModeKey::kPredict) return spec;
  spec.loss = ops::SparseSoftmaxCrossEntropy(scope, labels, logits);
  if (mode == ModeKey::kEval) {
    spec.eval_metric_ops["accuracy"] = ops::metrics::Accuracy(scope, labels, classes);
    return spec;
  }
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<ops::Optimizer> opt, OptimizerFromParams(params));
  std::optional<ops::Variable> step = ops::GetGlobalStep(scope.graph());
  if (!step) return absl::FailedPreconditionError("the graph has no global step");
  TANDEM_ASSIGN_OR_RETURN(spec.train_op, opt->Minimize(scope, spec.loss, &*step));
  Output correct = ops::Cast(
      scope, ops::Equal(scope, classes, ops::Cast(scope, labels, DType::kInt64)), DType::kFloat);
  ops::summary::Scalar(scope, "train_accuracy", ops::Mean(scope, correct, std::vector<int32_t>{}));
  return spec;
}

// A config error unless every value of [model.params] `key` is at least `min`.
absl::Status RequireAtLeast(const char* key, const std::vector<int64_t>& values, int64_t min = 1) {
  for (int64_t v : values) {
    if (v < min) {
      return ConfigError(absl::StrCat("[model.params] ", key, " must be >= ", min, ", got ", v));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ops::Activation> ActivationFromParams(const ModelSection& params) {
  absl::StatusOr<std::string> name = params.GetString("activation", "relu");
  if (!name.ok()) return name.status();
  if (*name == "relu") return ops::Activation::kRelu;
  if (*name == "tanh") return ops::Activation::kTanh;
  if (*name == "sigmoid") return ops::Activation::kSigmoid;
  return ConfigError(
      absl::StrCat("[model.params] activation: unknown '", *name, "' (relu, tanh, sigmoid)"));
}

// The images stay uint8 until each batch is gathered: a shuffled batch reads 784 bytes
// a row instead of 3,136, and the step gets the same floats (PixelsToUnitFloat).
absl::StatusOr<data::DatasetPtr> FashionSource(ModeKey mode, const JobConfig& job) {
  return data::FromIdxSplit(job.data.data_dir, mode == ModeKey::kTrain ? "train" : "t10k",
                            data::PixelFormat::kBytes);
}

class FashionModel : public Model {
 public:
  absl::StatusOr<InputData> InputFn(ModeKey mode, const InputContext& context,
                                    const JobConfig& job) override {
    if (!job.data.dataset.empty() && job.data.dataset != "fashion_mnist") {
      return ConfigError(absl::StrCat("[data] dataset: this model reads \"fashion_mnist\", got \"",
                                      job.data.dataset, "\""));
    }
    TANDEM_ASSIGN_OR_RETURN(data::DatasetPtr source, FashionSource(mode, job));
    return InputData{
        StandardPipeline(source, mode, context, job, data::PixelsToUnitFloat()), {"image"}, true};
  }
};

class FashionMlp : public FashionModel {
 public:
  absl::StatusOr<EstimatorSpec> ModelFn(const Scope& scope, const Features& features, Output labels,
                                        ModeKey mode, const ModelSection& params) override {
    TANDEM_ASSIGN_OR_RETURN(auto hidden, params.GetIntList("hidden_units", {256, 128, 100}));
    TANDEM_ASSIGN_OR_RETURN(int64_t classes, params.GetInt("num_classes", 10));
    TANDEM_ASSIGN_OR_RETURN(ops::Activation act, ActivationFromParams(params));
    TANDEM_RETURN_IF_ERROR(RequireAtLeast("hidden_units", hidden));
    TANDEM_RETURN_IF_ERROR(RequireAtLeast("num_classes", {classes}));
    Output x = features.at("image");
    for (int64_t units : hidden) {
      ops::DenseOptions o;
      o.activation = act;
      x = ops::Dense(scope, x, units, o);
    }
    Output logits = ops::Dense(scope, x, classes);
    return ClassifierSpec(scope, logits, labels, mode, params);
  }
};

class FashionCnn : public FashionModel {
 public:
  absl::StatusOr<EstimatorSpec> ModelFn(const Scope& scope, const Features& features, Output labels,
                                        ModeKey mode, const ModelSection& params) override {
    TANDEM_ASSIGN_OR_RETURN(auto filters, params.GetIntList("conv_filters", {32, 64}));
    TANDEM_ASSIGN_OR_RETURN(int64_t kernel, params.GetInt("kernel_size", 5));
    TANDEM_ASSIGN_OR_RETURN(int64_t pool, params.GetInt("pool_size", 2));
    TANDEM_ASSIGN_OR_RETURN(int64_t dense, params.GetInt("dense_units", 1024));
    TANDEM_ASSIGN_OR_RETURN(double dropout, params.GetDouble("dropout_rate", 0.4));
    TANDEM_ASSIGN_OR_RETURN(int64_t classes, params.GetInt("num_classes", 10));
    TANDEM_RETURN_IF_ERROR(RequireAtLeast("conv_filters", filters));
    TANDEM_RETURN_IF_ERROR(RequireAtLeast("kernel_size", {kernel}));
    TANDEM_RETURN_IF_ERROR(RequireAtLeast("pool_size", {pool}));
    TANDEM_RETURN_IF_ERROR(RequireAtLeast("dense_units", {dense}));
    TANDEM_RETURN_IF_ERROR(RequireAtLeast("num_classes", {classes}));
    if (!(dropout >= 0 && dropout < 1)) {
      return ConfigError(
          absl::StrCat("[model.params] dropout_rate must be in [0, 1), got ", dropout));
    }
    Output x = ops::Reshape(scope, features.at("image"), std::vector<int64_t>{-1, 28, 28, 1});
    for (int64_t f : filters) {
      ops::Conv2DLayerOptions c;
      c.padding = "SAME";
      c.activation = ops::Activation::kRelu;
      x = ops::Conv2DLayer(scope, x, f, {kernel, kernel}, c);
      x = ops::MaxPool2D(scope, x, {pool, pool}, {pool, pool});
    }
    x = ops::Flatten(scope, x);
    ops::DenseOptions d;
    d.activation = ops::Activation::kRelu;
    x = ops::Dense(scope, x, dense, d);
    x = ops::DropoutLayer(scope, x, static_cast<float>(dropout), mode == ModeKey::kTrain);
    Output logits = ops::Dense(scope, x, classes);
    return ClassifierSpec(scope, logits, labels, mode, params);
  }
};

// y = w.x + b + noise with w_i = (i + 1) / num_features, b = 0.5, x ~ N(0, 1).
class LinearRegression : public Model {
 public:
  absl::StatusOr<InputData> InputFn(ModeKey mode, const InputContext& context,
                                    const JobConfig& job) override {
    if (job.data.dataset != "synthetic_linear") {
      return ConfigError(
          absl::StrCat("[data] dataset: linear_regression reads \"synthetic_linear\", got \"",
                       job.data.dataset, "\""));
    }
    TANDEM_ASSIGN_OR_RETURN(int64_t n_features, job.model.GetInt("num_features", 10));
    TANDEM_ASSIGN_OR_RETURN(double noise, job.model.GetDouble("noise_stddev", 0.1));
    if (n_features < 1) {
      return ConfigError("[model.params] num_features must be >= 1");
    }
    const int64_t n = mode == ModeKey::kTrain ? 10000 : 2000;
    Tensor x(DType::kFloat, TensorShape({n, n_features}));
    Tensor y(DType::kFloat, TensorShape({n, 1}));
    std::mt19937_64 rng(Seed(job) + (mode == ModeKey::kTrain ? 0 : 1));
    std::normal_distribution<float> normal(0.f, 1.f);
    for (int64_t i = 0; i < n; ++i) {
      float sum = 0.5f;
      for (int64_t j = 0; j < n_features; ++j) {
        float v = normal(rng);
        x.data<float>()[i * n_features + j] = v;
        sum += v * static_cast<float>(j + 1) / static_cast<float>(n_features);
      }
      y.data<float>()[i] = sum + static_cast<float>(noise) * normal(rng);
    }
    TANDEM_ASSIGN_OR_RETURN(data::DatasetPtr source, data::FromTensors({x, y}));
    return InputData{StandardPipeline(source, mode, context, job), {"x"}, true};
  }

  absl::StatusOr<EstimatorSpec> ModelFn(const Scope& scope, const Features& features, Output labels,
                                        ModeKey mode, const ModelSection& params) override {
    EstimatorSpec spec;
    spec.mode = mode;
    Output prediction = ops::Dense(scope, features.at("x"), 1);
    spec.predictions["prediction"] = prediction;
    if (mode == ModeKey::kPredict) return spec;
    spec.loss = ops::MeanSquaredError(scope, labels, prediction);
    if (mode == ModeKey::kEval) {
      spec.eval_metric_ops["mse"] = ops::metrics::MeanSquaredError(scope, labels, prediction);
      return spec;
    }
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<ops::Optimizer> opt,
                            OptimizerFromParams(params, "sgd"));
    std::optional<ops::Variable> step = ops::GetGlobalStep(scope.graph());
    if (!step) return absl::FailedPreconditionError("the graph has no global step");
    TANDEM_ASSIGN_OR_RETURN(spec.train_op, opt->Minimize(scope, spec.loss, &*step));
    return spec;
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<ops::Optimizer>> OptimizerFromParams(
    const ModelSection& params, absl::string_view default_name) {
  return tandem::OptimizerFromParams(params, "", default_name, 0.001);
}

absl::Status RegisterExampleModels(ModelRegistry& registry) {
  TANDEM_RETURN_IF_ERROR(
      registry.Register("linear_regression", [] { return std::make_unique<LinearRegression>(); }));
  TANDEM_RETURN_IF_ERROR(
      registry.Register("fashion_mlp", [] { return std::make_unique<FashionMlp>(); }));
  return registry.Register("fashion_cnn", [] { return std::make_unique<FashionCnn>(); });
}

}  // namespace tandem::examples

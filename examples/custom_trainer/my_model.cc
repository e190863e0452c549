// A user's trainer: one Model, registered for tandem::trainer_main's command line.
//
// blobs_logistic: logistic regression (one Dense layer, softmax over 2 classes) on two
// Gaussian blobs in num_features dimensions whose centres lie `separation` apart.
// Predictions: "classes" (int64) and "probabilities"; eval metric: accuracy.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "apps/trainer/trainer_main.h"
#include "estimator/model.h"
#include "framework/core/status.h"
#include "framework/data/dataset.h"
#include "framework/ops/layers.h"
#include "framework/ops/losses.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/metrics.h"
#include "framework/ops/nn_ops.h"
#include "framework/ops/optimizers.h"
#include "glog/logging.h"

namespace {

using tandem::DType;
using tandem::EstimatorSpec;
using tandem::Features;
using tandem::InputContext;
using tandem::InputData;
using tandem::JobConfig;
using tandem::ModeKey;
using tandem::ModelSection;
using tandem::Output;
using tandem::Scope;
using tandem::Tensor;
using tandem::TensorShape;
namespace data = tandem::data;
namespace ops = tandem::ops;

class BlobsLogistic : public tandem::Model {
 public:
  absl::StatusOr<InputData> InputFn(ModeKey mode, const InputContext& context,
                                    const JobConfig& job) override {
    if (job.data.dataset != "synthetic_blobs") {
      return absl::InvalidArgumentError(
          absl::StrCat("[data] dataset: blobs_logistic reads \"synthetic_blobs\", got \"",
                       job.data.dataset, "\""));
    }
    TANDEM_ASSIGN_OR_RETURN(int64_t dims, job.model.GetInt("num_features", 4));
    TANDEM_ASSIGN_OR_RETURN(double separation, job.model.GetDouble("separation", 2.0));
    if (dims < 1) return absl::InvalidArgumentError("[model.params] num_features must be >= 1");

    // Class c's points are N(mu_c, 1) with mu_0 = -mu_1 and |mu_0 - mu_1| = separation.
    const int64_t n = mode == ModeKey::kTrain ? 4000 : 1000;
    Tensor x(DType::kFloat, TensorShape({n, dims}));
    Tensor y(DType::kInt64, TensorShape({n}));
    const uint64_t seed = static_cast<uint64_t>(job.run.random_seed.value_or(0));
    std::mt19937_64 rng(seed * 2 + (mode == ModeKey::kTrain ? 0 : 1));
    std::normal_distribution<float> normal(0.f, 1.f);
    const float offset = static_cast<float>(separation / 2 / std::sqrt(static_cast<double>(dims)));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t label = i % 2;
      y.data<int64_t>()[i] = label;
      for (int64_t j = 0; j < dims; ++j) {
        x.data<float>()[i * dims + j] = normal(rng) + (label ? offset : -offset);
      }
    }
    TANDEM_ASSIGN_OR_RETURN(data::DatasetPtr ds, data::FromTensors({x, y}));
    if (context.num_input_pipelines > 1) {
      ds = ds->Shard(context.num_input_pipelines, context.input_pipeline_id);
    }
    if (mode == ModeKey::kTrain) {
      ds = ds->Shuffle(std::max<int64_t>(1, job.data.shuffle_buffer), seed)->Repeat(-1);
    }
    ds = ds->Batch(job.train.batch_size, /*drop_remainder=*/mode == ModeKey::kTrain);
    return InputData{ds, {"x"}, /*has_labels=*/true};
  }

  absl::StatusOr<EstimatorSpec> ModelFn(const Scope& scope, const Features& features, Output labels,
                                        ModeKey mode, const ModelSection& params) override {
    EstimatorSpec spec;
    spec.mode = mode;
    Output logits = ops::Dense(scope, features.at("x"), 2);
    Output classes = ops::ArgMax(scope.WithOpName("classes"), logits, 1);
    spec.predictions["classes"] = classes;
    spec.predictions["probabilities"] = ops::Softmax(scope.WithOpName("probabilities"), logits);
    if (mode == ModeKey::kPredict) return spec;
    spec.loss = ops::SparseSoftmaxCrossEntropy(scope, labels, logits);
    if (mode == ModeKey::kEval) {
      spec.eval_metric_ops["accuracy"] = ops::metrics::Accuracy(scope, labels, classes);
      return spec;
    }
    TANDEM_ASSIGN_OR_RETURN(double lr, params.GetDouble("learning_rate", 0.1));
    std::optional<ops::Variable> step = ops::GetGlobalStep(scope.graph());
    if (!step) return absl::FailedPreconditionError("the graph has no global step");
    ops::GradientDescentOptimizer opt(static_cast<float>(lr));
    TANDEM_ASSIGN_OR_RETURN(spec.train_op, opt.Minimize(scope, spec.loss, &*step));
    return spec;
  }
};

}  // namespace

void tandem::RegisterModels(ModelRegistry& registry) {
  absl::Status s =
      registry.Register("blobs_logistic", [] { return std::make_unique<BlobsLogistic>(); });
  if (!s.ok()) LOG(FATAL) << s;
}

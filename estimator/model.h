// estimator/model.h
//
// What a user writes: a Model with a model function and an input function
// (tf.estimator's model_fn and input_fn), and the EstimatorSpec the model function
// returns. A trainer binary finds models by name in a ModelRegistry.
//
//   class MyModel : public Model {
//     absl::StatusOr<InputData> InputFn(ModeKey mode, const InputContext& context,
//                                       const JobConfig& job) override { ... }
//     absl::StatusOr<EstimatorSpec> ModelFn(const Scope& scope, const Features& features,
//                                           Output labels, ModeKey mode,
//                                           const ModelSection& params) override { ... }
//   };
//   void RegisterModels(ModelRegistry& registry) {       // called by the trainer main
//     registry.Register("my_model", [] { return std::make_unique<MyModel>(); });
//   }
//
// Input: a Dataset (framework/data) whose elements are the feature tensors, in the
// order of InputData::feature_names, followed by the label tensor when has_labels.
// Elements are batches (the dataset batches). The Estimator makes a placeholder per
// component ("input/<feature>", "input/labels", with the element's dtype and shape and
// an unknown batch dimension) and feeds each batch; the model function receives those
// placeholders. The end of the input ends Train, Evaluate and Predict cleanly.
//
// EstimatorSpec::Validate applies TensorFlow's rules: TRAIN needs loss and train_op,
// EVAL needs loss, PREDICT needs predictions; the loss must be a float32 scalar; every
// prediction must have the batch as its first dimension.
//
// Thread safety: a Model is used by one Estimator call at a time; the registry is
// filled before use and read-only afterwards.
#ifndef TANDEM_ESTIMATOR_MODEL_H_
#define TANDEM_ESTIMATOR_MODEL_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "estimator/job_config.h"
#include "framework/data/dataset.h"
#include "framework/graph/scope.h"
#include "framework/ops/metrics.h"
#include "hooks/scaffold.h"
#include "hooks/session_run_hook.h"

namespace tandem {

enum class ModeKey { kTrain, kEval, kPredict };
// "train", "eval", "infer" (TensorFlow's ModeKeys values).
const char* ModeKeyName(ModeKey mode);

using Features = std::map<std::string, Output>;

struct EstimatorSpec {
  ModeKey mode = ModeKey::kTrain;
  Output loss;               // float32 scalar.
  Node* train_op = nullptr;  // Run every training step.
  std::map<std::string, Output> predictions;
  std::map<std::string, ops::metrics::Metric> eval_metric_ops;
  std::vector<std::shared_ptr<SessionRunHook>> training_hooks;
  std::vector<std::shared_ptr<SessionRunHook>> training_chief_hooks;
  std::vector<std::shared_ptr<SessionRunHook>> evaluation_hooks;
  std::vector<std::shared_ptr<SessionRunHook>> prediction_hooks;
  std::shared_ptr<Scaffold> scaffold;  // Null: a default one.

  // INVALID_ARGUMENT naming the missing or malformed field.
  absl::Status Validate() const;
};

// Which input pipeline this is, for sharding (tf.distribute.InputContext).
struct InputContext {
  int num_input_pipelines = 1;
  int input_pipeline_id = 0;
  int num_replicas_in_sync = 1;
};

struct InputData {
  data::DatasetPtr dataset;
  std::vector<std::string> feature_names;  // One per leading element component.
  bool has_labels = true;                  // The last component is the labels.
  // Per-example shapes of features whose first batch does not give every batch's: a
  // -1 dimension takes any size (a variable-length feature, padded per dataset).
  std::map<std::string, PartialShape> feature_shapes;
};

using InputFn = std::function<absl::StatusOr<InputData>(ModeKey, const InputContext&)>;
using ModelFn = std::function<absl::StatusOr<EstimatorSpec>(
    const Scope& scope, const Features& features, Output labels, ModeKey mode,
    const ModelSection& params)>;

class Model {
 public:
  virtual ~Model() = default;
  // The dataset for `mode` (batched), built from the job's [data], [train] and [eval].
  virtual absl::StatusOr<InputData> InputFn(ModeKey mode, const InputContext& context,
                                            const JobConfig& job) = 0;
  // Builds the graph for `mode` in `scope`. `labels` is invalid when the input has none.
  virtual absl::StatusOr<EstimatorSpec> ModelFn(const Scope& scope, const Features& features,
                                                Output labels, ModeKey mode,
                                                const ModelSection& params) = 0;
};

using ModelFactory = std::function<std::unique_ptr<Model>()>;
// A model made from the job itself (the premade estimators read [features] and
// [model.params] when made, so that a bad declaration fails before anything runs).
// Such a model honours or refuses [distribute] partitioner; Create refuses a
// partitioner for a plain model, which has no table it would apply to.
using ConfiguredModelFactory =
    std::function<absl::StatusOr<std::unique_ptr<Model>>(const JobConfig& job)>;

class ModelRegistry {
 public:
  // ALREADY_EXISTS when `name` is taken; INVALID_ARGUMENT when empty.
  absl::Status Register(const std::string& name, ModelFactory factory);
  absl::Status Register(const std::string& name, ConfiguredModelFactory factory);
  // NOT_FOUND listing the registered names (with a did-you-mean). The first form
  // refuses a model that needs the job.
  absl::StatusOr<std::unique_ptr<Model>> Create(const std::string& name) const;
  absl::StatusOr<std::unique_ptr<Model>> Create(const std::string& name,
                                                const JobConfig& job) const;
  std::vector<std::string> Names() const;

  // One registered model: one of the two factories is set.
  struct Entry {
    ModelFactory plain;
    ConfiguredModelFactory configured;
  };

 private:
  absl::StatusOr<const Entry*> Find(const std::string& name) const;
  std::map<std::string, Entry> factories_;
};

// The input and model functions of `model` bound to `job` (not owned; must outlive the
// returned functions).
InputFn BindInputFn(Model* model, const JobConfig* job);
ModelFn BindModelFn(Model* model);

}  // namespace tandem

#endif  // TANDEM_ESTIMATOR_MODEL_H_

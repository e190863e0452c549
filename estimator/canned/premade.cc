// estimator/canned/premade.cc
#include "estimator/canned/premade.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/ops/composite_optimizer.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/state_ops.h"

namespace tandem::canned {
namespace {

namespace fc = feature_column;

Output DnnLogits(const PremadeOptions& o, const Scope& scope, fc::Builder& b,
                 const Features& features, int64_t units, bool training) {
  const Scope dnn = scope.NewSubScope("dnn");
  Output x = fc::InputLayer(dnn.NewSubScope("input_from_feature_columns"), features,
                            o.dnn_feature_columns, &b);
  for (size_t i = 0; i < o.dnn_hidden_units.size() && x.valid(); ++i) {
    ops::DenseOptions d;
    d.activation = o.dnn_activation;
    d.name = absl::StrCat("hiddenlayer_", i);
    x = ops::Dense(dnn, x, o.dnn_hidden_units[i], d);
    if (o.dnn_dropout > 0) x = ops::DropoutLayer(dnn, x, o.dnn_dropout, training);
    if (o.batch_norm) {
      ops::BatchNormOptions bn;
      bn.momentum = 0.999f;
      bn.name = absl::StrCat("batchnorm_", i);
      x = ops::BatchNormalization(dnn, x, training, bn);
    }
  }
  ops::DenseOptions logits;
  logits.name = "logits";
  return ops::Dense(dnn, x, units, logits);
}

absl::StatusOr<std::unique_ptr<ops::Optimizer>> TrainOptimizer(const PremadeOptions& o) {
  std::vector<std::pair<std::string, std::unique_ptr<ops::Optimizer>>> parts;
  auto add = [&](const char* prefix, const OptimizerFactory& make) -> absl::Status {
    if (!make) return absl::InvalidArgumentError(absl::StrCat("no optimizer for the ", prefix, " part"));
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<ops::Optimizer> opt, make());
    parts.emplace_back(prefix, std::move(opt));
    return absl::OkStatus();
  };
  if (!o.linear_feature_columns.empty()) TANDEM_RETURN_IF_ERROR(add("linear/", o.linear_optimizer));
  if (!o.dnn_feature_columns.empty()) TANDEM_RETURN_IF_ERROR(add("dnn/", o.dnn_optimizer));
  if (parts.size() == 1) return std::move(parts[0].second);
  return std::unique_ptr<ops::Optimizer>(new ops::CompositeOptimizer(std::move(parts)));
}

}  // namespace

bool PremadeHasTables(const PremadeOptions& o) {
  for (const fc::Column& c : o.linear_feature_columns) {
    if (c->is_categorical() || c->has_table()) return true;
  }
  for (const fc::Column& c : o.dnn_feature_columns) {
    if (c->has_table()) return true;
  }
  return false;
}

absl::StatusOr<feature_column::RawFeatureSpec> PremadeRawFeatures(const PremadeOptions& o) {
  std::vector<fc::Column> all = o.linear_feature_columns;
  all.insert(all.end(), o.dnn_feature_columns.begin(), o.dnn_feature_columns.end());
  TANDEM_ASSIGN_OR_RETURN(fc::RawFeatureSpec spec, fc::RawFeatures(all));
  if (!o.weight_column.empty()) {
    fc::RawFeature w{o.weight_column, DType::kFloat, false, {1}, {}};
    auto [it, inserted] = spec.try_emplace(o.weight_column, w);
    if (!inserted && !(it->second == w)) {
      return absl::InvalidArgumentError(absl::StrCat("weight_column '", o.weight_column,
                                                     "' is also read by a feature column as ",
                                                     it->second.DebugString()));
    }
  }
  return spec;
}

absl::StatusOr<EstimatorSpec> PremadeModelFn(const PremadeOptions& o, const Head& head,
                                             const Scope& scope, const Features& features,
                                             Output labels, ModeKey mode) {
  if (o.linear_feature_columns.empty() && o.dnn_feature_columns.empty()) {
    return absl::InvalidArgumentError("a premade estimator needs feature columns");
  }
  if (!o.dnn_feature_columns.empty() && o.dnn_hidden_units.empty()) {
    return absl::InvalidArgumentError("the DNN part needs hidden_units");
  }
  const bool training = mode == ModeKey::kTrain;
  fc::Builder builder(scope, features);
  builder.partitioner = o.table_partitioner;
  std::vector<Output> parts;
  if (!o.linear_feature_columns.empty()) {
    fc::LinearModelOptions lo;
    lo.sparse_combiner = o.linear_sparse_combiner;
    parts.push_back(fc::LinearModel(scope.NewSubScope("linear"), features, o.linear_feature_columns,
                                    head.logits_dimension(), lo, &builder));
  }
  if (!o.dnn_feature_columns.empty()) {
    parts.push_back(DnnLogits(o, scope, builder, features, head.logits_dimension(), training));
  }
  TANDEM_RETURN_IF_ERROR(scope.status());
  Output logits = parts.size() == 1 ? parts[0] : ops::Add(scope.WithOpName("add_logits"), parts[0], parts[1]);
  Output weights;
  if (!o.weight_column.empty()) {
    auto it = features.find(o.weight_column);
    if (it == features.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("weight_column '", o.weight_column, "' is not among the input's features"));
    }
    weights = it->second;
  }
  TANDEM_ASSIGN_OR_RETURN(EstimatorSpec spec, head.Spec(scope, logits, labels, weights, mode));
  if (mode != ModeKey::kTrain) return spec;
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<ops::Optimizer> opt, TrainOptimizer(o));
  std::optional<ops::Variable> step = ops::GetGlobalStep(scope.graph());
  if (!step) return absl::FailedPreconditionError("the graph has no global step");
  std::vector<Node*> updates;  // Batch normalization's moving averages.
  for (const std::string& name : scope.graph()->GetCollection(ops::kUpdateOps)) {
    if (Node* n = scope.graph()->FindNode(name)) updates.push_back(n);
  }
  const Scope train = updates.empty() ? scope : scope.WithControlDependencies(updates);
  TANDEM_ASSIGN_OR_RETURN(spec.train_op, opt->Minimize(train, spec.loss, &*step));
  return spec;
}

}  // namespace tandem::canned

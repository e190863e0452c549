// estimator/canned/canned_model.cc
//
// The premade estimators configured from the job (canned_model.h): [model.params] and
// [features] read when the model is made, the input read from [data].
#include "estimator/canned/canned_model.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "estimator/canned/head.h"
#include "estimator/canned/premade.h"
#include "estimator/feature_config.h"
#include "estimator/input_pipeline.h"
#include "estimator/internal/data_config.h"
#include "estimator/internal/did_you_mean.h"
#include "estimator/internal/partition_config.h"
#include "estimator/optimizer_params.h"
#include "framework/core/status.h"
#include "framework/data/csv.h"
#include "framework/data/example_parser.h"
#include "glog/logging.h"

namespace tandem::canned {
namespace {

namespace fc = feature_column;

enum class Kind { kLinear, kDnn, kCombined };

absl::StatusOr<ops::Activation> ParseActivation(const ModelSection& p, const std::string& key) {
  TANDEM_ASSIGN_OR_RETURN(std::string name, p.GetString(key, "relu"));
  static const std::map<std::string, ops::Activation> kNames = {
      {"relu", ops::Activation::kRelu},       {"relu6", ops::Activation::kRelu6},
      {"elu", ops::Activation::kElu},         {"sigmoid", ops::Activation::kSigmoid},
      {"tanh", ops::Activation::kTanh},       {"softplus", ops::Activation::kSoftplus},
      {"linear", ops::Activation::kNone}};
  auto it = kNames.find(name);
  if (it == kNames.end()) {
    return ConfigError(absl::StrCat("[model.params] ", key, ": unknown activation '", name,
                                    "' (relu, relu6, elu, sigmoid, tanh, softplus, linear)"));
  }
  return it->second;
}

// The columns named by [model.params] `key`.
absl::StatusOr<std::vector<fc::Column>> Columns(const ModelSection& p, const std::string& key,
                                                const std::map<std::string, fc::Column>& all,
                                                bool required) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<std::string> names, p.GetStringList(key, {}));
  if (names.empty() && required) {
    return ConfigError(absl::StrCat("[model.params] ", key,
                                    " is required: the names of [features] tables"));
  }
  std::vector<std::string> known;
  for (const auto& [name, unused] : all) known.push_back(name);
  std::vector<fc::Column> out;
  for (const std::string& n : names) {
    auto it = all.find(n);
    if (it == all.end()) {
      return ConfigError(absl::StrCat("[model.params] ", key, ": no feature column '", n, "'",
                                      internal::DidYouMean(n, known), known.empty() ? "" : "; [features] has: ",
                                      absl::StrJoin(known, ", ")));
    }
    out.push_back(it->second);
  }
  return out;
}

absl::StatusOr<double> Fraction(const ModelSection& p, const std::string& key) {
  TANDEM_ASSIGN_OR_RETURN(double v, p.GetDouble(key, 0));
  if (!(v >= 0 && v < 1)) {
    return ConfigError(absl::StrCat("[model.params] ", key, " must be in [0, 1), got ", v));
  }
  return v;
}

// An optimizer factory over `params`, checked once now.
absl::StatusOr<OptimizerFactory> MakeOptimizerFactory(const ModelSection& params, const std::string& prefix,
                                           const std::string& name, double lr) {
  OptimizerFactory make = [params, prefix, name, lr] {
    return OptimizerFromParams(params, prefix, name, lr);
  };
  TANDEM_RETURN_IF_ERROR(make().status());
  return make;
}

class PremadeModel : public Model {
 public:
  PremadeModel(PremadeOptions options, std::unique_ptr<Head> head, fc::RawFeatureSpec raw)
      : options_(std::move(options)), head_(std::move(head)), raw_(std::move(raw)) {}

  absl::StatusOr<InputData> InputFn(ModeKey mode, const InputContext& context,
                                    const JobConfig& job) override;

  absl::StatusOr<EstimatorSpec> ModelFn(const Scope& scope, const Features& features,
                                        Output labels, ModeKey mode,
                                        const ModelSection& params) override {
    return PremadeModelFn(options_, *head_, scope, features, labels, mode);
  }

 private:
  // The feature and label columns of the files of [data] `key`.
  absl::StatusOr<std::vector<Tensor>> ReadColumns(const JobConfig& job, const char* key,
                                                  const std::string& path) const;

  PremadeOptions options_;
  std::unique_ptr<Head> head_;
  fc::RawFeatureSpec raw_;
};

// Whether a column of `dtype` gives what `raw` reads.
bool Compatible(const fc::RawFeature& raw, DType dtype) {
  switch (raw.dtype) {
    case DType::kFloat:
      return dtype == DType::kFloat || dtype == DType::kInt64 || dtype == DType::kInt32;
    case DType::kInt64:
      return dtype == DType::kInt64 || dtype == DType::kInt32;
    default:
      return dtype == raw.dtype;
  }
}

absl::StatusOr<std::vector<Tensor>> PremadeModel::ReadColumns(const JobConfig& job,
                                                              const char* key,
                                                              const std::string& path) const {
  const DataSection& d = job.data;
  TANDEM_ASSIGN_OR_RETURN(std::vector<std::string> files, internal::DataFiles(path, key));
  if (d.format == "tfrecord_example") {
    std::vector<data::ExampleFeature> features;
    for (const auto& [k, raw] : raw_) {
      features.push_back({k, raw.dtype, raw.var_len, raw.var_len ? std::vector<int64_t>{} : raw.shape,
                          raw.default_value});
    }
    features.push_back({d.label_name, head_->label_dtype(), false, {1}, {}});
    const data::Compression c = d.compression == "gzip"   ? data::Compression::kGzip
                                : d.compression == "none" ? data::Compression::kNone
                                                          : data::Compression::kAuto;
    return data::ReadExampleFiles(files, features, c);
  }
  TANDEM_ASSIGN_OR_RETURN(std::vector<data::CsvColumn> columns, internal::CsvColumnsFromConfig(d));
  data::CsvReadOptions o = internal::CsvOptionsFromConfig(d);
  for (const auto& [k, raw] : raw_) o.select.push_back(k);
  o.select.push_back(d.label_name);
  absl::StatusOr<data::CsvTable> table = data::ReadCsv(files, columns, o);
  if (!table.ok()) {
    // A feature that is no column is the config's mistake, not the data's.
    if (table.status().message().find("no column named") != absl::string_view::npos) {
      return AsConfigError(AnnotateStatus(table.status(), "[features] / [data] column_names"));
    }
    return table.status();
  }
  if (table->skipped_rows > 0) {
    LOG(WARNING) << "[data] skip_bad_rows: left out " << table->skipped_rows << " of "
                 << table->rows + table->skipped_rows << " rows of " << absl::StrJoin(files, ", ")
                 << "; the first: " << table->first_skipped;
  }
  size_t i = 0;
  for (const auto& [k, raw] : raw_) {
    const Tensor& t = table->columns[i++];
    int64_t width = 1;
    for (int64_t s : raw.shape) width *= s;
    if (!Compatible(raw, t.dtype()) || (!raw.var_len && width != 1)) {
      return ConfigError(absl::StrCat(
          "feature '", k, "' is read as ", raw.DebugString(), " by the feature columns, but [data] ",
          "column_defaults make its csv column ", DTypeName(t.dtype()),
          raw.var_len ? "" : " with one value a row"));
    }
  }
  return std::move(table->columns);
}

absl::StatusOr<InputData> PremadeModel::InputFn(ModeKey mode, const InputContext& context,
                                                const JobConfig& job) {
  const DataSection& d = job.data;
  if (d.format.empty()) {
    return ConfigError(absl::StrCat("[data] format must be \"csv\" or \"tfrecord_example\" for ",
                                    "the premade estimator '", job.model.name, "'"));
  }
  if (d.label_name.empty()) return ConfigError("[data] label_name is required");
  if (raw_.contains(d.label_name)) {
    return ConfigError(absl::StrCat("[data] label_name '", d.label_name,
                                    "' is also read by a feature column"));
  }
  const bool train = mode == ModeKey::kTrain;
  const char* key = train ? "train_path" : "eval_path";
  const std::string& path = train ? d.train_path : d.eval_path;
  if (path.empty()) return ConfigError(absl::StrCat("[data] ", key, " is required"));
  TANDEM_ASSIGN_OR_RETURN(std::vector<Tensor> columns, ReadColumns(job, key, path));
  InputData in;
  size_t i = 0;
  for (const auto& [k, raw] : raw_) {
    in.feature_names.push_back(k);
    if (raw.var_len && columns[i].rank() == 2) in.feature_shapes[k] = PartialShape({-1});
    ++i;
  }
  TANDEM_ASSIGN_OR_RETURN(
      data::DatasetPtr source,
      data::FromTensors(std::move(columns), absl::StrCat(d.format, "(", path, ")")));
  in.dataset = StandardPipeline(source, mode, context, job);
  in.has_labels = true;
  return in;
}

absl::StatusOr<std::unique_ptr<Model>> MakePremade(Kind kind, bool regression,
                                                   const JobConfig& job) {
  const ModelSection& p = job.model;
  TANDEM_ASSIGN_OR_RETURN(auto all, FeatureColumnsFromConfig(job));
  PremadeOptions o;
  HeadOptions h;
  h.regression = regression;
  if (regression) {
    TANDEM_ASSIGN_OR_RETURN(h.label_dimension, p.GetInt("label_dimension", 1));
  } else {
    TANDEM_ASSIGN_OR_RETURN(h.n_classes, p.GetInt("n_classes", 2));
    TANDEM_ASSIGN_OR_RETURN(h.label_vocabulary, p.GetStringList("label_vocabulary", {}));
  }
  TANDEM_ASSIGN_OR_RETURN(std::string reduction, p.GetString("loss_reduction", "sum"));
  if (reduction == "sum") {
    h.loss_reduction = LossReduction::kSum;
  } else if (reduction == "sum_over_batch_size") {
    h.loss_reduction = LossReduction::kSumOverBatchSize;
  } else {
    return ConfigError(absl::StrCat("[model.params] loss_reduction must be \"sum\" or ",
                                    "\"sum_over_batch_size\", got \"", reduction, "\""));
  }
  TANDEM_ASSIGN_OR_RETURN(o.weight_column, p.GetString("weight_column", ""));
  const bool combined = kind == Kind::kCombined;
  const std::string lin = combined ? "linear_" : "";
  const std::string dnn = combined ? "dnn_" : "";
  if (kind != Kind::kDnn) {
    TANDEM_ASSIGN_OR_RETURN(o.linear_feature_columns,
                            Columns(p, lin + "feature_columns", all, !combined));
  }
  if (kind != Kind::kLinear) {
    TANDEM_ASSIGN_OR_RETURN(o.dnn_feature_columns, Columns(p, dnn + "feature_columns", all, !combined));
  }
  if (combined && o.linear_feature_columns.empty() && o.dnn_feature_columns.empty()) {
    return ConfigError(
        "[model.params] linear_feature_columns and dnn_feature_columns are both empty");
  }
  if (!o.linear_feature_columns.empty()) {
    TANDEM_ASSIGN_OR_RETURN(std::string combiner,
                            p.GetString(combined ? "linear_sparse_combiner" : "sparse_combiner", "sum"));
    absl::StatusOr<ops::Combiner> c = fc::ParseCombiner(combiner);
    if (!c.ok()) return ConfigError(absl::StrCat("[model.params] ", c.status().message()));
    o.linear_sparse_combiner = *c;
    // TensorFlow's defaults: FTRL at 0.2; with a DNN, at min(0.005, 1/sqrt(columns)).
    const double lr = combined ? std::min(0.005, 1.0 / std::sqrt(static_cast<double>(
                                                          o.linear_feature_columns.size())))
                               : 0.2;
    TANDEM_ASSIGN_OR_RETURN(o.linear_optimizer, MakeOptimizerFactory(p, lin, "ftrl", lr));
  }
  if (!o.dnn_feature_columns.empty()) {
    TANDEM_ASSIGN_OR_RETURN(o.dnn_hidden_units, p.GetIntList(combined ? "dnn_hidden_units"
                                                                      : "hidden_units", {}));
    if (o.dnn_hidden_units.empty()) {
      return ConfigError(absl::StrCat("[model.params] ", dnn, "hidden_units is required"));
    }
    for (int64_t u : o.dnn_hidden_units) {
      if (u < 1 || u > (1 << 20)) {
        return ConfigError(absl::StrCat("[model.params] ", dnn,
                                        "hidden_units must be in [1, 2^20], got ", u));
      }
    }
    TANDEM_ASSIGN_OR_RETURN(o.dnn_activation, ParseActivation(p, dnn + "activation_fn"));
    TANDEM_ASSIGN_OR_RETURN(double dropout, Fraction(p, dnn + "dropout"));
    o.dnn_dropout = static_cast<float>(dropout);
    TANDEM_ASSIGN_OR_RETURN(o.batch_norm, p.GetBool("batch_norm", false));
    TANDEM_ASSIGN_OR_RETURN(o.dnn_optimizer,
                            MakeOptimizerFactory(p, dnn, "adagrad", combined ? 0.001 : 0.05));
  }
  TANDEM_ASSIGN_OR_RETURN(internal::TablePartitioning tables, internal::TablePartitionerFor(job));
  if (internal::PartitionerRequested(job.distribute) && !PremadeHasTables(o)) {
    return ConfigError(absl::StrCat(
        "[distribute] partitioner = \"", job.distribute.partitioner, "\", but '", job.model.name,
        "' has no table to partition (an embedding column, or a categorical column of the "
        "linear part); use partitioner = \"none\""));
  }
  if (tables.partitioner && PremadeHasTables(o)) {
    LOG(INFO) << "Tables of '" << job.model.name << "' partitioned by " << tables.description;
    o.table_partitioner = std::move(tables.partitioner);
  }
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Head> head, Head::Create(h));
  absl::StatusOr<fc::RawFeatureSpec> raw = PremadeRawFeatures(o);
  if (!raw.ok()) return AsConfigError(AnnotateStatus(raw.status(), "[features]"));
  return std::unique_ptr<Model>(new PremadeModel(std::move(o), std::move(head), *std::move(raw)));
}

}  // namespace

absl::Status RegisterPremadeEstimators(ModelRegistry& registry) {
  struct Premade {
    const char* name;
    Kind kind;
    bool regression;
  };
  const Premade all[] = {
      {"linear_classifier", Kind::kLinear, false},
      {"linear_regressor", Kind::kLinear, true},
      {"dnn_classifier", Kind::kDnn, false},
      {"dnn_regressor", Kind::kDnn, true},
      {"dnn_linear_combined_classifier", Kind::kCombined, false},
      {"dnn_linear_combined_regressor", Kind::kCombined, true},
  };
  for (const Premade& m : all) {
    TANDEM_RETURN_IF_ERROR(registry.Register(
        m.name, ConfiguredModelFactory([m](const JobConfig& job) {
          return MakePremade(m.kind, m.regression, job);
        })));
  }
  return absl::OkStatus();
}

}  // namespace tandem::canned

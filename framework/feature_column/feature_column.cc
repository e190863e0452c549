// framework/feature_column/feature_column.cc
//
// The Builder, the dense columns (numeric, bucketized, indicator, embedding), RawFeatures,
// InputLayer and LinearModel. The categorical columns are in categorical_columns.cc.
#include "framework/feature_column/feature_column.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/feature_column/internal.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/embedding_ops.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/nn_ops.h"
#include "framework/ops/state_ops.h"
#include "glog/logging.h"

namespace tandem::feature_column {

using internal::ColumnError;

std::string RawFeature::DebugString() const {
  if (var_len) return absl::StrCat("VarLenFeature(", DTypeName(dtype), ")");
  return absl::StrCat("FixedLenFeature([", absl::StrJoin(shape, ","), "], ", DTypeName(dtype),
                      default_value.empty() ? "" : ", default_value=[",
                      absl::StrJoin(default_value, ","), default_value.empty() ? "" : "]", ")");
}

Output FeatureColumn::DenseTensor(Builder& b) const {
  b.scope().UpdateStatus(absl::InvalidArgumentError(
      absl::StrCat("feature column '", name(), "' is not a dense column")));
  return Output();
}

CategoricalIds FeatureColumn::Ids(Builder& b) const {
  b.scope().UpdateStatus(absl::InvalidArgumentError(
      absl::StrCat("feature column '", name(), "' is not a categorical column")));
  return {};
}

Output Builder::Raw(const std::string& key, std::vector<DType> dtypes, const std::string& column) {
  auto it = features_.find(key);
  if (it == features_.end() || !it->second.valid()) {
    std::vector<std::string> keys;
    for (const auto& [k, unused] : features_) keys.push_back(k);
    scope_.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
        "feature column '", column, "' reads feature '", key,
        "', which the input does not have (it has: ", absl::StrJoin(keys, ", "), ")")));
    return Output();
  }
  const Output& x = it->second;
  if (std::find(dtypes.begin(), dtypes.end(), DType::kInt64) != dtypes.end()) {
    dtypes.push_back(DType::kInt32);
  }
  if (std::find(dtypes.begin(), dtypes.end(), x.dtype()) == dtypes.end()) {
    std::vector<std::string> names;
    for (DType d : dtypes) names.push_back(std::string(DTypeName(d)));
    scope_.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
        "feature column '", column, "' reads feature '", key, "' as ", absl::StrJoin(names, " or "),
        ", but the input gives ", DTypeName(x.dtype()))));
    return Output();
  }
  const PartialShape& s = x.shape();
  if (s.known_rank() && s.rank() != 1 && s.rank() != 2) {
    scope_.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat("feature '", key, "' must be [batch] or [batch, n], has shape ",
                     s.DebugString(), " (feature column '", column, "')")));
    return Output();
  }
  return x;
}

namespace internal {

absl::Status ColumnError(const std::string& column, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("feature column '", column, "': ", message));
}

absl::Status CheckTableFits(const std::string& column, int64_t rows, int64_t cols) {
  const double bytes = 4.0 * static_cast<double>(rows) * static_cast<double>(cols);
  if (bytes <= env::MemoryLimitBytes() / 2) return absl::OkStatus();
  return ColumnError(column, absl::StrCat("a table of ", rows, " x ", cols, " floats (",
                                          static_cast<int64_t>(bytes / (1 << 20)),
                                          " MiB) does not fit in half the memory this process "
                                          "may use"));
}

absl::Status AddRaw(RawFeatureSpec* spec, RawFeature feature, const std::string& column) {
  auto [it, inserted] = spec->try_emplace(feature.key, feature);
  if (inserted || it->second == feature) return absl::OkStatus();
  // TensorFlow's rule: one parse spec per key.
  return ColumnError(
      column, absl::StrCat("feature_columns contain different parse_spec for key ", feature.key,
                           ". Given ", it->second.DebugString(), " and ", feature.DebugString()));
}

}  // namespace internal

namespace {

using internal::AddRaw;
using internal::CachedDense;
using internal::CachedIds;

class NumericColumnImpl : public FeatureColumn {
 public:
  NumericColumnImpl(std::string name, std::string key, std::vector<int64_t> shape,
                    std::vector<double> default_value)
      : FeatureColumn(std::move(name)),
        key_(std::move(key)),
        shape_(std::move(shape)),
        default_(std::move(default_value)) {
    for (int64_t d : shape_) width_ *= d;
  }
  bool is_dense() const override { return true; }
  int64_t dense_width() const override { return width_; }
  absl::Status AddRawFeatures(RawFeatureSpec* spec) const override {
    return AddRaw(spec, RawFeature{key_, DType::kFloat, false, shape_, default_}, name());
  }
  // The raw values as [batch, width], in their own dtype.
  Output Values(Builder& b) const {
    Output x = b.Raw(key_, {DType::kFloat, DType::kInt64}, name());
    if (!x.valid()) return x;
    const PartialShape& s = x.shape();
    const int64_t n = s.known_rank() && s.rank() == 2 ? s.dim(1) : 1;
    if (n >= 0 && n != width_) {
      b.scope().UpdateStatus(
          ColumnError(name(), absl::StrCat("feature '", key_, "' has ", n,
                                           " values per example, the column's "
                                           "shape [",
                                           absl::StrJoin(shape_, ","), "] has ", width_)));
      return Output();
    }
    if (s.known_rank() && s.rank() == 2) return x;
    return ops::Reshape(b.scope().NewSubScope(name()), x, std::vector<int64_t>{-1, width_});
  }
  Output DenseTensor(Builder& b) const override {
    return CachedDense(b, this, [&](const Scope& s) {
      Output x = Values(b);
      if (!x.valid() || x.dtype() == DType::kFloat) return x;
      return ops::Cast(s, x, DType::kFloat);
    });
  }
  const std::string& key() const { return key_; }
  int64_t width() const { return width_; }

 private:
  std::string key_;
  std::vector<int64_t> shape_;
  std::vector<double> default_;
  int64_t width_ = 1;
};

class BucketizedColumnImpl : public FeatureColumn {
 public:
  BucketizedColumnImpl(std::string name, std::shared_ptr<const NumericColumnImpl> source,
                       std::vector<float> boundaries)
      : FeatureColumn(std::move(name)), source_(std::move(source)), boundaries_(boundaries) {}
  bool is_dense() const override { return true; }
  bool is_categorical() const override { return true; }
  int64_t num_buckets() const override {
    return (static_cast<int64_t>(boundaries_.size()) + 1) * source_->width();
  }
  int64_t dense_width() const override { return num_buckets(); }
  absl::Status AddRawFeatures(RawFeatureSpec* spec) const override {
    return source_->AddRawFeatures(spec);
  }
  CategoricalIds Ids(Builder& b) const override {
    return CachedIds(b, this, [&](const Scope& s) -> CategoricalIds {
      Output x = source_->Values(b);
      if (!x.valid()) return {};
      return {ops::CategoricalBucketize(s, x, boundaries_), Output()};
    });
  }
  Output DenseTensor(Builder& b) const override {
    return CachedDense(b, this, [&](const Scope& s) {
      CategoricalIds ids = Ids(b);
      if (!ids.ids.valid()) return Output();
      return ops::MultiHot(s, ids.ids, Output(), num_buckets());
    });
  }

 private:
  std::shared_ptr<const NumericColumnImpl> source_;
  std::vector<float> boundaries_;
};

class IndicatorColumnImpl : public FeatureColumn {
 public:
  IndicatorColumnImpl(std::string name, Column categorical)
      : FeatureColumn(std::move(name)), categorical_(std::move(categorical)) {}
  bool is_dense() const override { return true; }
  int64_t dense_width() const override { return categorical_->num_buckets(); }
  absl::Status AddRawFeatures(RawFeatureSpec* spec) const override {
    return categorical_->AddRawFeatures(spec);
  }
  Output DenseTensor(Builder& b) const override {
    return CachedDense(b, this, [&](const Scope& s) {
      CategoricalIds ids = categorical_->Ids(b);
      if (!ids.ids.valid()) return Output();
      return ops::MultiHot(s, ids.ids, ids.weights, categorical_->num_buckets());
    });
  }

 private:
  Column categorical_;
};

// Creates a float32 variable `name` of `shape` in `scope` with `init`.
ops::Variable MakeVariable(const Scope& scope, const std::string& name, const TensorShape& shape,
                           const ops::Initializer& init, bool trainable, bool table = false) {
  Output initial = init(scope.WithNoControlDependencies().NewSubScope(name + "/Initializer"), shape,
                        DType::kFloat);
  ops::VariableOptions options;
  options.trainable = trainable;
  options.table = table;
  return ops::Variable(scope, name, initial, options);
}

// A table of `shape` (rows x columns): whole, or in parts when the builder partitions
// tables. Empty on error (recorded in the scope).
std::vector<ops::Variable> MakeTable(Builder& b, const Scope& scope, const std::string& name,
                                     const TensorShape& shape, const ops::Initializer& init,
                                     bool trainable) {
  if (!b.partitioner) {
    ops::Variable v = MakeVariable(scope, name, shape, init, trainable, /*table=*/true);
    if (!v.valid()) return {};
    return {v};
  }
  ops::VariableOptions options;
  options.trainable = trainable;
  options.table = true;
  ops::PartitionedVariable pv(scope, name, shape, DType::kFloat, init, b.partitioner, options);
  if (!pv.valid()) return {};
  if (pv.axis() != 0) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat("table ", pv.name(), ": the partitioner split axis ", pv.axis(),
                     "; tables are split along their rows (axis 0)")));
    return {};
  }
  if (pv.num_parts() > 1) {
    LOG(INFO) << "Table " << pv.name() << " " << shape.DebugString() << " in " << pv.num_parts()
              << " parts of "
              << absl::StrJoin(ops::PartitionSizes(shape.dim(0), pv.num_parts()), ", ") << " rows";
  }
  return pv.parts();
}

// The bag of `ids` over `table` [buckets, d] (whole or in "div" parts): [batch, d].
Output Bag(const Scope& s, const std::vector<ops::Variable>& table, const CategoricalIds& ids,
           ops::Combiner combiner) {
  if (table.empty()) return Output();
  ops::BagPlan plan = ops::PrepareBag(s, ids.ids, ids.weights, combiner);
  if (!plan.unique_ids.valid()) return Output();
  Output rows = table.size() == 1
                    ? ops::ResourceGather(s.ColocateWith(table[0].handle().node), table[0].handle(),
                                          plan.unique_ids, DType::kFloat)
                    : ops::PartitionedRows(s, table, plan.unique_ids, "div");
  return ops::BagCombine(s, rows, plan);
}

class EmbeddingColumnImpl : public FeatureColumn {
 public:
  EmbeddingColumnImpl(std::string name, Column categorical, int64_t dimension,
                      EmbeddingOptions options)
      : FeatureColumn(std::move(name)),
        categorical_(std::move(categorical)),
        dimension_(dimension),
        options_(std::move(options)) {}
  bool is_dense() const override { return true; }
  bool has_table() const override { return true; }
  int64_t dense_width() const override { return dimension_; }
  absl::Status AddRawFeatures(RawFeatureSpec* spec) const override {
    return categorical_->AddRawFeatures(spec);
  }
  Output DenseTensor(Builder& b) const override {
    return CachedDense(b, this, [&](const Scope& s) {
      CategoricalIds ids = categorical_->Ids(b);
      if (!ids.ids.valid()) return Output();
      ops::Initializer init = options_.initializer.value_or(ops::TruncatedNormalInitializer(
          0.f, static_cast<float>(1.0 / std::sqrt(static_cast<double>(dimension_)))));
      std::vector<ops::Variable> table = MakeTable(
          b, s, "embedding_weights", TensorShape({categorical_->num_buckets(), dimension_}), init,
          options_.trainable);
      return Bag(s, table, ids, options_.combiner);
    });
  }

 private:
  Column categorical_;
  int64_t dimension_;
  EmbeddingOptions options_;
};

// Points a builder at `scope` until destroyed.
class ScopedBuilder {
 public:
  ScopedBuilder(Builder& b, const Scope& scope) : b_(b), saved_(b.scope()) { b.set_scope(scope); }
  ~ScopedBuilder() { b_.set_scope(saved_); }

 private:
  Builder& b_;
  Scope saved_;
};

// Columns ordered by name; an error for none, a null one, or two of one name.
absl::StatusOr<std::vector<Column>> SortedByName(std::vector<Column> columns,
                                                 absl::string_view layer) {
  if (columns.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(layer, ": feature_columns must not be empty"));
  }
  for (const Column& c : columns) {
    if (c == nullptr) return absl::InvalidArgumentError(absl::StrCat(layer, ": a null column"));
  }
  std::sort(columns.begin(), columns.end(),
            [](const Column& a, const Column& b) { return a->name() < b->name(); });
  for (size_t i = 1; i < columns.size(); ++i) {
    if (columns[i]->name() == columns[i - 1]->name()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Duplicate feature column name found for columns: ", columns[i]->name()));
    }
  }
  return columns;
}

// What InputLayer and LinearModel build with: the columns in name order, and a builder
// (the caller's, or `local`) pointed at the layer's name scope while the layer lives.
struct Layer {
  Layer(const Scope& outer, const Features& features, const std::vector<Column>& columns,
        Builder* builder, absl::string_view name)
      : scope(outer.NewSubScope(name)),
        sorted(SortedByName(columns, name)),
        local(scope, features),
        b(builder != nullptr ? *builder : local),
        in_layer(b, scope) {
    if (!sorted.ok()) outer.UpdateStatus(sorted.status());
  }
  const Scope scope;
  const absl::StatusOr<std::vector<Column>> sorted;
  Builder local;
  Builder& b;
  ScopedBuilder in_layer;
};

}  // namespace

absl::StatusOr<Column> NumericColumn(const std::string& key, std::vector<int64_t> shape,
                                     std::vector<double> default_value, const std::string& name) {
  const std::string n = name.empty() ? key : name;
  if (key.empty()) return ColumnError(n, "key must not be empty");
  int64_t width = 1;
  for (int64_t d : shape) {
    if (d < 1) return ColumnError(n, absl::StrCat("shape dimensions must be >= 1, got ", d));
    if (width > (int64_t{1} << 24) / d) return ColumnError(n, "shape has too many elements");
    width *= d;
  }
  if (shape.empty()) return ColumnError(n, "shape must have at least one dimension");
  if (default_value.size() == 1 && width > 1) default_value.assign(width, default_value[0]);
  if (!default_value.empty() && static_cast<int64_t>(default_value.size()) != width) {
    return ColumnError(n, absl::StrCat("default_value has ", default_value.size(),
                                       " values, the shape needs ", width));
  }
  return Column(
      std::make_shared<NumericColumnImpl>(n, key, std::move(shape), std::move(default_value)));
}

absl::StatusOr<Column> BucketizedColumn(const Column& source, std::vector<double> boundaries,
                                        const std::string& name) {
  auto numeric = std::dynamic_pointer_cast<const NumericColumnImpl>(source);
  const std::string n = name.empty() && source ? source->name() + "_bucketized" : name;
  if (numeric == nullptr) {
    return ColumnError(n, "source_column must be a numeric column");
  }
  if (boundaries.empty()) return ColumnError(n, "boundaries must not be empty");
  std::vector<float> b;
  for (size_t i = 0; i < boundaries.size(); ++i) {
    if (!std::isfinite(boundaries[i]) || (i > 0 && !(boundaries[i] > boundaries[i - 1]))) {
      return ColumnError(n, absl::StrCat("boundaries must be a sorted list of distinct numbers; "
                                         "entry ",
                                         i, " (", boundaries[i], ") breaks it"));
    }
    b.push_back(static_cast<float>(boundaries[i]));
  }
  return Column(std::make_shared<BucketizedColumnImpl>(n, numeric, std::move(b)));
}

absl::StatusOr<Column> IndicatorColumn(const Column& categorical, const std::string& name) {
  const std::string n = name.empty() && categorical ? categorical->name() + "_indicator" : name;
  if (categorical == nullptr || !categorical->is_categorical()) {
    return ColumnError(n, "indicator_column needs a categorical column");
  }
  if (categorical->num_buckets() > (int64_t{1} << 24)) {
    return ColumnError(n, absl::StrCat("an indicator of ", categorical->num_buckets(),
                                       " buckets is that many floats per example (more than "
                                       "2^24); use an embedding_column"));
  }
  return Column(std::make_shared<IndicatorColumnImpl>(n, categorical));
}

absl::StatusOr<Column> EmbeddingColumn(const Column& categorical, int64_t dimension,
                                       const EmbeddingOptions& options, const std::string& name) {
  const std::string n = name.empty() && categorical ? categorical->name() + "_embedding" : name;
  if (categorical == nullptr || !categorical->is_categorical()) {
    return ColumnError(n, "embedding_column needs a categorical column");
  }
  if (dimension < 1 || dimension > (int64_t{1} << 20)) {
    return ColumnError(n, absl::StrCat("Invalid dimension ", dimension, "."));
  }
  TANDEM_RETURN_IF_ERROR(internal::CheckTableFits(n, categorical->num_buckets(), dimension));
  return Column(std::make_shared<EmbeddingColumnImpl>(n, categorical, dimension, options));
}

absl::StatusOr<RawFeatureSpec> RawFeatures(const std::vector<Column>& columns) {
  RawFeatureSpec spec;
  for (const Column& c : columns) {
    if (c == nullptr) return absl::InvalidArgumentError("a feature column is null");
    TANDEM_RETURN_IF_ERROR(c->AddRawFeatures(&spec));
  }
  return spec;
}

Output InputLayer(const Scope& scope, const Features& features, const std::vector<Column>& columns,
                  Builder* builder) {
  Layer layer(scope, features, columns, builder, "input_layer");
  if (!layer.sorted.ok()) return Output();
  std::vector<Output> parts;
  for (const Column& c : *layer.sorted) {
    if (!c->is_dense()) {
      scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
          "Items of feature_columns must be a DenseColumn. You can wrap a categorical column "
          "with an embedding_column or indicator_column. Given: '",
          c->name(), "'")));
      return Output();
    }
    parts.push_back(c->DenseTensor(layer.b));
    if (!parts.back().valid()) return Output();
  }
  if (parts.size() == 1) return parts[0];
  return ops::Concat(layer.scope, parts, 1);
}

Output LinearModel(const Scope& scope, const Features& features, const std::vector<Column>& columns,
                   int64_t units, const LinearModelOptions& options, Builder* builder) {
  if (units < 1) {
    scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat("units must be >= 1, got ", units)));
    return Output();
  }
  Layer layer(scope, features, columns, builder, "linear_model");
  if (!layer.sorted.ok()) return Output();
  const Scope& s = layer.scope;
  Builder& b = layer.b;
  std::vector<Output> terms;
  for (const Column& c : *layer.sorted) {
    const Scope cs = s.NewSubScope(c->name());
    const int64_t rows = c->is_categorical() ? c->num_buckets() : c->dense_width();
    if (absl::Status s = internal::CheckTableFits(c->name(), rows, units); !s.ok()) {
      scope.UpdateStatus(s);
      return Output();
    }
    if (c->is_categorical()) {
      CategoricalIds ids = c->Ids(b);
      if (!ids.ids.valid()) return Output();
      std::vector<ops::Variable> w =
          MakeTable(b, cs, "weights", TensorShape({c->num_buckets(), units}),
                    ops::ZerosInitializer(), options.trainable);
      terms.push_back(Bag(cs, w, ids, options.sparse_combiner));
    } else {
      Output x = c->DenseTensor(b);
      if (!x.valid()) return Output();
      ops::Variable w = MakeVariable(cs, "weights", TensorShape({c->dense_width(), units}),
                                     ops::ZerosInitializer(), options.trainable);
      terms.push_back(ops::MatMul(cs, x, w.value()));
    }
    if (!terms.back().valid()) return Output();
  }
  ops::Variable bias = MakeVariable(s, "bias_weights", TensorShape({units}),
                                    ops::ZerosInitializer(), options.trainable);
  Output sum = terms.size() == 1 ? terms[0] : ops::AddN(s, terms);
  return ops::BiasAdd(s, sum, bias.value());
}

absl::StatusOr<ops::Combiner> ParseCombiner(absl::string_view name) {
  if (name == "sum") return ops::Combiner::kSum;
  if (name == "mean") return ops::Combiner::kMean;
  if (name == "sqrtn") return ops::Combiner::kSqrtn;
  return absl::InvalidArgumentError(
      absl::StrCat("combiner must be \"sum\", \"mean\" or \"sqrtn\", got \"", name, "\""));
}

}  // namespace tandem::feature_column

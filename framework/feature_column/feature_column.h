// framework/feature_column/feature_column.h
//
// Feature columns, as tf.feature_column: declarations of how raw input features
// (numbers, strings, integer ids) become model inputs. Each factory below is named
// after TensorFlow's function and has its meaning, defaults and column names
// ("age_bucketized", "education_X_occupation", "occupation_embedding").
//
//   auto age = NumericColumn("age");
//   auto age_buckets = BucketizedColumn(*age, {18, 25, 30, 35, 40, 45, 50, 55, 60, 65});
//   auto education = VocabularyListColumn("education", {"Bachelors", "HS-grad", ...});
//   auto occupation = HashBucketColumn("occupation", 1000);
//   auto cross = CrossedColumn({CrossKey("education"), CrossKey("occupation")}, 1000);
//   auto occupation_emb = EmbeddingColumn(*occupation, 8);
//   Output deep = InputLayer(scope, features, {*age, IndicatorColumn(*education)...});
//   Output wide = LinearModel(scope, features, {*education, *cross, ...}, /*units=*/1);
//
// Columns are dense (numeric, bucketized, indicator, embedding: a float32 [batch, width]
// for InputLayer), categorical (bucketized, vocabulary, hash bucket, identity, crossed,
// weighted: int64 ids [batch, n], -1 for none, with optional weights; see
// framework/ops/feature_ops.h), or both (bucketized). LinearModel takes either kind and
// uses a categorical column's ids when it has them (TensorFlow's rule); InputLayer
// takes dense columns only. Both order their columns by name, as TensorFlow does.
//
// Raw features: a numeric column reads float32 or integers [batch] or [batch, k]; a
// categorical column reads strings or integers [batch] or, variable-length, [batch, n]
// padded with '' or -1. RawFeatures (TensorFlow's make_parse_example_spec) says what
// every column reads, for the input pipeline and for serving.
//
// Variables (TensorFlow's names): LinearModel's "<scope>/<column>/weights" [buckets or
// width, units] and "<scope>/bias_weights" [units], zeros; an embedding column's
// "<scope>/<column>/embedding_weights" [buckets, dimension], truncated normal with
// stddev 1/sqrt(dimension) unless given.
//
// Tables (an embedding column's weights, a LinearModel's weights of a categorical
// column) may be partitioned along their rows: with Builder::partitioner set, each is
// an ops::PartitionedVariable ("<name>/part_<i>", TensorFlow's names), laid out by
// the "div" rule, and a batch's distinct ids are looked up row-exactly
// (ops::PartitionedRows: each part gathers, and receives gradient rows for, only its
// own ids). A table split in more than one part is logged. Every table (each of its
// parts) is created with ops::VariableOptions::table, so the hybrid strategy keeps it
// on the parameter servers.
//
// Errors: the factories return INVALID_ARGUMENT for bad declarations (TensorFlow's
// checks: unsorted boundaries, duplicate vocabulary entries, a hash-bucket column in a
// cross, a categorical column in InputLayer, ...); InputLayer and LinearModel record
// theirs in the scope (a missing feature, a raw feature of the wrong dtype).
//
// Thread safety: columns are immutable and may be shared; building is one thread.
#ifndef TANDEM_FRAMEWORK_FEATURE_COLUMN_FEATURE_COLUMN_H_
#define TANDEM_FRAMEWORK_FEATURE_COLUMN_FEATURE_COLUMN_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/graph/scope.h"
#include "framework/ops/feature_ops.h"
#include "framework/ops/initializers.h"
#include "framework/ops/partitioned_variables.h"

namespace tandem::feature_column {

using Features = std::map<std::string, Output>;

// What a column reads from the input (tf.io.FixedLenFeature / VarLenFeature).
struct RawFeature {
  std::string key;
  DType dtype = DType::kFloat;        // kFloat, kInt64 or kString.
  bool var_len = false;               // A list of any length per example.
  std::vector<int64_t> shape;         // Fixed length: the per-example shape ({1}: one value).
  std::vector<double> default_value;  // Fixed length: for a missing value; empty: required.
  bool operator==(const RawFeature& o) const = default;
  std::string DebugString() const;
};
using RawFeatureSpec = std::map<std::string, RawFeature>;

// Categorical ids of a batch: int64 [batch, n], -1 for none; weights float32 of the same
// shape or invalid.
struct CategoricalIds {
  Output ids;
  Output weights;
};

class Builder;

class FeatureColumn {
 public:
  virtual ~FeatureColumn() = default;
  FeatureColumn(const FeatureColumn&) = delete;
  FeatureColumn& operator=(const FeatureColumn&) = delete;

  const std::string& name() const { return name_; }
  virtual bool is_dense() const { return false; }
  virtual bool is_categorical() const { return false; }
  // Adds the raw features this column reads; INVALID_ARGUMENT naming the key when
  // `spec` already reads it differently.
  virtual absl::Status AddRawFeatures(RawFeatureSpec* spec) const = 0;
  // Dense columns: the width and the float32 [batch, width] tensor.
  virtual int64_t dense_width() const { return 0; }
  virtual Output DenseTensor(Builder& b) const;
  // Categorical columns: ids in [0, num_buckets) (or -1).
  virtual int64_t num_buckets() const { return 0; }
  virtual CategoricalIds Ids(Builder& b) const;
  // A dense column that owns a table (an embedding column).
  virtual bool has_table() const { return false; }

 protected:
  explicit FeatureColumn(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
};
using Column = std::shared_ptr<const FeatureColumn>;

// Builds columns over one batch of raw features, computing each column's transform once
// (TensorFlow's transformation cache): a column shared by a LinearModel and a cross
// gives one set of ops.
class Builder {
 public:
  Builder(const Scope& scope, const Features& features) : scope_(scope), features_(features) {}
  // Where columns first built now add their ops and variables (InputLayer and
  // LinearModel set their own while they build).
  const Scope& scope() const { return scope_; }
  void set_scope(const Scope& scope) { scope_ = scope; }
  // The raw feature `key` as [batch, n], checked against `dtypes` (int32 is taken for
  // int64); an invalid Output and an error in the scope when it is missing or mistyped.
  Output Raw(const std::string& key, std::vector<DType> dtypes, const std::string& column);

  // Cached results, by column.
  std::map<const FeatureColumn*, CategoricalIds> ids;
  std::map<const FeatureColumn*, Output> dense;
  // Splits the tables columns create (see above); null: whole tables.
  ops::Partitioner partitioner;

 private:
  Scope scope_;
  const Features& features_;
};

// ---- Factories. Each names its column as TensorFlow does unless `name` is given.

absl::StatusOr<Column> NumericColumn(const std::string& key, std::vector<int64_t> shape = {1},
                                     std::vector<double> default_value = {},
                                     const std::string& name = "");
// REQUIRES of `source`: a numeric column.
absl::StatusOr<Column> BucketizedColumn(const Column& source, std::vector<double> boundaries,
                                        const std::string& name = "");
struct VocabularyColumnOptions {
  DType dtype = DType::kString;  // Of the raw feature: kString or kInt64.
  int64_t default_value = -1;
  int64_t num_oov_buckets = 0;
};
absl::StatusOr<Column> VocabularyListColumn(const std::string& key,
                                            std::vector<std::string> vocabulary,
                                            const VocabularyColumnOptions& options = {},
                                            const std::string& name = "");
// One entry per line (a trailing newline ends the last one); `vocabulary_size` 0 reads
// every line, else the first that many (an error if the file has fewer).
absl::StatusOr<Column> VocabularyFileColumn(const std::string& key, const std::string& path,
                                            int64_t vocabulary_size = 0,
                                            const VocabularyColumnOptions& options = {},
                                            const std::string& name = "");
absl::StatusOr<Column> HashBucketColumn(const std::string& key, int64_t hash_bucket_size,
                                        DType dtype = DType::kString, const std::string& name = "");
absl::StatusOr<Column> IdentityColumn(const std::string& key, int64_t num_buckets,
                                      std::optional<int64_t> default_value = std::nullopt,
                                      const std::string& name = "");
// A key of a cross: a raw string or integer feature, or a categorical column.
struct CrossKey {
  CrossKey(std::string raw_key) : key(std::move(raw_key)) {}  // NOLINT: implicit by design.
  CrossKey(const char* raw_key) : key(raw_key) {}             // NOLINT
  CrossKey(Column c) : column(std::move(c)) {}                // NOLINT
  std::string key;
  Column column;
};
absl::StatusOr<Column> CrossedColumn(std::vector<CrossKey> keys, int64_t hash_bucket_size,
                                     std::optional<int64_t> hash_key = std::nullopt,
                                     const std::string& name = "");
absl::StatusOr<Column> WeightedCategoricalColumn(const Column& categorical,
                                                 const std::string& weight_key,
                                                 const std::string& name = "");
absl::StatusOr<Column> IndicatorColumn(const Column& categorical, const std::string& name = "");
struct EmbeddingOptions {
  ops::Combiner combiner = ops::Combiner::kMean;
  std::optional<ops::Initializer> initializer;  // Default: truncated normal, 1/sqrt(dim).
  bool trainable = true;
};
absl::StatusOr<Column> EmbeddingColumn(const Column& categorical, int64_t dimension,
                                       const EmbeddingOptions& options = {},
                                       const std::string& name = "");

// ---- Using columns.

// make_parse_example_spec: the raw features `columns` read.
absl::StatusOr<RawFeatureSpec> RawFeatures(const std::vector<Column>& columns);

// input_layer / DenseFeatures: the dense columns' tensors, ordered by name and
// concatenated: float32 [batch, sum of widths]. A column that is not dense is an error
// (TensorFlow's message). Variables live under `scope`'s name scope. `builder` (may be
// null) shares transforms with other calls over the same features.
Output InputLayer(const Scope& scope, const Features& features, const std::vector<Column>& columns,
                  Builder* builder = nullptr);

// linear_model: sum over columns of their ids' weights (combined by `sparse_combiner`)
// or of x * weights for dense columns, plus bias: float32 [batch, units].
struct LinearModelOptions {
  ops::Combiner sparse_combiner = ops::Combiner::kSum;
  bool trainable = true;
};
Output LinearModel(const Scope& scope, const Features& features, const std::vector<Column>& columns,
                   int64_t units, const LinearModelOptions& options = {},
                   Builder* builder = nullptr);

// "sum", "mean", "sqrtn" (INVALID_ARGUMENT otherwise).
absl::StatusOr<ops::Combiner> ParseCombiner(absl::string_view name);

}  // namespace tandem::feature_column

#endif  // TANDEM_FRAMEWORK_FEATURE_COLUMN_FEATURE_COLUMN_H_

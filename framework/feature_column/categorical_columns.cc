// framework/feature_column/categorical_columns.cc
//
// The categorical columns: vocabulary (list and file), hash bucket, identity, crossed
// and weighted (feature_column.h).
#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/feature_column/feature_column.h"
#include "framework/feature_column/internal.h"
#include "framework/ops/math_ops.h"

namespace tandem::feature_column {

using internal::AddRaw;
using internal::CachedIds;
using internal::ColumnError;

namespace {

// A column reading one raw categorical feature (a list of any length per example).
class RawCategorical : public FeatureColumn {
 public:
  RawCategorical(std::string name, std::string key, DType dtype, int64_t buckets)
      : FeatureColumn(std::move(name)), key_(std::move(key)), dtype_(dtype), buckets_(buckets) {}
  bool is_categorical() const override { return true; }
  int64_t num_buckets() const override { return buckets_; }
  absl::Status AddRawFeatures(RawFeatureSpec* spec) const override {
    return AddRaw(spec, RawFeature{key_, dtype_, true, {}, {}}, name());
  }
  CategoricalIds Ids(Builder& b) const override {
    return CachedIds(b, this, [&](const Scope& s) -> CategoricalIds {
      Output raw = b.Raw(key_, {dtype_}, name());
      if (!raw.valid()) return {};
      return {Transform(s, raw), Output()};
    });
  }

 protected:
  virtual Output Transform(const Scope& s, Output raw) const = 0;

 private:
  std::string key_;
  DType dtype_;
  int64_t buckets_;
};

class VocabularyColumnImpl : public RawCategorical {
 public:
  VocabularyColumnImpl(std::string name, std::string key, std::vector<std::string> vocabulary,
                       const VocabularyColumnOptions& o)
      : RawCategorical(std::move(name), std::move(key), o.dtype,
                       static_cast<int64_t>(vocabulary.size()) + o.num_oov_buckets),
        vocabulary_(std::move(vocabulary)),
        options_(o) {}

 protected:
  Output Transform(const Scope& s, Output raw) const override {
    ops::VocabularyOptions vo;
    vo.num_oov_buckets = options_.num_oov_buckets;
    vo.default_value = options_.default_value;
    return ops::CategoricalVocabulary(s, raw, vocabulary_, vo);
  }

 private:
  std::vector<std::string> vocabulary_;
  VocabularyColumnOptions options_;
};

class HashBucketColumnImpl : public RawCategorical {
 public:
  using RawCategorical::RawCategorical;

 protected:
  Output Transform(const Scope& s, Output raw) const override {
    return ops::CategoricalHash(s, raw, num_buckets());
  }
};

class IdentityColumnImpl : public RawCategorical {
 public:
  IdentityColumnImpl(std::string name, std::string key, int64_t buckets,
                     std::optional<int64_t> default_value)
      : RawCategorical(std::move(name), std::move(key), DType::kInt64, buckets),
        default_(default_value) {}

 protected:
  Output Transform(const Scope& s, Output raw) const override {
    return ops::CategoricalIdentity(s, raw, num_buckets(), default_.has_value(),
                                    default_.value_or(-1));
  }

 private:
  std::optional<int64_t> default_;
};

class CrossedColumnImpl : public FeatureColumn {
 public:
  // `leaves`: the flattened keys, columns first, then raw keys (TensorFlow's order for
  // dense inputs: its sparse inputs, the columns' ids, come before dense ones).
  CrossedColumnImpl(std::string name, std::vector<CrossKey> leaves, int64_t buckets,
                    int64_t hash_key)
      : FeatureColumn(std::move(name)),
        leaves_(std::move(leaves)),
        buckets_(buckets),
        hash_key_(hash_key) {}
  bool is_categorical() const override { return true; }
  int64_t num_buckets() const override { return buckets_; }
  const std::vector<CrossKey>& leaves() const { return leaves_; }
  absl::Status AddRawFeatures(RawFeatureSpec* spec) const override {
    for (const CrossKey& k : leaves_) {
      if (k.column != nullptr) {
        TANDEM_RETURN_IF_ERROR(k.column->AddRawFeatures(spec));
      } else {
        TANDEM_RETURN_IF_ERROR(AddRaw(spec, RawFeature{k.key, DType::kString, true, {}, {}}, name()));
      }
    }
    return absl::OkStatus();
  }
  CategoricalIds Ids(Builder& b) const override {
    return CachedIds(b, this, [&](const Scope& s) -> CategoricalIds {
      std::vector<Output> inputs;
      for (const CrossKey& k : leaves_) {
        Output in = k.column != nullptr ? k.column->Ids(b).ids
                                        : b.Raw(k.key, {DType::kString, DType::kInt64}, name());
        if (!in.valid()) return {};
        inputs.push_back(in);
      }
      return {ops::CategoricalCross(s, inputs, buckets_, hash_key_), Output()};
    });
  }

 private:
  std::vector<CrossKey> leaves_;
  int64_t buckets_;
  int64_t hash_key_;
};

class WeightedColumnImpl : public FeatureColumn {
 public:
  WeightedColumnImpl(std::string name, Column categorical, std::string weight_key)
      : FeatureColumn(std::move(name)),
        categorical_(std::move(categorical)),
        weight_key_(std::move(weight_key)) {}
  bool is_categorical() const override { return true; }
  int64_t num_buckets() const override { return categorical_->num_buckets(); }
  absl::Status AddRawFeatures(RawFeatureSpec* spec) const override {
    TANDEM_RETURN_IF_ERROR(categorical_->AddRawFeatures(spec));
    return AddRaw(spec, RawFeature{weight_key_, DType::kFloat, true, {}, {}}, name());
  }
  CategoricalIds Ids(Builder& b) const override {
    return CachedIds(b, this, [&](const Scope& s) -> CategoricalIds {
      CategoricalIds ids = categorical_->Ids(b);
      Output w = b.Raw(weight_key_, {DType::kFloat}, name());
      if (!ids.ids.valid() || !w.valid()) return {};
      return {ids.ids, w};
    });
  }

 private:
  Column categorical_;
  std::string weight_key_;
};

absl::Status CheckVocabularyOptions(const std::string& n, const VocabularyColumnOptions& o) {
  if (o.dtype != DType::kString && o.dtype != DType::kInt64) {
    return ColumnError(n, absl::StrCat("dtype must be string or int64, got ", DTypeName(o.dtype)));
  }
  if (o.num_oov_buckets < 0 || o.num_oov_buckets > (int64_t{1} << 40)) {
    return ColumnError(n, absl::StrCat("Invalid num_oov_buckets ", o.num_oov_buckets, "."));
  }
  if (o.num_oov_buckets > 0 && o.default_value != -1) {
    return ColumnError(n, "Can't specify both num_oov_buckets and default_value.");
  }
  return absl::OkStatus();
}

// Duplicates and, for an int64 column, entries that are not integers.
absl::Status CheckVocabulary(const std::string& n, const std::vector<std::string>& vocabulary,
                             DType dtype, const std::string& where,
                             const std::function<std::string(size_t)>& position) {
  if (vocabulary.empty()) return ColumnError(n, absl::StrCat(where, " is empty"));
  absl::flat_hash_map<absl::string_view, size_t> seen;
  for (size_t i = 0; i < vocabulary.size(); ++i) {
    int64_t v;
    if (dtype == DType::kInt64 && !absl::SimpleAtoi(vocabulary[i], &v)) {
      return ColumnError(n, absl::StrCat(where, position(i), ": \"", vocabulary[i],
                                         "\" is not an integer (the column's dtype is int64)"));
    }
    auto [it, inserted] = seen.try_emplace(vocabulary[i], i);
    if (!inserted) {
      return ColumnError(n, absl::StrCat("Duplicate keys in ", where, ": \"", vocabulary[i],
                                         "\" at ", position(it->second), " and ", position(i)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Column> VocabularyListColumn(const std::string& key,
                                            std::vector<std::string> vocabulary,
                                            const VocabularyColumnOptions& options,
                                            const std::string& name) {
  const std::string n = name.empty() ? key : name;
  if (key.empty()) return ColumnError(n, "key must not be empty");
  TANDEM_RETURN_IF_ERROR(CheckVocabularyOptions(n, options));
  TANDEM_RETURN_IF_ERROR(CheckVocabulary(n, vocabulary, options.dtype, "vocabulary_list",
                                         [](size_t i) { return absl::StrCat("entry ", i); }));
  return Column(std::make_shared<VocabularyColumnImpl>(n, key, std::move(vocabulary), options));
}

absl::StatusOr<Column> VocabularyFileColumn(const std::string& key, const std::string& path,
                                            int64_t vocabulary_size,
                                            const VocabularyColumnOptions& options,
                                            const std::string& name) {
  const std::string n = name.empty() ? key : name;
  if (key.empty()) return ColumnError(n, "key must not be empty");
  TANDEM_RETURN_IF_ERROR(CheckVocabularyOptions(n, options));
  if (vocabulary_size < 0) {
    return ColumnError(n, absl::StrCat("Invalid vocabulary_size ", vocabulary_size, "."));
  }
  absl::StatusOr<std::string> text = env::ReadFile(path);
  if (!text.ok()) {
    return ColumnError(n, absl::StrCat("vocabulary_file: ", text.status().message()));
  }
  std::vector<std::string> vocabulary;
  size_t pos = 0;
  while (pos < text->size()) {
    size_t end = text->find('\n', pos);
    if (end == std::string::npos) end = text->size();
    absl::string_view line(text->data() + pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    vocabulary.emplace_back(line);
    pos = end + 1;
    if (vocabulary_size > 0 && static_cast<int64_t>(vocabulary.size()) == vocabulary_size) break;
  }
  if (vocabulary_size > 0 && static_cast<int64_t>(vocabulary.size()) < vocabulary_size) {
    return ColumnError(n, absl::StrCat("vocabulary_file ", path, " has ", vocabulary.size(),
                                       " lines, fewer than vocabulary_size ", vocabulary_size));
  }
  TANDEM_RETURN_IF_ERROR(CheckVocabulary(n, vocabulary, options.dtype,
                                         absl::StrCat("vocabulary_file ", path),
                                         [](size_t i) { return absl::StrCat("line ", i + 1); }));
  return Column(std::make_shared<VocabularyColumnImpl>(n, key, std::move(vocabulary), options));
}

absl::StatusOr<Column> HashBucketColumn(const std::string& key, int64_t hash_bucket_size,
                                        DType dtype, const std::string& name) {
  const std::string n = name.empty() ? key : name;
  if (key.empty()) return ColumnError(n, "key must not be empty");
  if (hash_bucket_size < 1 || hash_bucket_size > (int64_t{1} << 40)) {
    return ColumnError(n, absl::StrCat("hash_bucket_size must be at least 1 (and at most 2^40). "
                                       "hash_bucket_size: ",
                                       hash_bucket_size));
  }
  if (dtype != DType::kString && dtype != DType::kInt64) {
    return ColumnError(n, absl::StrCat("dtype must be string or int64, got ", DTypeName(dtype)));
  }
  return Column(std::make_shared<HashBucketColumnImpl>(n, key, dtype, hash_bucket_size));
}

absl::StatusOr<Column> IdentityColumn(const std::string& key, int64_t num_buckets,
                                      std::optional<int64_t> default_value,
                                      const std::string& name) {
  const std::string n = name.empty() ? key : name;
  if (key.empty()) return ColumnError(n, "key must not be empty");
  if (num_buckets < 1 || num_buckets > (int64_t{1} << 40)) {
    return ColumnError(n, absl::StrCat("num_buckets ", num_buckets, " < 1 (or > 2^40)"));
  }
  if (default_value && (*default_value < 0 || *default_value >= num_buckets)) {
    return ColumnError(n, absl::StrCat("default_value ", *default_value, " not in range [0, ",
                                       num_buckets, ")"));
  }
  return Column(std::make_shared<IdentityColumnImpl>(n, key, num_buckets, default_value));
}

absl::StatusOr<Column> CrossedColumn(std::vector<CrossKey> keys, int64_t hash_bucket_size,
                                     std::optional<int64_t> hash_key, const std::string& name) {
  // Leaves, nested crosses expanded in place (TensorFlow's _collect_leaf_level_keys).
  std::vector<CrossKey> columns, raw;
  std::vector<std::string> leaf_names;
  std::function<absl::Status(const std::vector<CrossKey>&)> collect =
      [&](const std::vector<CrossKey>& ks) -> absl::Status {
    for (const CrossKey& k : ks) {
      if (k.column == nullptr) {
        if (k.key.empty()) return absl::InvalidArgumentError("crossed_column: an empty key");
        raw.push_back(k);
        leaf_names.push_back(k.key);
      } else if (auto c = std::dynamic_pointer_cast<const CrossedColumnImpl>(k.column)) {
        TANDEM_RETURN_IF_ERROR(collect(c->leaves()));
      } else if (std::dynamic_pointer_cast<const HashBucketColumnImpl>(k.column)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "categorical_column_with_hash_bucket is not supported for crossing. Hashing before "
            "crossing will increase probability of collision. Instead, use the feature name as "
            "a string. Given: '",
            k.column->name(), "'"));
      } else if (std::dynamic_pointer_cast<const WeightedColumnImpl>(k.column)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "crossed_column does not support weight_tensor, but the given column populates "
            "weight_tensor. Given column: '",
            k.column->name(), "'"));
      } else if (!k.column->is_categorical()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Unsupported key type. All keys must be either string, or categorical column "
            "except HashedCategoricalColumn. Given: '",
            k.column->name(), "' (a dense column; a numeric column can be crossed through a "
                              "bucketized column)"));
      } else {
        columns.push_back(k);
        leaf_names.push_back(k.column->name());
      }
    }
    return absl::OkStatus();
  };
  TANDEM_RETURN_IF_ERROR(collect(keys));
  std::vector<std::string> sorted = leaf_names;
  std::sort(sorted.begin(), sorted.end());
  const std::string n = name.empty() ? absl::StrJoin(sorted, "_X_") : name;
  if (keys.size() < 2) {
    return ColumnError(n, absl::StrCat("keys must be a list with length > 1. Given: ", keys.size()));
  }
  if (hash_bucket_size < 1 || hash_bucket_size > (int64_t{1} << 40)) {
    return ColumnError(n, absl::StrCat("hash_bucket_size must be > 1. hash_bucket_size: ",
                                       hash_bucket_size));
  }
  columns.insert(columns.end(), raw.begin(), raw.end());
  return Column(std::make_shared<CrossedColumnImpl>(n, std::move(columns), hash_bucket_size,
                                                    hash_key.value_or(ops::kCrossHashKey)));
}

absl::StatusOr<Column> WeightedCategoricalColumn(const Column& categorical,
                                                 const std::string& weight_key,
                                                 const std::string& name) {
  const std::string n = name.empty() && categorical
                            ? absl::StrCat(categorical->name(), "_weighted_by_", weight_key)
                            : name;
  if (categorical == nullptr || !categorical->is_categorical()) {
    return ColumnError(n, "weighted_categorical_column needs a categorical column");
  }
  if (std::dynamic_pointer_cast<const WeightedColumnImpl>(categorical)) {
    return ColumnError(n, "the categorical column is already weighted");
  }
  if (weight_key.empty()) return ColumnError(n, "weight_feature_key must not be empty");
  return Column(std::make_shared<WeightedColumnImpl>(n, categorical, weight_key));
}

}  // namespace tandem::feature_column

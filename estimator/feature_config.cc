// estimator/feature_config.cc
//
// [features] tables -> feature columns (feature_config.h).
#include "estimator/feature_config.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "estimator/internal/did_you_mean.h"
#include "framework/core/status.h"

namespace tandem {
namespace {

namespace fc = feature_column;
using Type = ParamValue::Type;

// TensorFlow's function names, as aliases of the short type names.
const std::map<std::string, std::string>& TypeAliases() {
  static const auto* aliases = new std::map<std::string, std::string>{
      {"numeric_column", "numeric"},
      {"bucketized_column", "bucketized"},
      {"categorical_column_with_vocabulary_list", "vocabulary_list"},
      {"categorical_column_with_vocabulary_file", "vocabulary_file"},
      {"categorical_column_with_hash_bucket", "hash_bucket"},
      {"categorical_column_with_identity", "identity"},
      {"crossed_column", "crossed"},
      {"weighted_categorical_column", "weighted"},
      {"indicator_column", "indicator"},
      {"embedding_column", "embedding"},
  };
  return *aliases;
}

// The keys each type takes (besides "type"); a pair of spellings are one key.
const std::map<std::string, std::vector<std::string>>& TypeKeys() {
  static const auto* keys = new std::map<std::string, std::vector<std::string>>{
      {"numeric", {"key", "shape", "default_value"}},
      {"bucketized", {"source", "source_column", "boundaries"}},
      {"vocabulary_list", {"key", "vocabulary", "vocabulary_list", "dtype", "default_value",
                           "num_oov_buckets"}},
      {"vocabulary_file", {"key", "vocabulary_file", "vocabulary_size", "dtype", "default_value",
                           "num_oov_buckets"}},
      {"hash_bucket", {"key", "hash_bucket_size", "dtype"}},
      {"identity", {"key", "num_buckets", "default_value"}},
      {"crossed", {"keys", "hash_bucket_size", "hash_key"}},
      {"weighted", {"categorical", "categorical_column", "weight_feature_key"}},
      {"indicator", {"categorical", "categorical_column"}},
      {"embedding", {"categorical", "categorical_column", "dimension", "combiner",
                     "initializer_stddev", "trainable", "max_norm"}},
  };
  return *keys;
}

// Typed reads of one table's keys, with errors naming the table, the key and its place.
class Table {
 public:
  Table(std::string name, const FeatureTable& t) : name_(std::move(name)), t_(t) {}

  const std::string& name() const { return name_; }
  absl::Status Error(const std::string& key, absl::string_view message,
                     absl::StatusCode code = absl::StatusCode::kInvalidArgument) const {
    auto it = t_.where.find(key);
    if (it == t_.where.end()) it = t_.where.find("");
    const std::string where = it == t_.where.end() ? "" : it->second + ": ";
    return ConfigError(absl::StrCat(where, "[features.", name_, "]", key.empty() ? "" : " ", key,
                                    key.empty() ? ": " : " ", message),
                       code);
  }
  bool Has(const std::string& key) const { return t_.keys.contains(key); }
  // The first of `keys` present, or "".
  std::string Which(std::initializer_list<const char*> keys) const {
    for (const char* k : keys) {
      if (Has(k)) return k;
    }
    return "";
  }

  absl::StatusOr<const ParamValue*> Get(const std::string& key, Type type, const char* want,
                                        bool required) const {
    auto it = t_.keys.find(key);
    if (it == t_.keys.end()) {
      if (required) return Error(key, "is required");
      return nullptr;
    }
    const ParamValue& v = it->second;
    if (v.type != type && !(type == Type::kDouble && v.type == Type::kInt)) {
      return Error(key, absl::StrCat("must be ", want));
    }
    return &v;
  }
  absl::StatusOr<std::string> String(const std::string& key, const std::string& def,
                                     bool required = false) const {
    TANDEM_ASSIGN_OR_RETURN(const ParamValue* v, Get(key, Type::kString, "a string", required));
    return v == nullptr ? def : v->string_value;
  }
  absl::StatusOr<int64_t> Int(const std::string& key, int64_t def, bool required = false) const {
    TANDEM_ASSIGN_OR_RETURN(const ParamValue* v, Get(key, Type::kInt, "an integer", required));
    return v == nullptr ? def : v->int_value;
  }
  absl::StatusOr<std::optional<int64_t>> OptionalInt(const std::string& key) const {
    TANDEM_ASSIGN_OR_RETURN(const ParamValue* v, Get(key, Type::kInt, "an integer", false));
    if (v == nullptr) return std::optional<int64_t>();
    return std::optional<int64_t>(v->int_value);
  }
  absl::StatusOr<bool> Bool(const std::string& key, bool def) const {
    TANDEM_ASSIGN_OR_RETURN(const ParamValue* v, Get(key, Type::kBool, "true or false", false));
    return v == nullptr ? def : v->bool_value;
  }
  // A number or an array of numbers.
  absl::StatusOr<std::vector<double>> Numbers(const std::string& key, bool required) const {
    auto it = t_.keys.find(key);
    if (it == t_.keys.end()) {
      if (required) return Error(key, "is required");
      return std::vector<double>();
    }
    auto number = [](const ParamValue& v, double* out) {
      if (v.type == Type::kInt) *out = static_cast<double>(v.int_value);
      else if (v.type == Type::kDouble) *out = v.double_value;
      else return false;
      return std::isfinite(*out);
    };
    std::vector<double> out;
    double x;
    if (number(it->second, &x)) return std::vector<double>{x};
    if (it->second.type != Type::kArray) return Error(key, "must be a number or numbers");
    for (const ParamValue& v : it->second.array) {
      if (!number(v, &x)) return Error(key, "must hold finite numbers only");
      out.push_back(x);
    }
    return out;
  }
  absl::StatusOr<std::vector<int64_t>> Ints(const std::string& key) const {
    auto it = t_.keys.find(key);
    std::vector<int64_t> out;
    if (it == t_.keys.end()) return out;
    if (it->second.type != Type::kArray) return Error(key, "must be an array of integers");
    for (const ParamValue& v : it->second.array) {
      if (v.type != Type::kInt) return Error(key, "must hold integers only");
      out.push_back(v.int_value);
    }
    return out;
  }
  // Strings (or, with `ints`, integers kept as their decimal text).
  absl::StatusOr<std::vector<std::string>> Strings(const std::string& key, bool* ints) const {
    auto it = t_.keys.find(key);
    if (it == t_.keys.end()) return Error(key, "is required");
    if (it->second.type != Type::kArray) return Error(key, "must be an array");
    std::vector<std::string> out;
    bool saw_int = false, saw_string = false;
    for (const ParamValue& v : it->second.array) {
      if (v.type == Type::kString) {
        saw_string = true;
        out.push_back(v.string_value);
      } else if (v.type == Type::kInt && ints != nullptr) {
        saw_int = true;
        out.push_back(absl::StrCat(v.int_value));
      } else {
        return Error(key, ints != nullptr ? "must hold strings or integers" : "must hold strings");
      }
    }
    if (saw_int && saw_string) return Error(key, "mixes strings and integers");
    if (ints != nullptr) *ints = saw_int;
    return out;
  }

  // An error for a key the type does not take.
  absl::Status CheckKeys(const std::string& type) const {
    std::vector<std::string> known = TypeKeys().at(type);
    known.push_back("type");
    for (const auto& [key, unused] : t_.keys) {
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        return Error(key, absl::StrCat("is not a key of a ", type, " column",
                                       internal::DidYouMean(key, known), "; its keys: ",
                                       absl::StrJoin(TypeKeys().at(type), ", ")));
      }
    }
    return absl::OkStatus();
  }

 private:
  std::string name_;
  const FeatureTable& t_;
};

absl::StatusOr<DType> ParseColumnDType(const Table& t, const std::string& def) {
  TANDEM_ASSIGN_OR_RETURN(std::string d, t.String("dtype", def));
  if (d == "string") return DType::kString;
  if (d == "int64") return DType::kInt64;
  return t.Error("dtype", absl::StrCat("must be \"string\" or \"int64\", got \"", d, "\""));
}

class Resolver {
 public:
  explicit Resolver(const JobConfig& job) : job_(job) {}

  absl::StatusOr<std::map<std::string, fc::Column>> All() {
    for (const auto& [name, unused] : job_.features) {
      TANDEM_RETURN_IF_ERROR(Resolve(name, nullptr, "").status());
    }
    return built_;
  }

 private:
  // The column `name`, built once; `from`/`key` name the reference for errors.
  absl::StatusOr<fc::Column> Resolve(const std::string& name, const Table* from,
                                     const std::string& key) {
    if (auto it = built_.find(name); it != built_.end()) return it->second;
    auto it = job_.features.find(name);
    if (it == job_.features.end()) {
      std::vector<std::string> names;
      for (const auto& [n, unused] : job_.features) names.push_back(n);
      return from->Error(key, absl::StrCat("names no feature column '", name, "'",
                                           internal::DidYouMean(name, names),
                                           names.empty() ? "" : "; the columns: ",
                                           absl::StrJoin(names, ", ")));
    }
    if (!in_progress_.insert(name).second) {
      return from->Error(key, absl::StrCat("makes a cycle through '", name, "'"));
    }
    Table t(name, it->second);
    absl::StatusOr<fc::Column> c = Build(t);
    in_progress_.erase(name);
    if (!c.ok()) return c.status();
    built_[name] = *c;
    return c;
  }

  // A reference to another column by one of `keys`.
  absl::StatusOr<fc::Column> Ref(const Table& t, std::initializer_list<const char*> keys) {
    const std::string k = t.Which(keys);
    if (k.empty()) return t.Error(*keys.begin(), "is required");
    TANDEM_ASSIGN_OR_RETURN(std::string ref, t.String(k, "", true));
    return Resolve(ref, &t, k);
  }

  // Whether table `name` is a base column that reads a raw feature named `name`.
  bool ReadsItsOwnName(const std::string& name) const {
    auto it = job_.features.find(name);
    if (it == job_.features.end()) return false;
    const ParamMap& keys = it->second.keys;
    auto type = keys.find("type");
    if (type == keys.end() || type->second.type != Type::kString) return false;
    std::string ty = type->second.string_value;
    if (auto a = TypeAliases().find(ty); a != TypeAliases().end()) ty = a->second;
    if (ty != "numeric" && ty != "vocabulary_list" && ty != "vocabulary_file" &&
        ty != "hash_bucket" && ty != "identity") {
      return false;
    }
    auto key = keys.find("key");
    return key == keys.end() || (key->second.type == Type::kString && key->second.string_value == name);
  }

  absl::StatusOr<fc::Column> Build(const Table& t) {
    TANDEM_ASSIGN_OR_RETURN(std::string type, t.String("type", "", true));
    if (auto a = TypeAliases().find(type); a != TypeAliases().end()) type = a->second;
    if (!TypeKeys().contains(type)) {
      std::vector<std::string> types;
      for (const auto& [ty, unused] : TypeKeys()) types.push_back(ty);
      return t.Error("type", absl::StrCat("unknown column type '", type, "'",
                                          internal::DidYouMean(type, types),
                                          "; the types: ", absl::StrJoin(types, ", ")));
    }
    TANDEM_RETURN_IF_ERROR(t.CheckKeys(type));
    TANDEM_ASSIGN_OR_RETURN(std::string key, t.String("key", t.name()));
    if (type == "numeric") {
      TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> shape, t.Ints("shape"));
      if (shape.empty()) shape = {1};
      TANDEM_ASSIGN_OR_RETURN(std::vector<double> def, t.Numbers("default_value", false));
      return Wrapped(t, fc::NumericColumn(key, shape, def, t.name()), "shape");
    }
    if (type == "bucketized") {
      TANDEM_ASSIGN_OR_RETURN(fc::Column source, Ref(t, {"source", "source_column"}));
      TANDEM_ASSIGN_OR_RETURN(std::vector<double> b, t.Numbers("boundaries", true));
      return Wrapped(t, fc::BucketizedColumn(source, b, t.name()), "boundaries");
    }
    if (type == "vocabulary_list" || type == "vocabulary_file") {
      fc::VocabularyColumnOptions o;
      TANDEM_ASSIGN_OR_RETURN(o.default_value, t.Int("default_value", -1));
      TANDEM_ASSIGN_OR_RETURN(o.num_oov_buckets, t.Int("num_oov_buckets", 0));
      if (type == "vocabulary_file") {
        TANDEM_ASSIGN_OR_RETURN(o.dtype, ParseColumnDType(t, "string"));
        TANDEM_ASSIGN_OR_RETURN(std::string path, t.String("vocabulary_file", "", true));
        TANDEM_ASSIGN_OR_RETURN(int64_t size, t.Int("vocabulary_size", 0));
        return Wrapped(t, fc::VocabularyFileColumn(key, path, size, o, t.name()), "vocabulary_file");
      }
      const std::string vkey = t.Which({"vocabulary", "vocabulary_list"});
      bool ints = false;
      TANDEM_ASSIGN_OR_RETURN(std::vector<std::string> vocab,
                              t.Strings(vkey.empty() ? "vocabulary" : vkey, &ints));
      TANDEM_ASSIGN_OR_RETURN(o.dtype, ParseColumnDType(t, ints ? "int64" : "string"));
      if (ints != (o.dtype == DType::kInt64)) {
        return t.Error("dtype", ints ? "is \"string\" but the vocabulary holds integers"
                                     : "is \"int64\" but the vocabulary holds strings");
      }
      return Wrapped(t, fc::VocabularyListColumn(key, std::move(vocab), o, t.name()),
                     vkey.empty() ? "vocabulary" : vkey);
    }
    if (type == "hash_bucket") {
      TANDEM_ASSIGN_OR_RETURN(int64_t size, t.Int("hash_bucket_size", 0, true));
      TANDEM_ASSIGN_OR_RETURN(DType dtype, ParseColumnDType(t, "string"));
      return Wrapped(t, fc::HashBucketColumn(key, size, dtype, t.name()), "hash_bucket_size");
    }
    if (type == "identity") {
      TANDEM_ASSIGN_OR_RETURN(int64_t n, t.Int("num_buckets", 0, true));
      TANDEM_ASSIGN_OR_RETURN(std::optional<int64_t> def, t.OptionalInt("default_value"));
      return Wrapped(t, fc::IdentityColumn(key, n, def, t.name()), "num_buckets");
    }
    if (type == "crossed") {
      TANDEM_ASSIGN_OR_RETURN(std::vector<std::string> names, t.Strings("keys", nullptr));
      std::vector<fc::CrossKey> keys;
      for (const std::string& k : names) {
        if (job_.features.contains(k) && !ReadsItsOwnName(k)) {
          TANDEM_ASSIGN_OR_RETURN(fc::Column c, Resolve(k, &t, "keys"));
          keys.emplace_back(c);
        } else {
          keys.emplace_back(k);
        }
      }
      TANDEM_ASSIGN_OR_RETURN(int64_t size, t.Int("hash_bucket_size", 0, true));
      TANDEM_ASSIGN_OR_RETURN(std::optional<int64_t> hash_key, t.OptionalInt("hash_key"));
      return Wrapped(t, fc::CrossedColumn(std::move(keys), size, hash_key, t.name()), "keys");
    }
    TANDEM_ASSIGN_OR_RETURN(fc::Column categorical, Ref(t, {"categorical", "categorical_column"}));
    if (type == "weighted") {
      TANDEM_ASSIGN_OR_RETURN(std::string weight, t.String("weight_feature_key", "", true));
      return Wrapped(t, fc::WeightedCategoricalColumn(categorical, weight, t.name()));
    }
    if (type == "indicator") return Wrapped(t, fc::IndicatorColumn(categorical, t.name()));
    // embedding
    if (t.Has("max_norm")) {
      return t.Error("max_norm", "is not supported (UNIMPLEMENTED): embeddings are not clipped",
                     absl::StatusCode::kUnimplemented);
    }
    TANDEM_ASSIGN_OR_RETURN(int64_t dim, t.Int("dimension", 0, true));
    fc::EmbeddingOptions o;
    TANDEM_ASSIGN_OR_RETURN(std::string combiner, t.String("combiner", "mean"));
    absl::StatusOr<ops::Combiner> c = fc::ParseCombiner(combiner);
    if (!c.ok()) return t.Error("combiner", c.status().message());
    o.combiner = *c;
    TANDEM_ASSIGN_OR_RETURN(o.trainable, t.Bool("trainable", true));
    TANDEM_ASSIGN_OR_RETURN(std::vector<double> stddev, t.Numbers("initializer_stddev", false));
    if (!stddev.empty()) {
      if (stddev.size() != 1 || !(stddev[0] > 0)) {
        return t.Error("initializer_stddev", "must be one number > 0");
      }
      o.initializer = ops::TruncatedNormalInitializer(0.f, static_cast<float>(stddev[0]));
    }
    return Wrapped(t, fc::EmbeddingColumn(categorical, dim, o, t.name()), "dimension");
  }

  // A factory's column, or its error placed at `key` (the value it most likely refers
  // to; the table when that key is not set).
  static absl::StatusOr<fc::Column> Wrapped(const Table& t, absl::StatusOr<fc::Column> c,
                                            const std::string& key = "") {
    if (!c.ok()) return t.Error(t.Has(key) ? key : "", c.status().message(), c.status().code());
    return c;
  }

  const JobConfig& job_;
  std::map<std::string, fc::Column> built_;
  std::set<std::string> in_progress_;
};

}  // namespace

absl::StatusOr<std::map<std::string, feature_column::Column>> FeatureColumnsFromConfig(
    const JobConfig& job) {
  return Resolver(job).All();
}

namespace internal {
absl::Status CheckFeatureColumns(const JobConfig& job) {
  return FeatureColumnsFromConfig(job).status();
}
}  // namespace internal

}  // namespace tandem

// framework/feature_column/internal.h
//
// Helpers shared by the feature column implementations (not for use outside
// framework/feature_column).
#ifndef TANDEM_FRAMEWORK_FEATURE_COLUMN_INTERNAL_H_
#define TANDEM_FRAMEWORK_FEATURE_COLUMN_INTERNAL_H_

#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "framework/feature_column/feature_column.h"

namespace tandem::feature_column::internal {

// INVALID_ARGUMENT "feature column '<column>': <message>".
absl::Status ColumnError(const std::string& column, absl::string_view message);
// An error naming `column` when a float32 table of rows x cols would take more than
// half the memory this process may use (env::MemoryLimitBytes).
absl::Status CheckTableFits(const std::string& column, int64_t rows, int64_t cols);
// Adds `feature` to `spec` (an error when the key is there with another spec).
absl::Status AddRaw(RawFeatureSpec* spec, RawFeature feature, const std::string& column);
// The column's entry in one of the builder's caches (its ids, or its dense tensor), made
// in a name scope of the column's name the first time.
template <typename T>
T Cached(Builder& b, std::map<const FeatureColumn*, T>& cache, const FeatureColumn* column,
         const std::function<T(const Scope&)>& make) {
  auto it = cache.find(column);
  if (it != cache.end()) return it->second;
  T value = make(b.scope().NewSubScope(column->name()));
  cache[column] = value;
  return value;
}
inline CategoricalIds CachedIds(Builder& b, const FeatureColumn* column,
                                const std::function<CategoricalIds(const Scope&)>& make) {
  return Cached(b, b.ids, column, make);
}
inline Output CachedDense(Builder& b, const FeatureColumn* column,
                          const std::function<Output(const Scope&)>& make) {
  return Cached(b, b.dense, column, make);
}

}  // namespace tandem::feature_column::internal

#endif  // TANDEM_FRAMEWORK_FEATURE_COLUMN_INTERNAL_H_

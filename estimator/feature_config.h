// estimator/feature_config.h
//
// Feature columns from a job config: each [features.<name>] table declares the column
// <name> (framework/feature_column/feature_column.h), with tf.feature_column's meaning:
//
//   [features]
//   age = { type = "numeric" }                      # key = "age", shape = [1]
//   age_buckets = { type = "bucketized", source = "age", boundaries = [18, 25, 30] }
//   education = { type = "vocabulary_list", vocabulary = ["Bachelors", "HS-grad"] }
//   occupation = { type = "hash_bucket", hash_bucket_size = 1000 }
//   education_x_occupation = { type = "crossed", keys = ["education", "occupation"],
//                              hash_bucket_size = 1000 }
//   workclass_indicator = { type = "indicator", categorical = "workclass" }
//   occupation_embedding = { type = "embedding", categorical = "occupation", dimension = 8 }
//
// type (TensorFlow's function names are accepted too: "numeric_column",
// "categorical_column_with_vocabulary_list", ...) and its keys:
//   numeric          key, shape = [1], default_value (a number or one per element)
//   bucketized       source (source_column): a numeric column's name; boundaries
//   vocabulary_list  key, vocabulary (strings, or integers for an int64 feature), dtype,
//                    default_value = -1, num_oov_buckets = 0
//   vocabulary_file  key, vocabulary_file (one entry per line), vocabulary_size = 0
//                    (all lines), dtype = "string", default_value, num_oov_buckets
//   hash_bucket      key, hash_bucket_size, dtype = "string" (or "int64": hashes the
//                    decimal text)
//   identity         key, num_buckets, default_value (none: a value >= num_buckets fails)
//   crossed          keys, hash_bucket_size, hash_key = 0xDECAFCAFFE. A key is the
//                    column of that name when [features] has one that is not a base
//                    column reading a raw feature of the same name (age_buckets); else
//                    it is the raw feature (TensorFlow's string keys: "education")
//   weighted         categorical (categorical_column), weight_feature_key
//   indicator        categorical (categorical_column)
//   embedding        categorical (categorical_column), dimension, combiner = "mean",
//                    initializer_stddev = 1/sqrt(dimension), trainable = true
// key defaults to the table's name; the column's name is always the table's name.
//
// Errors are config errors naming the table, the key and where it was written:
// "job.toml:14:1: [features.age_buckets] boundaries must be a sorted list ...". A
// reference to a missing column (with a did-you-mean), a cycle, a crossed column over
// a numeric one, a vocabulary file that is missing or has duplicates, an unknown type
// or key: each is one. max_norm (embedding) is refused as UNIMPLEMENTED.
//
// Thread safety: pure functions.
#ifndef TANDEM_ESTIMATOR_FEATURE_CONFIG_H_
#define TANDEM_ESTIMATOR_FEATURE_CONFIG_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "estimator/job_config.h"
#include "framework/feature_column/feature_column.h"

namespace tandem {

// Every [features] table's column, by name.
absl::StatusOr<std::map<std::string, feature_column::Column>> FeatureColumnsFromConfig(
    const JobConfig& job);

namespace internal {
// FeatureColumnsFromConfig's errors, for JobConfig::Parse.
absl::Status CheckFeatureColumns(const JobConfig& job);
}  // namespace internal

}  // namespace tandem

#endif  // TANDEM_ESTIMATOR_FEATURE_CONFIG_H_

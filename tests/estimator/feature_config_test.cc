// Tests of [features] in a job config (estimator/feature_config.h): every column type
// from TOML with TensorFlow's aliases, --set overrides of a column's key, raw keys and
// column keys in crosses, and each bad declaration as a config error naming the table,
// the key and the line: unknown types and keys (with a did-you-mean), references to
// missing columns, cycles, a cross over a numeric column, unsorted boundaries, a
// vocabulary file that is missing or has duplicates, max_norm.
#include "estimator/feature_config.h"

#include <string>

#include "framework/core/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/temp_dir.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

constexpr char kHead[] = "[model]\nname = \"linear_classifier\"\n[run]\nmodel_dir = \"/tmp/m\"\n";

absl::StatusOr<JobConfig> Parse(const std::string& features,
                                std::vector<std::string> overrides = {}) {
  return JobConfig::Parse(std::string(kHead) + features, "job.toml", overrides);
}

// The error of a config that JobConfig::Parse refuses (the trainer's usage error, exit 2).
std::string Error(const std::string& features) {
  absl::StatusOr<JobConfig> job = Parse(features);
  EXPECT_FALSE(job.ok());
  return std::string(job.status().message());
}

TEST(FeatureConfigTest, EveryTypeFromToml) {
  absl::StatusOr<JobConfig> job = Parse(R"(
[features]
age = { type = "numeric" }
age_buckets = { type = "bucketized", source = "age", boundaries = [18, 25, 30] }
education = { type = "categorical_column_with_vocabulary_list", vocabulary = ["a", "b"] }
codes = { type = "vocabulary_list", key = "code", vocabulary = [10, 20, 30] }
occupation = { type = "hash_bucket", hash_bucket_size = 1000 }
slot = { type = "identity", num_buckets = 7, default_value = 0 }
x = { type = "crossed", keys = ["education", "occupation", "age_buckets"], hash_bucket_size = 50 }
w = { type = "weighted", categorical = "education", weight_feature_key = "wt" }
ind = { type = "indicator_column", categorical_column = "education" }
emb = { type = "embedding", categorical = "occupation", dimension = 8, combiner = "sqrtn" }
)");
  ASSERT_TRUE(job.ok()) << job.status();
  absl::StatusOr<std::map<std::string, feature_column::Column>> cols =
      FeatureColumnsFromConfig(*job);
  ASSERT_TRUE(cols.ok()) << cols.status();
  EXPECT_EQ(cols->size(), 10u);
  EXPECT_EQ(cols->at("age_buckets")->num_buckets(), 4);
  EXPECT_EQ(cols->at("codes")->num_buckets(), 3);
  EXPECT_EQ(cols->at("slot")->num_buckets(), 7);
  EXPECT_EQ(cols->at("x")->num_buckets(), 50);
  EXPECT_EQ(cols->at("ind")->dense_width(), 2);
  EXPECT_EQ(cols->at("emb")->dense_width(), 8);
  // The cross reads the raw education and occupation strings (TensorFlow's string keys)
  // and the bucketized column's ids: its raw features are those three.
  auto spec = feature_column::RawFeatures({cols->at("x"), cols->at("codes")});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->at("education").DebugString(), "VarLenFeature(string)");
  EXPECT_EQ(spec->at("occupation").DebugString(), "VarLenFeature(string)");
  EXPECT_EQ(spec->at("age").DebugString(), "FixedLenFeature([1], float32)");
  EXPECT_EQ(spec->at("code").DebugString(), "VarLenFeature(int64)");
}

TEST(FeatureConfigTest, SetOverridesAColumnsKey) {
  const std::string toml = "[features.occupation]\ntype = \"hash_bucket\"\nhash_bucket_size = 10\n";
  absl::StatusOr<JobConfig> job = Parse(toml, {"features.occupation.hash_bucket_size=2000"});
  ASSERT_TRUE(job.ok()) << job.status();
  auto cols = FeatureColumnsFromConfig(*job);
  ASSERT_TRUE(cols.ok());
  EXPECT_EQ(cols->at("occupation")->num_buckets(), 2000);
  // The resolved config prints the override and parses back to the same job.
  absl::StatusOr<JobConfig> again = JobConfig::Parse(job->ToToml(), "printed");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->features, job->features);
  // A bad override is named as such.
  absl::StatusOr<JobConfig> bad = Parse(toml, {"features.occupation.hash_bucket_size=0"});
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("--set features.occupation.hash_bucket_size=0"));
}

TEST(FeatureConfigTest, MistakesAreConfigErrorsWithTheirPlace) {
  EXPECT_THAT(Error("[features]\nage = { type = \"numerc\" }\n"),
              HasSubstr("[features.age] type unknown column type 'numerc' (did you mean "
                        "'numeric'?)"));
  EXPECT_THAT(Error("[features]\nage = { type = \"numerc\" }\n"), HasSubstr("job.toml:6:"));
  EXPECT_THAT(Error("[features]\nage = { type = \"numeric\", shap = [2] }\n"),
              HasSubstr("[features.age] shap is not a key of a numeric column (did you mean "
                        "'shape'?)"));
  EXPECT_THAT(Error("[features]\nage = { type = \"numeric\" }\n"
                    "b = { type = \"bucketized\", source = \"agee\", boundaries = [1] }\n"),
              HasSubstr("[features.b] source names no feature column 'agee' (did you mean "
                        "'age'?)"));
  EXPECT_THAT(Error("[features]\nage = { type = \"numeric\" }\n"
                    "b = { type = \"bucketized\", source = \"age\", boundaries = [30, 18] }\n"),
              HasSubstr("job.toml:7:"));
  EXPECT_THAT(Error("[features]\nage = { type = \"numeric\" }\n"
                    "b = { type = \"bucketized\", source = \"age\", boundaries = [30, 18] }\n"),
              HasSubstr("boundaries must be a sorted list"));
  EXPECT_THAT(Error("[features]\na = { type = \"indicator\", categorical = \"b\" }\n"
                    "b = { type = \"embedding\", categorical = \"a\", dimension = 2 }\n"),
              HasSubstr("makes a cycle through 'a'"));
  EXPECT_THAT(Error("[features]\nprice = { type = \"numeric\", key = \"cost\" }\n"
                    "x = { type = \"crossed\", keys = [\"price\", \"color\"], "
                    "hash_bucket_size = 10 }\n"),
              HasSubstr("a dense column"));
  EXPECT_THAT(Error("[features]\no = { type = \"hash_bucket\", hash_bucket_size = 10 }\n"
                    "e = { type = \"embedding\", categorical = \"o\", dimension = 2, "
                    "max_norm = 1.0 }\n"),
              HasSubstr("max_norm is not supported"));
  EXPECT_THAT(Error("[features]\nage = 3\n"), HasSubstr("[features] age must be a table"));
}

TEST(FeatureConfigTest, VocabularyFilesMissingOrWithDuplicates) {
  testing::TempDir dir;
  const std::string path = env::JoinPath(dir.path(), "vocab.txt");
  const std::string table = "[features]\ne = { type = \"vocabulary_file\", vocabulary_file = \"" +
                            path + "\" }\n";
  EXPECT_THAT(Error(table), HasSubstr("job.toml:6:"));
  EXPECT_THAT(Error(table), HasSubstr(path));
  ASSERT_TRUE(env::WriteFileAtomic(path, "a\nb\na\n").ok());
  EXPECT_THAT(Error(table), HasSubstr("\"a\" at line 1 and line 3"));
  ASSERT_TRUE(env::WriteFileAtomic(path, "a\nb\nc\n").ok());
  absl::StatusOr<JobConfig> job = Parse(table);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(FeatureColumnsFromConfig(*job)->at("e")->num_buckets(), 3);
}

}  // namespace
}  // namespace tandem

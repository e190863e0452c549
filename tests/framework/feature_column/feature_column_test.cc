// Tests of the feature columns (framework/feature_column/feature_column.h): TensorFlow's
// names and checks for each factory, make_parse_example_spec, InputLayer's order and
// widths and values (numeric, bucketized one-hot, indicator counts, embeddings),
// LinearModel's sums with sparse gradients for categorical weights, and the vocabulary
// file's errors.
#include "framework/feature_column/feature_column.h"

#include <string>
#include <vector>

#include "framework/core/env.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/optimizers.h"
#include "framework/ops/state_ops.h"
#include "framework/runtime/session.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/temp_dir.h"

namespace tandem::feature_column {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Column Must(absl::StatusOr<Column> c) {
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : nullptr;
}

std::string ErrorOf(const absl::StatusOr<Column>& c) {
  EXPECT_FALSE(c.ok());
  return std::string(c.status().message());
}

TEST(FeatureColumnTest, NamesAreTensorFlows) {
  Column age = Must(NumericColumn("age"));
  Column buckets = Must(BucketizedColumn(age, {18, 25}));
  Column edu = Must(VocabularyListColumn("education", {"Bachelors", "HS-grad"}));
  Column occ = Must(HashBucketColumn("occupation", 1000));
  EXPECT_EQ(buckets->name(), "age_bucketized");
  EXPECT_EQ(buckets->num_buckets(), 3);
  EXPECT_EQ(Must(CrossedColumn({CrossKey("occupation"), CrossKey("education")}, 10))->name(),
            "education_X_occupation");
  EXPECT_EQ(Must(IndicatorColumn(edu))->name(), "education_indicator");
  EXPECT_EQ(Must(EmbeddingColumn(occ, 8))->name(), "occupation_embedding");
  EXPECT_EQ(Must(WeightedCategoricalColumn(edu, "w"))->name(), "education_weighted_by_w");
  EXPECT_EQ(Must(VocabularyListColumn("x", {"a"}, {}, "my_name"))->name(), "my_name");
}

TEST(FeatureColumnTest, FactoriesRefuseWhatTensorFlowRefuses) {
  Column age = Must(NumericColumn("age"));
  Column occ = Must(HashBucketColumn("occupation", 10));
  Column edu = Must(VocabularyListColumn("education", {"a", "b"}));
  EXPECT_THAT(ErrorOf(BucketizedColumn(age, {25, 18})), HasSubstr("boundaries must be a sorted"));
  EXPECT_THAT(ErrorOf(BucketizedColumn(edu, {1})), HasSubstr("must be a numeric column"));
  EXPECT_THAT(ErrorOf(VocabularyListColumn("e", {"a", "b", "a"})),
              HasSubstr("Duplicate keys in vocabulary_list: \"a\" at entry 0 and entry 2"));
  VocabularyColumnOptions both;
  both.num_oov_buckets = 2;
  both.default_value = 0;
  EXPECT_THAT(ErrorOf(VocabularyListColumn("e", {"a"}, both)),
              HasSubstr("Can't specify both num_oov_buckets and default_value"));
  EXPECT_THAT(ErrorOf(CrossedColumn({CrossKey(occ), CrossKey("education")}, 10)),
              HasSubstr("categorical_column_with_hash_bucket is not supported for crossing"));
  EXPECT_THAT(ErrorOf(CrossedColumn({CrossKey(age), CrossKey("education")}, 10)),
              HasSubstr("a dense column"));
  EXPECT_THAT(ErrorOf(CrossedColumn({CrossKey("a")}, 10)), HasSubstr("length > 1"));
  EXPECT_THAT(ErrorOf(EmbeddingColumn(occ, 0)), HasSubstr("Invalid dimension 0"));
  EXPECT_THAT(ErrorOf(IndicatorColumn(age)), HasSubstr("needs a categorical column"));
  EXPECT_THAT(ErrorOf(IdentityColumn("id", 5, 7)), HasSubstr("default_value 7 not in range"));
}

TEST(FeatureColumnTest, VocabularyFileErrorsNameTheFileAndLine) {
  testing::TempDir dir;
  const std::string path = env::JoinPath(dir.path(), "vocab.txt");
  EXPECT_THAT(ErrorOf(VocabularyFileColumn("e", path)), HasSubstr(path));
  ASSERT_TRUE(env::WriteFileAtomic(path, "Bachelors\nHS-grad\nBachelors\n").ok());
  EXPECT_THAT(ErrorOf(VocabularyFileColumn("e", path)),
              HasSubstr("\"Bachelors\" at line 1 and line 3"));
  Column first_two = Must(VocabularyFileColumn("e", path, 2));
  EXPECT_EQ(first_two->num_buckets(), 2);
  EXPECT_THAT(ErrorOf(VocabularyFileColumn("e", path, 9)), HasSubstr("fewer than vocabulary_size"));
}

TEST(FeatureColumnTest, RawFeaturesAreTheParseSpec) {
  Column age = Must(NumericColumn("age", {1}, {0}));
  Column buckets = Must(BucketizedColumn(age, {18}));
  Column edu = Must(VocabularyListColumn("education", {"a"}));
  Column ids = Must(IdentityColumn("ids", 4));
  Column cross = Must(CrossedColumn({CrossKey(buckets), CrossKey("occupation")}, 10));
  absl::StatusOr<RawFeatureSpec> spec = RawFeatures({buckets, edu, ids, cross});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->at("age").DebugString(), "FixedLenFeature([1], float32, default_value=[0])");
  EXPECT_EQ(spec->at("education").DebugString(), "VarLenFeature(string)");
  EXPECT_EQ(spec->at("ids").DebugString(), "VarLenFeature(int64)");
  EXPECT_EQ(spec->at("occupation").DebugString(), "VarLenFeature(string)");
  Column int_edu = Must(HashBucketColumn("education", 5, DType::kInt64));
  EXPECT_THAT(std::string(RawFeatures({edu, int_edu}).status().message()),
              HasSubstr("different parse_spec for key education"));
}

// Runs `out` over the features fed by name.
std::vector<float> RunGraph(const Scope& root, Output out, const FeedMap& feeds) {
  EXPECT_TRUE(root.ok()) << root.status();
  Node* init = ops::GlobalVariablesInitializer(root);
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  auto session = NewDirectSession(def);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return {};
  EXPECT_TRUE((*session)->Run({}, {}, {init->name()}).ok());
  auto r = (*session)->Run(feeds, {out.name()}, {});
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  std::vector<float> v;
  for (int64_t i = 0; i < (*r)[0].NumElements(); ++i) v.push_back((*r)[0].data<float>()[i]);
  return v;
}

TEST(FeatureColumnTest, InputLayerConcatenatesByName) {
  Scope root = Scope::NewRootScope();
  Features f;
  f["age"] = ops::Placeholder(root.WithOpName("age"), DType::kInt64, PartialShape({-1}));
  f["color"] = ops::Placeholder(root.WithOpName("color"), DType::kString, PartialShape({-1, 2}));
  Column age = Must(NumericColumn("age"));
  Column color = Must(VocabularyListColumn("color", {"red", "green", "blue"}));
  // Sorted by name: age, age_bucketized, color_indicator.
  Output x = InputLayer(root, f,
                        {Must(IndicatorColumn(color)), age, Must(BucketizedColumn(age, {30}))});
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(x.shape().dim(1), 1 + 2 + 3);
  std::vector<float> v =
      RunGraph(root, x,
          {{"age", Tensor::FromVector<int64_t>({25, 40}, TensorShape({2}))},
           {"color", Tensor::FromVector<std::string>({"red", "red", "blue", ""}, {2, 2})}});
  EXPECT_THAT(v, ElementsAre(25, 1, 0, 2, 0, 0,  //
                             40, 0, 1, 0, 0, 1));
}

TEST(FeatureColumnTest, InputLayerRefusesCategoricalColumns) {
  Scope root = Scope::NewRootScope();
  Features f;
  f["color"] = ops::Placeholder(root.WithOpName("color"), DType::kString, PartialShape({-1}));
  InputLayer(root, f, {Must(HashBucketColumn("color", 5))});
  EXPECT_THAT(std::string(root.status().message()),
              HasSubstr("Items of feature_columns must be a DenseColumn"));
  Scope other = Scope::NewRootScope();
  Features g;
  g["color"] = ops::Placeholder(other.WithOpName("color"), DType::kInt64, PartialShape({-1}));
  InputLayer(other, g, {Must(IndicatorColumn(Must(VocabularyListColumn("color", {"a"}))))});
  EXPECT_THAT(std::string(other.status().message()),
              HasSubstr("reads feature 'color' as string, but the input gives int64"));
}

TEST(FeatureColumnTest, EmbeddingMeanAndLinearModelSums) {
  Scope root = Scope::NewRootScope();
  Features f;
  f["tags"] = ops::Placeholder(root.WithOpName("tags"), DType::kString, PartialShape({-1, 2}));
  Column tags = Must(VocabularyListColumn("tags", {"a", "b", "c"}));
  EmbeddingOptions o;
  o.initializer = ops::ConstantInitializer(0.5f);
  Output emb = InputLayer(root.NewSubScope("dnn"), f, {Must(EmbeddingColumn(tags, 2, o))});
  Output logits = LinearModel(root.NewSubScope("linear"), f, {tags}, 1);
  ASSERT_TRUE(root.ok()) << root.status();
  // The linear weights are zeros at first; one SGD step on sum(logits) gives each weight
  // named by a row its count in the batch (and the bias the batch size).
  ops::GradientDescentOptimizer sgd(-1.f);  // Ascent by 1: the new weights are the grads.
  auto grads = sgd.ComputeGradients(root, ops::ReduceSumAll(root, logits));
  ASSERT_TRUE(grads.ok()) << grads.status();
  for (const ops::GradAndVar& g : *grads) {
    EXPECT_EQ(g.sparse.has_value(), g.var.name() == "linear/linear_model/tags/weights")
        << g.var.name();
  }
  auto train = sgd.ApplyGradients(root, *grads);
  ASSERT_TRUE(train.ok()) << train.status();
  const FeedMap feeds = {{"tags", Tensor::FromVector<std::string>({"a", "c", "c", ""}, {2, 2})}};
  EXPECT_THAT(RunGraph(root, emb, feeds), ElementsAre(.5, .5, .5, .5));
  Node* init = ops::GlobalVariablesInitializer(root);
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  auto session = NewDirectSession(def);
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE((*session)->Run({}, {}, {init->name()}).ok());
  ASSERT_TRUE((*session)->Run(feeds, {}, {(*train)->name()}).ok());
  auto after = (*session)->Run(feeds, {logits.name()}, {});
  ASSERT_TRUE(after.ok()) << after.status();
  // Weights a=1, b=0, c=2, bias 2: row 0 = a + c + 2 = 5; row 1 = c + 2 = 4.
  EXPECT_FLOAT_EQ((*after)[0].data<float>()[0], 5);
  EXPECT_FLOAT_EQ((*after)[0].data<float>()[1], 4);
}

}  // namespace
}  // namespace tandem::feature_column

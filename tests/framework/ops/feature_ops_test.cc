// Tests of the feature-column ops (framework/ops/feature_ops.h) in a DirectSession:
// hashing, vocabulary, identity, bucketizing and crossing against TensorFlow's
// documented outputs; the embedding bag's combiners and its sparse gradient (only the
// rows a batch names move); the multi-hot; and the guard that keeps string tensors out
// of ops that copy raw bytes.
#include "framework/ops/feature_ops.h"

#include <cmath>
#include <string>
#include <vector>

#include "framework/core/fingerprint.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/optimizers.h"
#include "framework/ops/state_ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/ops/training_test_util.h"

namespace tandem {
namespace {

using ::tandem::testing::StartSession;
using ::tandem::testing::ToFloats;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

Tensor Strings(const std::vector<std::string>& v, const TensorShape& shape) {
  return Tensor::FromVector<std::string>(v, shape);
}
Tensor Ints(const std::vector<int64_t>& v, const TensorShape& shape) {
  return Tensor::FromVector<int64_t>(v, shape);
}
std::vector<int64_t> Values(const Tensor& t) {
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.NumElements());
}

// Runs `out` with `in` fed to the placeholder "in"; the status on error.
absl::StatusOr<Tensor> RunOne(const Scope& root, Output out, const Tensor& in) {
  TANDEM_ASSIGN_OR_RETURN(auto session, StartSession(root, /*initialize=*/false));
  TANDEM_ASSIGN_OR_RETURN(std::vector<Tensor> r, session->Run({{"in", in}}, {out.name()}, {}));
  return r[0];
}

TEST(FeatureOpsTest, HashBucketsAreTensorFlows) {
  Scope root = Scope::NewRootScope();
  Output in = ops::Placeholder(root.WithOpName("in"), DType::kString, PartialShape({-1}));
  Output ids = ops::CategoricalHash(root, in, 3);
  absl::StatusOr<Tensor> r = RunOne(root, ids, Strings({"Hello", "TensorFlow", "2.x", ""}, {4}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->shape(), TensorShape({4, 1}));
  EXPECT_THAT(Values(*r), ElementsAre(0, 2, 2, -1));  // '' is no value.
}

TEST(FeatureOpsTest, IntegersHashAsTheirDecimalText) {
  Scope root = Scope::NewRootScope();
  Output in = ops::Placeholder(root.WithOpName("in"), DType::kInt64, PartialShape({-1, 2}));
  absl::StatusOr<Tensor> r =
      RunOne(root, ops::CategoricalHash(root, in, 1000), Ints({42, -1, 7, 0}, {2, 2}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(Values(*r),
              ElementsAre(static_cast<int64_t>(Fingerprint64("42") % 1000), -1,
                          static_cast<int64_t>(Fingerprint64("7") % 1000),
                          static_cast<int64_t>(Fingerprint64("0") % 1000)));
}

TEST(FeatureOpsTest, VocabularyWithDefaultsAndOovBuckets) {
  Scope root = Scope::NewRootScope();
  Output in = ops::Placeholder(root.WithOpName("in"), DType::kString, PartialShape({-1, 3}));
  const std::vector<std::string> vocab = {"a", "b", "c"};
  Output plain = ops::CategoricalVocabulary(root, in, vocab);
  ops::VocabularyOptions oov;
  oov.num_oov_buckets = 2;
  Output hashed = ops::CategoricalVocabulary(root, in, vocab, oov);
  ops::VocabularyOptions def;
  def.default_value = 0;
  Output defaulted = ops::CategoricalVocabulary(root, in, vocab, def);
  auto session = StartSession(root, false);
  ASSERT_TRUE(session.ok());
  auto r = (*session)->Run({{"in", Strings({"b", "zz", "", "a", "c", "b"}, {2, 3})}},
                           {plain.name(), hashed.name(), defaulted.name()}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(Values((*r)[0]), ElementsAre(1, -1, -1, 0, 2, 1));
  const int64_t zz = 3 + static_cast<int64_t>(Fingerprint64("zz") % 2);
  EXPECT_THAT(Values((*r)[1]), ElementsAre(1, zz, -1, 0, 2, 1));
  EXPECT_THAT(Values((*r)[2]), ElementsAre(1, 0, -1, 0, 2, 1));
}

TEST(FeatureOpsTest, IntegerVocabularyAndUnknownLabels) {
  Scope root = Scope::NewRootScope();
  Output in = ops::Placeholder(root.WithOpName("in"), DType::kInt64, PartialShape({-1}));
  Output ids = ops::CategoricalVocabulary(root, in, {"10", "20"});
  absl::StatusOr<Tensor> r = RunOne(root, ids, Ints({20, 30, -1}, {3}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(Values(*r), ElementsAre(1, -1, -1));

  Scope labels = Scope::NewRootScope();
  Output s = ops::Placeholder(labels.WithOpName("in"), DType::kString, PartialShape({-1}));
  ops::VocabularyOptions strict;
  strict.unknown_is_error = true;
  Output lids = ops::CategoricalVocabulary(labels, s, {"<=50K", ">50K"}, strict);
  absl::StatusOr<Tensor> bad = RunOne(labels, lids, Strings({">50K", ">50K."}, {2}));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("\">50K.\" is not in the vocabulary"));
  EXPECT_FALSE(RunOne(labels, lids, Strings({""}, {1})).ok());  // A label cannot be missing.
}

TEST(FeatureOpsTest, IdentityRangeAndDefault) {
  Scope root = Scope::NewRootScope();
  Output in = ops::Placeholder(root.WithOpName("in"), DType::kInt64, PartialShape({-1}));
  Output strict = ops::CategoricalIdentity(root, in, 5, false, -1);
  Output def = ops::CategoricalIdentity(root, in, 5, true, 2);
  absl::StatusOr<Tensor> ok = RunOne(root, strict, Ints({0, 3, -1, -4}, {4}));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_THAT(Values(*ok), ElementsAre(0, 3, -1, -1));  // Negative ids are dropped.
  absl::StatusOr<Tensor> bad = RunOne(root, strict, Ints({0, 5}, {2}));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("value 5 is outside [0, 5)"));
  absl::StatusOr<Tensor> d = RunOne(root, def, Ints({0, 5, -1, -4}, {4}));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(Values(*d), ElementsAre(0, 2, -1, 2));
}

TEST(FeatureOpsTest, BucketizeAsTensorFlowsDocumentedExample) {
  // tf.raw_ops.Bucketize: boundaries [0, 10, 100], input [[-5, 10000], [150, 10],
  // [5, 100]] -> [[0, 3], [3, 2], [1, 3]]; column j's ids are offset by 4 j.
  Scope root = Scope::NewRootScope();
  Output in = ops::Placeholder(root.WithOpName("in"), DType::kFloat, PartialShape({-1, 2}));
  Output ids = ops::CategoricalBucketize(root, in, {0, 10, 100});
  absl::StatusOr<Tensor> r = RunOne(
      root, ids, Tensor::FromVector<float>({-5, 10000, 150, 10, 5, 100}, TensorShape({3, 2})));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(Values(*r), ElementsAre(0, 3 + 4, 3, 2 + 4, 1, 3 + 4));
}

TEST(FeatureOpsTest, CrossMatchesTensorFlowsSparseCrossTests) {
  Scope root = Scope::NewRootScope();
  std::vector<Output> in;
  for (const char* name : {"a", "b", "c"}) {
    in.push_back(ops::Placeholder(root.WithOpName(name), DType::kString, PartialShape({-1, 1})));
  }
  Output cross = ops::CategoricalCross(root, in, 100);
  Output keyed = ops::CategoricalCross(root, in, 100, ops::kCrossHashKey + 1);
  auto session = StartSession(root, false);
  ASSERT_TRUE(session.ok());
  auto r = (*session)->Run({{"a", Strings({"batch1-FC1-F1"}, {1, 1})},
                            {"b", Strings({"batch1-FC2-F1"}, {1, 1})},
                            {"c", Strings({"batch1-FC3-F1"}, {1, 1})}},
                           {cross.name(), keyed.name()}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(Values((*r)[0]), ElementsAre(83));  // sparse_cross_op_test: test_hashed_output.
  EXPECT_THAT(Values((*r)[1]), ElementsAre(31));  // ...with hash_key = default + 1.
}

TEST(FeatureOpsTest, CrossOfBucketsAndListsAsTensorFlowsCrossedColumnTest) {
  // feature_column_v2_test CrossedColumnTest.test_get_sparse_tensors: bucketized ids
  // (row 0: [0, 4], row 1: [1, 5]) x c x d1 x d2, hash_key 5, 15 buckets.
  Scope root = Scope::NewRootScope();
  Output b = ops::Placeholder(root.WithOpName("b"), DType::kInt64, PartialShape({-1, 2}));
  std::vector<Output> in = {b};
  for (const char* name : {"c", "d1", "d2"}) {
    in.push_back(ops::Placeholder(root.WithOpName(name), DType::kString, PartialShape({-1, 2})));
  }
  Output cross = ops::CategoricalCross(root, in, 15, 5);
  auto session = StartSession(root, false);
  ASSERT_TRUE(session.ok());
  auto r = (*session)->Run({{"b", Ints({0, 4, 1, 5}, {2, 2})},
                            {"c", Strings({"cA", "", "cB", "cC"}, {2, 2})},
                            {"d1", Strings({"d1A", "", "d1B", "d1C"}, {2, 2})},
                            {"d2", Strings({"d2A", "", "d2B", "d2C"}, {2, 2})}},
                           {cross.name()}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ((*r)[0].shape(), TensorShape({2, 16}));
  std::vector<int64_t> v = Values((*r)[0]);
  EXPECT_THAT(std::vector<int64_t>(v.begin(), v.begin() + 3), ElementsAre(6, 14, -1));
  EXPECT_THAT(std::vector<int64_t>(v.begin() + 16, v.end()),
              ElementsAre(0, 13, 8, 8, 10, 12, 2, 0, 1, 9, 8, 12, 2, 0, 10, 11));
}

// A [4, 2] table 1..8 row by row, and the bag of `ids`/`weights` under `combiner`.
std::vector<float> Bag(const std::vector<int64_t>& ids, const TensorShape& shape,
                       const std::vector<float>& weights, ops::Combiner combiner) {
  Scope root = Scope::NewRootScope();
  ops::Variable table(root, "table",
                      ops::Const(root, Tensor::FromVector<float>({1, 2, 3, 4, 5, 6, 7, 8},
                                                                 TensorShape({4, 2}))));
  Output in = ops::Placeholder(root.WithOpName("in"), DType::kInt64, PartialShape({-1, -1}));
  Output w = weights.empty() ? Output()
                             : ops::Const(root, Tensor::FromVector<float>(weights, shape));
  ops::BagPlan plan = ops::PrepareBag(root, in, w, combiner);
  Output rows = ops::ResourceGather(root, table.handle(), plan.unique_ids, DType::kFloat);
  Output bag = ops::BagCombine(root, rows, plan);
  auto session = StartSession(root);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return {};
  auto r = (*session)->Run({{"in", Ints(ids, shape)}}, {bag.name()}, {});
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? ToFloats((*r)[0]) : std::vector<float>{};
}

TEST(FeatureOpsTest, BagCombinersAsEmbeddingLookupSparse) {
  const std::vector<int64_t> ids = {0, 2, -1, 3, 3, 1, -1, -1, -1};
  const std::vector<float> w = {1, 2, 0, 1, 1, 2, 0, 0, 0};
  // Row 0: 1*[1,2] + 2*[5,6]; row 1: 2*[7,8] + 2*[3,4]; row 2 has no ids: zeros.
  EXPECT_THAT(Bag(ids, {3, 3}, w, ops::Combiner::kSum),
              ElementsAre(11, 14, 20, 24, 0, 0));
  EXPECT_THAT(Bag(ids, {3, 3}, w, ops::Combiner::kMean),
              ElementsAre(::testing::FloatEq(11.f / 3), ::testing::FloatEq(14.f / 3), 5, 6, 0, 0));
  EXPECT_THAT(Bag(ids, {3, 3}, w, ops::Combiner::kSqrtn),
              ElementsAre(::testing::FloatEq(11 / std::sqrt(5.f)),
                          ::testing::FloatEq(14 / std::sqrt(5.f)),
                          ::testing::FloatEq(20 / std::sqrt(6.f)),
                          ::testing::FloatEq(24 / std::sqrt(6.f)), 0, 0));
  // Without weights: every id counts 1.
  EXPECT_THAT(Bag({1, 1, 2, -1}, {2, 2}, {}, ops::Combiner::kMean), ElementsAre(3, 4, 5, 6));
  // Mean and sqrtn skip weights <= 0 (safe_embedding_lookup_sparse); sum does not.
  EXPECT_THAT(Bag({0, 1}, {1, 2}, {1, -1}, ops::Combiner::kSum), ElementsAre(-2, -2));
  EXPECT_THAT(Bag({0, 1}, {1, 2}, {1, -1}, ops::Combiner::kMean), ElementsAre(1, 2));
}

TEST(FeatureOpsTest, BagGradientMovesOnlyTheNamedRows) {
  Scope root = Scope::NewRootScope();
  const Tensor init = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6, 7, 8}, TensorShape({4, 2}));
  ops::Variable table(root, "table", ops::Const(root, init));
  Output in = ops::Placeholder(root.WithOpName("in"), DType::kInt64, PartialShape({-1, -1}));
  ops::BagPlan plan = ops::PrepareBag(root, in, Output(), ops::Combiner::kSum);
  Output rows = ops::ResourceGather(root, table.handle(), plan.unique_ids, DType::kFloat);
  Output loss = ops::ReduceSumAll(root, ops::BagCombine(root, rows, plan));
  ops::GradientDescentOptimizer sgd(0.5f);
  auto grads = sgd.ComputeGradients(root, loss);
  ASSERT_TRUE(grads.ok()) << grads.status();
  ASSERT_EQ(grads->size(), 1u);
  ASSERT_TRUE((*grads)[0].sparse.has_value()) << "the table's gradient must be IndexedSlices";
  auto train = sgd.ApplyGradients(root, *grads);
  ASSERT_TRUE(train.ok()) << train.status();
  auto session = StartSession(root);
  ASSERT_TRUE(session.ok()) << session.status();
  auto r = (*session)->Run({{"in", Ints({1, 1, 2, -1}, {2, 2})}},
                           {(*grads)[0].sparse->indices.name()}, {(*train)->name()});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(Values((*r)[0]), ElementsAre(1, 2));  // The distinct ids, no padding row.
  auto after = (*session)->Run({}, {table.value().name()}, {});
  ASSERT_TRUE(after.ok());
  // Row 1 appears twice (gradient 2 per element), row 2 once; rows 0 and 3 untouched.
  EXPECT_THAT(ToFloats((*after)[0]), ElementsAre(1, 2, 2, 3, 4.5, 5.5, 7, 8));
}

TEST(FeatureOpsTest, MultiHotCountsAndWeights) {
  Scope root = Scope::NewRootScope();
  Output in = ops::Placeholder(root.WithOpName("in"), DType::kInt64, PartialShape({-1, 3}));
  Output counts = ops::MultiHot(root, in, Output(), 4);
  Output weighted = ops::MultiHot(
      root, in, ops::Const(root, Tensor::FromVector<float>({.5, .25, 9, 1, 2, 3}, {2, 3})), 4);
  auto session = StartSession(root, false);
  ASSERT_TRUE(session.ok());
  auto r = (*session)->Run({{"in", Ints({1, 1, -1, 0, 2, 3}, {2, 3})}},
                           {counts.name(), weighted.name()}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(ToFloats((*r)[0]), ElementsAre(0, 2, 0, 0, 1, 0, 1, 1));
  EXPECT_THAT(ToFloats((*r)[1]), ElementsAre(0, .75, 0, 0, 1, 0, 2, 3));
  auto bad = (*session)->Run({{"in", Ints({4, -1, -1}, {1, 3})}}, {counts.name()}, {});
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("id 4 is outside [0, 4)"));
}

TEST(FeatureOpsTest, IdsToStrings) {
  Scope root = Scope::NewRootScope();
  Output in = ops::Placeholder(root.WithOpName("in"), DType::kInt64, PartialShape({-1, 1}));
  Output names = ops::IdsToStrings(root, in, {"<=50K", ">50K"});
  absl::StatusOr<Tensor> r = RunOne(root, names, Ints({1, 0}, {2, 1}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->StringAt(0), ">50K");
  EXPECT_EQ(r->StringAt(1), "<=50K");
  EXPECT_FALSE(RunOne(root, names, Ints({2}, {1, 1})).ok());
}

TEST(FeatureOpsTest, OpsThatCopyBytesRefuseStrings) {
  Scope root = Scope::NewRootScope();
  Output a = ops::Placeholder(root.WithOpName("a"), DType::kString, PartialShape({-1}));
  Output view = ops::Reshape(root, a, std::vector<int64_t>{-1, 1});  // Views are fine.
  EXPECT_TRUE(view.valid()) << root.status();
  Output bad = ops::Concat(root, {a, a}, 0);
  EXPECT_FALSE(bad.valid());
  EXPECT_THAT(std::string(root.status().message()), HasSubstr("is a string tensor"));
}

}  // namespace
}  // namespace tandem

// ArrangeFeeds: fed values in the step's sorted order, each checked against its tensor.
#include "framework/runtime/feeds.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

const std::vector<FeedEndpoint> kEndpoints = {{"a", DType::kFloat, PartialShape({-1, 2})},
                                              {"b", DType::kInt64, PartialShape({})},
                                              {"c", DType::kString, PartialShape::UnknownRank()}};

Tensor Floats(int64_t rows) { return Tensor(DType::kFloat, TensorShape({rows, 2})); }

TEST(FeedsTest, ValuesComeInTheStepsOrder) {
  Tensor c(DType::kString, TensorShape({3}));
  absl::StatusOr<std::vector<Tensor>> v =
      ArrangeFeeds(kEndpoints, {{"c", c}, {"a", Floats(5)}, {"b", Tensor::Scalar<int64_t>(7)}});
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->size(), 3u);
  EXPECT_EQ((*v)[0].shape(), TensorShape({5, 2}));
  EXPECT_EQ((*v)[1].scalar<int64_t>(), 7);
  EXPECT_EQ((*v)[2].dtype(), DType::kString);
  // Not every endpoint needs a value.
  v = ArrangeFeeds(kEndpoints, {{"b", Tensor::Scalar<int64_t>(1)}});
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE((*v)[0].IsInitialized());
}

TEST(FeedsTest, MistakesNameTheTensor) {
  auto error = [](const FeedMap& fed) {
    return std::string(ArrangeFeeds(kEndpoints, fed).status().message());
  };
  EXPECT_THAT(error({{"a", Floats(1)}, {"a", Floats(2)}}), HasSubstr("tensor 'a' is fed twice"));
  EXPECT_THAT(error({{"z", Floats(1)}}), HasSubstr("tensor 'z' is not fed by this step"));
  EXPECT_THAT(error({{"b", Tensor::Scalar<int32_t>(1)}}),
              HasSubstr("cannot feed a int32 value to tensor 'b', which has dtype int64"));
  EXPECT_THAT(error({{"a", Tensor(DType::kFloat, TensorShape({4, 3}))}}),
              HasSubstr("cannot feed a value of shape [4,3] to tensor 'a', which has shape [?,2]"));
}

}  // namespace
}  // namespace tandem

#include "framework/data/dataset.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::data {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// {0, 1, ..., n-1} as int64 scalars, plus a float component 10*i of shape [2].
DatasetPtr Range(int64_t n) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  std::vector<float> f;
  for (int64_t i = 0; i < n; ++i) f.insert(f.end(), {10.0f * i, 10.0f * i + 1});
  auto ds = FromTensors({Tensor::FromVector<int64_t>(v, TensorShape({n})),
                         Tensor::FromVector<float>(f, TensorShape({n, 2}))});
  CHECK(ds.ok()) << ds.status();
  return *ds;
}

// The int64 first component of every element.
std::vector<int64_t> Values(const DatasetPtr& ds) {
  auto all = CollectAll(*ds);
  EXPECT_TRUE(all.ok()) << all.status();
  std::vector<int64_t> out;
  if (!all.ok()) return out;
  for (const Element& e : *all) out.push_back(e[0].scalar<int64_t>());
  return out;
}

std::vector<int64_t> Iota(int64_t begin, int64_t end) {
  std::vector<int64_t> v(end - begin);
  std::iota(v.begin(), v.end(), begin);
  return v;
}

// A batch that cannot fit in memory is RESOURCE_EXHAUSTED, not an uncaught bad_alloc:
// 2^20 rows of 8 MiB would need 8 TiB.
TEST(BatchTest, ABatchBeyondTheMachinesMemoryIsAnError) {
  auto big = FromTensors({Tensor::Filled(DType::kFloat, TensorShape({1, 2 << 20}), 1.0)});
  ASSERT_TRUE(big.ok()) << big.status();
  auto it = (*big)->Repeat(-1)->Batch(int64_t{1} << 20)->MakeIterator();
  ASSERT_TRUE(it.ok()) << it.status();
  auto batch = (*it)->GetNext();
  ASSERT_FALSE(batch.ok());
  EXPECT_EQ(batch.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(batch.status().message()), HasSubstr("lower the batch size"));
}

TEST(FromTensorsTest, SlicesOuterDimensionSharingBuffers) {
  Tensor images = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({3, 2}));
  Tensor labels = Tensor::FromVector<int32_t>({7, 8, 9}, TensorShape({3}));
  auto ds = FromTensors({images, labels});
  ASSERT_TRUE(ds.ok());
  auto it = (*ds)->MakeIterator();
  ASSERT_TRUE(it.ok());
  for (int i = 0; i < 3; ++i) {
    auto e = (*it)->GetNext();
    ASSERT_TRUE(e.ok() && e->has_value());
    const Element& el = **e;
    ASSERT_EQ(el.size(), 2u);
    EXPECT_EQ(el[0].shape(), TensorShape({2}));
    EXPECT_EQ(el[0].flat<float>()[0], 2.0f * i + 1);
    EXPECT_EQ(el[0].flat<float>()[1], 2.0f * i + 2);
    EXPECT_EQ(el[1].shape(), TensorShape());
    EXPECT_EQ(el[1].scalar<int32_t>(), 7 + i);
    EXPECT_TRUE(el[0].SharesBufferWith(images));
  }
  for (int i = 0; i < 2; ++i) {  // End of input, and stays ended.
    auto e = (*it)->GetNext();
    ASSERT_TRUE(e.ok());
    EXPECT_FALSE(e->has_value());
  }
}

TEST(FromTensorsTest, RejectsMismatchedOuterDimensionsAndScalars) {
  auto bad = FromTensors(
      {Tensor(DType::kFloat, TensorShape({3, 2})), Tensor(DType::kInt32, TensorShape({4}))});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("component 1"));
  EXPECT_EQ(FromTensors({Tensor::Scalar<float>(1)}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MapFilterTest, MapTransformsAndPropagatesErrors) {
  auto doubled = Range(4)->Map([](Element e) -> absl::StatusOr<Element> {
    return Element{Tensor::Scalar<int64_t>(2 * e[0].scalar<int64_t>())};
  });
  EXPECT_THAT(Values(doubled), ElementsAre(0, 2, 4, 6));

  auto failing = Range(4)->Map([](Element e) -> absl::StatusOr<Element> {
    if (e[0].scalar<int64_t>() == 2) return absl::InvalidArgumentError("bad element 2");
    return e;
  });
  auto it = failing->MakeIterator();
  ASSERT_TRUE(it.ok());
  EXPECT_TRUE((*it)->GetNext().ok());
  EXPECT_TRUE((*it)->GetNext().ok());
  auto third = (*it)->GetNext();
  EXPECT_EQ(third.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(third.status().message()), HasSubstr("bad element 2"));
}

TEST(MapFilterTest, FilterKeepsMatchingElements) {
  auto even = Range(10)->Filter(
      [](const Element& e) -> absl::StatusOr<bool> { return e[0].scalar<int64_t>() % 2 == 0; });
  EXPECT_THAT(Values(even), ElementsAre(0, 2, 4, 6, 8));
  auto none = Range(10)->Filter([](const Element&) -> absl::StatusOr<bool> { return false; });
  EXPECT_TRUE(Values(none).empty());
}

TEST(TakeSkipTest, TakeAndSkip) {
  EXPECT_THAT(Values(Range(10)->Take(3)), ElementsAre(0, 1, 2));
  EXPECT_THAT(Values(Range(10)->Take(0)), ElementsAre());
  EXPECT_THAT(Values(Range(3)->Take(10)), ElementsAre(0, 1, 2));
  EXPECT_THAT(Values(Range(3)->Take(-1)), ElementsAre(0, 1, 2));
  EXPECT_THAT(Values(Range(10)->Skip(7)), ElementsAre(7, 8, 9));
  EXPECT_THAT(Values(Range(3)->Skip(5)), ElementsAre());
  EXPECT_THAT(Values(Range(3)->Skip(-1)), ElementsAre());
  EXPECT_THAT(Values(Range(10)->Skip(2)->Take(3)), ElementsAre(2, 3, 4));
  EXPECT_EQ(Range(3)->Take(-2)->MakeIterator().status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ShardTest, EveryNthElementStartingAtIndex) {
  EXPECT_THAT(Values(Range(10)->Shard(3, 0)), ElementsAre(0, 3, 6, 9));
  EXPECT_THAT(Values(Range(10)->Shard(3, 1)), ElementsAre(1, 4, 7));
  EXPECT_THAT(Values(Range(10)->Shard(3, 2)), ElementsAre(2, 5, 8));
  EXPECT_THAT(Values(Range(10)->Shard(1, 0)), ElementsAreArray(Iota(0, 10)));
  // The shards partition the input.
  std::vector<int64_t> all;
  for (int i = 0; i < 4; ++i) {
    auto v = Values(Range(21)->Shard(4, i));
    all.insert(all.end(), v.begin(), v.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_THAT(all, ElementsAreArray(Iota(0, 21)));
}

TEST(ShardTest, BadArgumentsAreInvalidArgument) {
  for (auto [n, i] : std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {3, 3}, {3, -1}, {-2, 0}}) {
    auto it = Range(5)->Shard(n, i)->Batch(2)->MakeIterator();
    EXPECT_EQ(it.status().code(), absl::StatusCode::kInvalidArgument) << n << " " << i;
    EXPECT_THAT(std::string(it.status().message()), HasSubstr("Shard"));
  }
}

TEST(RepeatTest, RepeatsCountTimesAndForever) {
  EXPECT_THAT(Values(Range(3)->Repeat(2)), ElementsAre(0, 1, 2, 0, 1, 2));
  EXPECT_THAT(Values(Range(3)->Repeat(0)), ElementsAre());
  EXPECT_THAT(Values(Range(3)->Repeat(1)), ElementsAre(0, 1, 2));
  EXPECT_THAT(Values(Range(3)->Repeat(-1)->Take(7)), ElementsAre(0, 1, 2, 0, 1, 2, 0));
  // An empty input repeated forever ends instead of spinning.
  EXPECT_THAT(Values(Range(3)->Skip(3)->Repeat(-1)), ElementsAre());
}

TEST(BatchTest, StacksComponentsKeepingTheRemainder) {
  auto all = CollectAll(*Range(5)->Batch(2));
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  const Element& b0 = (*all)[0];
  EXPECT_EQ(b0[0].shape(), TensorShape({2}));
  EXPECT_EQ(b0[0].dtype(), DType::kInt64);
  EXPECT_THAT(std::vector<int64_t>(b0[0].flat<int64_t>().begin(), b0[0].flat<int64_t>().end()),
              ElementsAre(0, 1));
  EXPECT_EQ(b0[1].shape(), TensorShape({2, 2}));
  EXPECT_THAT(std::vector<float>(b0[1].flat<float>().begin(), b0[1].flat<float>().end()),
              ElementsAre(0, 1, 10, 11));
  const Element& last = (*all)[2];
  EXPECT_EQ(last[0].shape(), TensorShape({1}));
  EXPECT_EQ(last[0].flat<int64_t>()[0], 4);
  EXPECT_EQ(last[1].shape(), TensorShape({1, 2}));
  EXPECT_EQ(last[1].flat<float>()[1], 41.0f);
}

TEST(BatchTest, DropRemainderDropsTheShortBatch) {
  auto all = CollectAll(*Range(5)->Batch(2, /*drop_remainder=*/true));
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[1][0].flat<int64_t>()[1], 3);
  auto exact = CollectAll(*Range(4)->Batch(2, /*drop_remainder=*/true));
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact->size(), 2u);
  EXPECT_EQ(CollectAll(*Range(1)->Batch(2, true))->size(), 0u);
}

TEST(BatchTest, MismatchedShapesAreInvalidArgument) {
  auto ragged = Range(4)->Map([](Element e) -> absl::StatusOr<Element> {
    int64_t n = e[0].scalar<int64_t>() + 1;
    return Element{Tensor(DType::kFloat, TensorShape({n}))};
  });
  auto all = CollectAll(*ragged->Batch(2));
  EXPECT_EQ(all.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(all.status().message()), HasSubstr("[2]"));
  EXPECT_THAT(std::string(all.status().message()), HasSubstr("[1]"));
  EXPECT_EQ(Range(4)->Batch(0)->MakeIterator().status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ShuffleTest, IsAPermutationDeterministicPerSeed) {
  auto a = Values(Range(100)->Shuffle(10, /*seed=*/7));
  auto b = Values(Range(100)->Shuffle(10, /*seed=*/7));
  auto c = Values(Range(100)->Shuffle(10, /*seed=*/8));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, Iota(0, 100));
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, Iota(0, 100));
  // A buffer of 10 cannot move an element more than 9 places earlier.
  for (size_t i = 0; i < a.size(); ++i) EXPECT_LE(a[i], static_cast<int64_t>(i) + 9);
  // Buffer size 1 keeps the order.
  EXPECT_EQ(Values(Range(20)->Shuffle(1, 3)), Iota(0, 20));
}

TEST(ShuffleTest, ReshufflesEachEpochUnlessAskedNotTo) {
  auto epochs = Values(Range(50)->Shuffle(50, 11)->Repeat(3));
  ASSERT_EQ(epochs.size(), 150u);
  std::vector<int64_t> e0(epochs.begin(), epochs.begin() + 50);
  std::vector<int64_t> e1(epochs.begin() + 50, epochs.begin() + 100);
  std::vector<int64_t> e2(epochs.begin() + 100, epochs.end());
  EXPECT_NE(e0, e1);
  EXPECT_NE(e1, e2);
  std::sort(e1.begin(), e1.end());
  EXPECT_EQ(e1, Iota(0, 50));
  // Same sequence of epoch orders on every run.
  EXPECT_EQ(Values(Range(50)->Shuffle(50, 11)->Repeat(3)), epochs);

  auto fixed = Values(Range(50)->Shuffle(50, 11, /*reshuffle_each_iteration=*/false)->Repeat(2));
  EXPECT_EQ(std::vector<int64_t>(fixed.begin(), fixed.begin() + 50),
            std::vector<int64_t>(fixed.begin() + 50, fixed.end()));
  EXPECT_EQ(Range(5)->Shuffle(0, 1)->MakeIterator().status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PipelineTest, ShuffleBatchRepeatCoversEveryElementPerEpoch) {
  auto ds = Range(12)->Shuffle(12, 5)->Batch(4, true)->Repeat(2);
  auto all = CollectAll(*ds);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 6u);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::set<int64_t> seen;
    for (int b = 0; b < 3; ++b) {
      for (int64_t v : (*all)[epoch * 3 + b][0].flat<int64_t>()) seen.insert(v);
    }
    EXPECT_EQ(seen.size(), 12u);
  }
}

// Identity Map: hides the RowSource, so everything downstream takes the Element path.
DatasetPtr AsElements(const DatasetPtr& ds) {
  return ds->Map([](Element e) -> absl::StatusOr<Element> { return e; });
}

bool YieldsRows(const DatasetPtr& ds) {
  auto it = ds->MakeIterator();
  CHECK(it.ok()) << it.status();
  return (*it)->YieldsRows();
}

// Every component of every batch, flattened, in order.
std::vector<double> AllValues(const DatasetPtr& ds) {
  auto all = CollectAll(*ds);
  EXPECT_TRUE(all.ok()) << all.status();
  std::vector<double> out;
  if (!all.ok()) return out;
  for (const Element& e : *all) {
    for (const Tensor& t : e) {
      out.push_back(t.NumElements());
      for (int64_t i = 0; i < t.NumElements(); ++i) out.push_back(t.ValueAsDouble(i));
    }
  }
  return out;
}

TEST(RowPathTest, RowTransformationsPassRowsThroughAndMapDoesNot) {
  EXPECT_TRUE(YieldsRows(Range(10)));
  EXPECT_TRUE(YieldsRows(Range(10)->Shard(2, 1)->Shuffle(4, 1)->Repeat(2)->Skip(1)->Take(5)));
  EXPECT_FALSE(YieldsRows(AsElements(Range(10))->Shuffle(4, 1)));
  EXPECT_FALSE(YieldsRows(Range(10)->Batch(2)));
  auto it = AsElements(Range(3))->MakeIterator();
  ASSERT_TRUE(it.ok());
  EXPECT_EQ((*it)->GetNextRow().status().code(), absl::StatusCode::kInternal);
}

TEST(RowPathTest, GatheredBatchesEqualStackedBatches) {
  // The same pipelines over rows (gathered by Batch) and over Elements (stacked):
  // identical shuffles, shapes and values, including the short last batch.
  auto pipelines = [](const DatasetPtr& source) {
    return std::vector<DatasetPtr>{
        source->Batch(3),
        source->Shuffle(7, 42)->Batch(4, /*drop_remainder=*/true),
        source->Shard(3, 2)->Shuffle(50, 9)->Repeat(3)->Batch(5),
        source->Skip(4)->Take(13)->Shuffle(5, 2)->Batch(6)->Repeat(2),
        source->Shuffle(50, 1),  // Unbatched: GetNext on a row iterator.
    };
  };
  std::vector<DatasetPtr> rows = pipelines(Range(50));
  std::vector<DatasetPtr> elements = pipelines(AsElements(Range(50)));
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(rows[i]->DebugString());
    std::vector<double> got = AllValues(rows[i]);
    EXPECT_FALSE(got.empty());
    EXPECT_EQ(got, AllValues(elements[i]));
  }
  auto batch = CollectAll(*Range(5)->Shuffle(5, 3)->Batch(5));
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ((*batch)[0][1].shape(), TensorShape({5, 2}));
  EXPECT_EQ((*batch)[0][0].dtype(), DType::kInt64);
}

TEST(ErrorDatasetTest, PropagatesThroughTransformations) {
  auto ds = ErrorDataset(absl::NotFoundError("gone"))->Map([](Element e) { return e; });
  EXPECT_EQ(ds->Repeat(2)->MakeIterator().status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tandem::data

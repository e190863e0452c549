#include "framework/data/readers.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "framework/core/env.h"
#include "framework/core/record_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::data {
namespace {

using ::testing::HasSubstr;

class ReadersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = env::MakeTempDir("readers_test");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
  }
  void TearDown() override { (void)env::DeleteRecursively(dir_); }
  std::string Write(const std::string& name, const std::string& contents) {
    std::string path = env::JoinPath(dir_, name);
    EXPECT_TRUE(env::WriteFileAtomic(path, contents).ok());
    return path;
  }
  std::string dir_;
};

// ------------------------------------------------------------------------ CSV

TEST_F(ReadersTest, CsvParsesTypedColumns) {
  std::string path = Write("a.csv",
                           "x,count,id,flag,small\r\n"
                           "1.5,3,10000000000,true,255\r\n"
                           "\n"
                           "-2e-1, -7 ,\"42\",0,0\n"
                           "\"3\",0,1,1,7");  // No trailing newline.
  auto ds =
      FromCsv(path, {DType::kFloat, DType::kInt32, DType::kInt64, DType::kBool, DType::kUInt8});
  ASSERT_TRUE(ds.ok()) << ds.status();
  auto all = CollectAll(**ds);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  const Element& r0 = (*all)[0];
  ASSERT_EQ(r0.size(), 5u);
  EXPECT_EQ(r0[0].dtype(), DType::kFloat);
  EXPECT_FLOAT_EQ(r0[0].scalar<float>(), 1.5f);
  EXPECT_EQ(r0[1].scalar<int32_t>(), 3);
  EXPECT_EQ(r0[2].scalar<int64_t>(), int64_t{10000000000});
  EXPECT_TRUE(r0[3].scalar<bool>());
  EXPECT_EQ(r0[4].scalar<uint8_t>(), 255);
  const Element& r1 = (*all)[1];
  EXPECT_FLOAT_EQ(r1[0].scalar<float>(), -0.2f);
  EXPECT_EQ(r1[1].scalar<int32_t>(), -7);
  EXPECT_EQ(r1[2].scalar<int64_t>(), 42);
  EXPECT_FALSE(r1[3].scalar<bool>());
  EXPECT_FLOAT_EQ((*all)[2][0].scalar<float>(), 3.0f);
  EXPECT_EQ((*all)[2][4].scalar<uint8_t>(), 7);
}

TEST_F(ReadersTest, CsvBatchesIntoVectors) {
  std::string path = Write("b.csv", "a,b\n1,2\n3,4\n5,6\n");
  auto ds = FromCsv(path, {DType::kFloat, DType::kInt32});
  ASSERT_TRUE(ds.ok());
  auto all = CollectAll(*(*ds)->Batch(2));
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0][0].shape(), TensorShape({2}));
  EXPECT_EQ((*all)[0][0].flat<float>()[1], 3.0f);
  EXPECT_EQ((*all)[1][1].flat<int32_t>()[0], 6);
}

TEST_F(ReadersTest, CsvBadFieldNamesFileLineAndColumn) {
  // The file is parsed when the dataset is made: a bad field fails FromCsv itself.
  std::string path = Write("bad.csv", "price,qty\n1.0,2\n2.5,many\n");
  auto ds = FromCsv(path, {DType::kFloat, DType::kInt32});
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  std::string msg(ds.status().message());
  EXPECT_THAT(msg, HasSubstr(path + ":3"));
  EXPECT_THAT(msg, HasSubstr("column 2 (qty)"));
  EXPECT_THAT(msg, HasSubstr("\"many\""));
  EXPECT_THAT(msg, HasSubstr("int32"));
}

TEST_F(ReadersTest, CsvOtherErrors) {
  auto message = [](const absl::StatusOr<DatasetPtr>& ds) {
    EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(ds.status().message());
  };
  EXPECT_THAT(message(FromCsv(Write("c.csv", "a,b\n1,2\n1,2,3\n"), {DType::kInt32, DType::kInt32})),
              HasSubstr("c.csv:3: expected 2 fields but found 3"));
  EXPECT_THAT(message(FromCsv(Write("d.csv", "a,b,c\n1,2,3\n"), {DType::kInt32, DType::kInt32})),
              HasSubstr("d.csv:1: header has 3 columns"));
  EXPECT_THAT(message(FromCsv(Write("e.csv", "a\n300\n"), {DType::kUInt8})), HasSubstr("e.csv:2"));
  EXPECT_THAT(message(FromCsv(Write("f.csv", "a,b\n1,\n"), {DType::kInt32, DType::kInt32})),
              HasSubstr("column 2 (b): empty field"));
  EXPECT_THAT(message(FromCsv(Write("g.csv", "a\n\"abc\n"), {DType::kInt32})),
              HasSubstr("unterminated"));
  EXPECT_EQ(FromCsv(env::JoinPath(dir_, "missing.csv"), {DType::kInt32}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(FromCsv(Write("h.csv", "a\n1\n"), {DType::kResource}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// ------------------------------------------------------------------------ TFRecord

std::string AsString(const Tensor& t) {
  return std::string(reinterpret_cast<const char*>(t.data<uint8_t>()), t.NumElements());
}

TEST_F(ReadersTest, TfRecordsAcrossFiles) {
  std::string a = env::JoinPath(dir_, "a.tfrecord"), b = env::JoinPath(dir_, "b.tfrecord");
  {
    auto w = io::RecordWriter::Open(a);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->WriteRecord("alpha").ok());
    ASSERT_TRUE((*w)->WriteRecord("").ok());
    auto w2 = io::RecordWriter::Open(b);
    ASSERT_TRUE(w2.ok());
    ASSERT_TRUE((*w2)->WriteRecord(std::string("\x00\xff", 2)).ok());
  }
  auto ds = FromTFRecords({a, b});
  ASSERT_TRUE(ds.ok());
  auto all = CollectAll(**ds);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0][0].dtype(), DType::kUInt8);
  EXPECT_EQ((*all)[0][0].shape(), TensorShape({5}));
  EXPECT_EQ(AsString((*all)[0][0]), "alpha");
  EXPECT_EQ((*all)[1][0].shape(), TensorShape({0}));
  EXPECT_EQ(AsString((*all)[2][0]), std::string("\x00\xff", 2));
}

TEST_F(ReadersTest, TfRecordCorruptionIsDataLossWithFileAndOffset) {
  std::string bytes = io::EncodeRecord("good") + io::EncodeRecord("broken");
  bytes[bytes.size() - 7] ^= 0x20;  // Inside "broken".
  std::string path = Write("c.tfrecord", bytes);
  auto ds = FromTFRecords({path});
  ASSERT_TRUE(ds.ok());
  auto it = (*ds)->MakeIterator();
  ASSERT_TRUE(it.ok());
  auto first = (*it)->GetNext();
  ASSERT_TRUE(first.ok() && first->has_value());
  EXPECT_EQ(AsString((**first)[0]), "good");
  auto bad = (*it)->GetNext();
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr(path));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("offset 20"));

  EXPECT_EQ(FromTFRecords({env::JoinPath(dir_, "none.tfrecord")}).status().code(),
            absl::StatusCode::kNotFound);
}

// ------------------------------------------------------------------------ IDX

std::string DataDir() {
  const char* d = std::getenv("TANDEM_DATA_DIR");
  return d && *d ? d : "/usr/share/datasets/fashion-mnist";
}

TEST(FromIdxTest, FashionMnistTrainSplit) {
  const std::string dir = DataDir();
  auto ds = FromIdx(env::JoinPath(dir, "train-images-idx3-ubyte.gz"),
                    env::JoinPath(dir, "train-labels-idx1-ubyte.gz"));
  ASSERT_TRUE(ds.ok()) << ds.status();
  auto it = (*ds)->MakeIterator();
  ASSERT_TRUE(it.ok());
  int64_t count = 0;
  std::vector<int64_t> label_counts(10, 0);
  while (true) {
    auto e = (*it)->GetNext();
    ASSERT_TRUE(e.ok()) << e.status();
    if (!e->has_value()) break;
    const Element& el = **e;
    if (count == 0) {
      ASSERT_EQ(el.size(), 2u);
      EXPECT_EQ(el[0].dtype(), DType::kFloat);
      EXPECT_EQ(el[0].shape(), TensorShape({784}));
      EXPECT_EQ(el[1].dtype(), DType::kInt32);
      EXPECT_EQ(el[1].shape(), TensorShape());
      EXPECT_EQ(el[1].scalar<int32_t>(), 9);  // Ankle boot, the first training label.
      float lo = 1, hi = 0;
      for (float p : el[0].flat<float>()) lo = std::min(lo, p), hi = std::max(hi, p);
      EXPECT_GE(lo, 0.0f);
      EXPECT_LE(hi, 1.0f);
      EXPECT_GT(hi, 0.5f);
    }
    if (count < 4) {
      const int32_t expected[] = {9, 0, 0, 3};
      EXPECT_EQ(el[1].scalar<int32_t>(), expected[count]);
    }
    int32_t label = el[1].scalar<int32_t>();
    ASSERT_TRUE(label >= 0 && label < 10);
    ++label_counts[label];
    ++count;
  }
  EXPECT_EQ(count, 60000);
  for (int64_t c : label_counts) EXPECT_EQ(c, 6000);  // Fashion-MNIST is balanced.
  auto after = (*it)->GetNext();
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->has_value());
}

TEST(FromIdxTest, BatchedTestSplit) {
  auto ds = FromIdxSplit("", "t10k");  // $TANDEM_DATA_DIR or the default directory.
  ASSERT_TRUE(ds.ok()) << ds.status();
  auto all = CollectAll(*(*ds)->Batch(1000)->Take(3));
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0][0].shape(), TensorShape({1000, 784}));
  EXPECT_EQ((*all)[0][1].shape(), TensorShape({1000}));
  EXPECT_EQ((*all)[0][1].flat<int32_t>()[0], 9);
  EXPECT_EQ((*all)[0][1].flat<int32_t>()[1], 2);
}

// The pixels kept as bytes and scaled per batch give the batches of the float32 pipeline
// bit for bit, through a shuffle (the trainer's order) and the odd last batch.
TEST(FromIdxTest, BytesScaledPerBatchEqualFloatBatches) {
  auto floats = FromIdxSplit("", "t10k");
  auto bytes = FromIdxSplit("", "t10k", PixelFormat::kBytes);
  ASSERT_TRUE(floats.ok()) << floats.status();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto raw = CollectAll(*(*bytes)->Batch(3)->Take(1));
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ((*raw)[0][0].dtype(), DType::kUInt8);
  EXPECT_EQ((*raw)[0][0].shape(), TensorShape({3, 784}));

  auto want = CollectAll(*(*floats)->Shuffle(10000, 7)->Batch(96));
  auto got = CollectAll(*(*bytes)->Shuffle(10000, 7)->Batch(96)->Map(PixelsToUnitFloat()));
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), want->size());
  ASSERT_EQ(want->back()[0].dim(0), 10000 % 96);
  for (size_t b = 0; b < want->size(); ++b) {
    const Tensor &w = (*want)[b][0], &g = (*got)[b][0];
    ASSERT_EQ(g.dtype(), DType::kFloat);
    ASSERT_EQ(g.shape(), w.shape());
    ASSERT_EQ(std::memcmp(g.raw_data(), w.raw_data(), w.TotalBytes()), 0) << "batch " << b;
    ASSERT_EQ(
        std::memcmp((*got)[b][1].raw_data(), (*want)[b][1].raw_data(), (*want)[b][1].TotalBytes()),
        0);
  }
}

TEST(FromIdxTest, PixelsToUnitFloatRejectsWhatIsNotBytes) {
  MapFn scale = PixelsToUnitFloat(1);
  auto no_component = scale({Tensor::FromVector<uint8_t>({1}, TensorShape({1}))});
  EXPECT_EQ(no_component.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(no_component.status().message()), HasSubstr("component 1"));
  auto floats = scale({Tensor::FromVector<uint8_t>({1}, TensorShape({1})),
                       Tensor::FromVector<float>({1.f}, TensorShape({1}))});
  EXPECT_EQ(floats.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(floats.status().message()), HasSubstr("not uint8"));
  auto scaled = scale({Tensor::FromVector<float>({7.f}, TensorShape({1})),
                       Tensor::FromVector<uint8_t>({0, 51, 255}, TensorShape({3}))});
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  EXPECT_EQ((*scaled)[0].flat<float>()[0], 7.f);  // The other components pass through.
  EXPECT_EQ((*scaled)[1].flat<float>()[0], 0.f);
  EXPECT_EQ((*scaled)[1].flat<float>()[1], 51 * (1.0f / 255.0f));
  EXPECT_EQ((*scaled)[1].flat<float>()[2], 1.f);
}

TEST(FromIdxTest, MissingOrMismatchedFiles) {
  const std::string dir = DataDir();
  auto missing = FromIdx("/nonexistent/images", "/nonexistent/labels");
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/nonexistent/images"));
  auto mismatched = FromIdx(env::JoinPath(dir, "t10k-images-idx3-ubyte.gz"),
                            env::JoinPath(dir, "train-labels-idx1-ubyte.gz"));
  EXPECT_EQ(mismatched.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::data

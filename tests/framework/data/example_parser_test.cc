// Tests of the tf.train.Example reader (framework/data/example_parser.h) on records
// written with TensorFlow's own message definitions (tf_example.proto, package
// tensorflow): fixed-length features with and without defaults, variable-length lists
// padded with '' / -1 / 0, gzip files, and each of TensorFlow's parse errors.
#include "framework/data/example_parser.h"

#include <zlib.h>

#include <string>
#include <vector>

#include "framework/core/env.h"
#include "framework/core/record_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/data/tf_example.pb.h"
#include "tests/util/temp_dir.h"

namespace tandem::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// An Example with `age` (float), `workclass` (bytes, one or more) and `ids` (int64).
std::string Census(const std::vector<float>& age, const std::vector<std::string>& workclass,
                   const std::vector<int64_t>& ids) {
  tensorflow::Example e;
  auto& f = *e.mutable_features()->mutable_feature();
  if (!age.empty()) {
    for (float a : age) f["age"].mutable_float_list()->add_value(a);
  }
  for (const std::string& w : workclass) f["workclass"].mutable_bytes_list()->add_value(w);
  for (int64_t i : ids) f["ids"].mutable_int64_list()->add_value(i);
  return e.SerializeAsString();
}

std::vector<ExampleFeature> Spec(std::vector<double> age_default = {}) {
  return {{"age", DType::kFloat, false, {1}, age_default},
          {"workclass", DType::kString, true, {}, {}},
          {"ids", DType::kInt64, true, {}, {}}};
}

TEST(ExampleParserTest, ReadsTensorFlowWrittenExamples) {
  const std::vector<std::string> records = {Census({39}, {"State-gov"}, {3, 4}),
                                            Census({50}, {"Private", "?"}, {}),
                                            Census({}, {}, {7})};
  std::vector<absl::string_view> views(records.begin(), records.end());
  absl::StatusOr<std::vector<Tensor>> cols = ParseExamples(views, Spec({-1}), "mem");
  ASSERT_TRUE(cols.ok()) << cols.status();
  ASSERT_EQ((*cols)[0].shape(), TensorShape({3}));
  EXPECT_THAT(std::vector<float>((*cols)[0].data<float>(), (*cols)[0].data<float>() + 3),
              ElementsAre(39, 50, -1));  // The third takes the default.
  ASSERT_EQ((*cols)[1].shape(), TensorShape({3, 2}));
  std::vector<std::string> w;
  for (int i = 0; i < 6; ++i) w.push_back((*cols)[1].StringAt(i));
  EXPECT_THAT(w, ElementsAre("State-gov", "", "Private", "?", "", ""));
  ASSERT_EQ((*cols)[2].shape(), TensorShape({3, 2}));
  EXPECT_THAT(std::vector<int64_t>((*cols)[2].data<int64_t>(), (*cols)[2].data<int64_t>() + 6),
              ElementsAre(3, 4, -1, -1, 7, -1));
}

TEST(ExampleParserTest, ParseErrorsAsTensorFlows) {
  auto error = [](const std::string& record, const std::vector<ExampleFeature>& spec) {
    std::vector<absl::string_view> views = {record};
    return std::string(ParseExamples(views, spec, "f.tfrecord").status().message());
  };
  EXPECT_THAT(error(Census({}, {"x"}, {}), Spec()),
              HasSubstr("f.tfrecord: record 0: feature 'age' (data type: float32) is required "
                        "but could not be found"));
  EXPECT_THAT(error(Census({1, 2}, {}, {}), Spec()),
              HasSubstr("Number of float values != expected. Values size: 2 but output shape: [1]"));
  std::vector<ExampleFeature> as_int = {{"age", DType::kInt64, false, {1}, {}}};
  EXPECT_THAT(error(Census({1}, {}, {}), as_int),
              HasSubstr("Data types don't match. Data type: float but expected type: int64"));
  EXPECT_THAT(error("\xff\xff\xff", Spec()), HasSubstr("not a serialized tf.train.Example"));
}

TEST(ExampleParserTest, ReadsPlainAndGzipTfRecordFiles) {
  testing::TempDir dir;
  const std::string plain = env::JoinPath(dir.path(), "a.tfrecord");
  {
    auto w = io::RecordWriter::Open(plain);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->WriteRecord(Census({1}, {"a"}, {})).ok());
    ASSERT_TRUE((*w)->Close().ok());
  }
  absl::StatusOr<std::string> bytes = env::ReadFile(plain);
  ASSERT_TRUE(bytes.ok());
  const std::string gz = env::JoinPath(dir.path(), "b.tfrecord.gz");
  gzFile f = gzopen(gz.c_str(), "wb");
  const std::string two = *bytes + io::EncodeRecord(Census({2}, {"b"}, {5}));
  gzwrite(f, two.data(), static_cast<unsigned>(two.size()));
  gzclose(f);
  absl::StatusOr<std::vector<Tensor>> cols = ReadExampleFiles({plain, gz}, Spec());
  ASSERT_TRUE(cols.ok()) << cols.status();
  EXPECT_EQ((*cols)[0].NumElements(), 3);
  EXPECT_EQ((*cols)[0].data<float>()[2], 2.f);
  // A broken record names its file and record.
  ASSERT_TRUE(env::WriteFileAtomic(plain, bytes->substr(0, bytes->size() - 3)).ok());
  EXPECT_THAT(std::string(ReadExampleFiles({gz, plain}, Spec()).status().message()),
              HasSubstr("a.tfrecord: corrupt record at offset 0"));
}

}  // namespace
}  // namespace tandem::data

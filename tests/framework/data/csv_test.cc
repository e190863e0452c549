// Tests of ReadCsv / CsvDataset (framework/data/csv.h): strings beside numbers,
// defaults for empty fields and na_value, a header checked against the declared names,
// gzip, skip_initial_space, comments and a stripped line suffix (adult.test's first
// line and trailing periods), multivalent columns padded with '' and -1, selection,
// and every bad input named by file, line and column, or left out and counted with
// skip_bad_rows.
#include "framework/data/csv.h"

#include <zlib.h>

#include <string>
#include <vector>

#include "framework/core/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/temp_dir.h"

namespace tandem::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class CsvTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = env::JoinPath(dir_.path(), name);
    EXPECT_TRUE(env::WriteFileAtomic(path, text).ok());
    return path;
  }
  std::string WriteGzip(const std::string& name, const std::string& text) {
    const std::string path = env::JoinPath(dir_.path(), name);
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
    gzclose(f);
    return path;
  }
  testing::TempDir dir_;
};

std::vector<std::string> StringsOf(const Tensor& t) {
  std::vector<std::string> v;
  for (int64_t i = 0; i < t.NumElements(); ++i) v.push_back(t.StringAt(i));
  return v;
}
std::vector<int64_t> IntsOf(const Tensor& t) {
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.NumElements());
}

// The census files' layout: leading spaces, '?' values, a comment line, trailing '.'.
TEST_F(CsvTest, CensusStyleRows) {
  const std::string path = WriteGzip("adult.test.gz",
                                     "|1x3 Cross validator\n"
                                     "25, Private, 226802, 11th, >50K.\n"
                                     "38, ?, , HS-grad, <=50K.\n");
  std::vector<CsvColumn> cols = {{"age", DType::kInt64, "0"},
                                 {"workclass", DType::kString, ""},
                                 {"fnlwgt", DType::kInt64, "0"},
                                 {"education", DType::kString, ""},
                                 {"income_bracket", DType::kString, ""}};
  CsvReadOptions o;
  o.skip_initial_space = true;
  o.comment = "|";
  o.strip_line_suffix = ".";
  absl::StatusOr<CsvTable> t = ReadCsv({path}, cols, o);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->rows, 2);
  EXPECT_THAT(t->names, ElementsAre("age", "workclass", "fnlwgt", "education", "income_bracket"));
  EXPECT_THAT(IntsOf(t->columns[0]), ElementsAre(25, 38));
  EXPECT_THAT(StringsOf(t->columns[1]), ElementsAre("Private", "?"));  // '?' is a value.
  EXPECT_THAT(IntsOf(t->columns[2]), ElementsAre(226802, 0));         // Empty: the default.
  EXPECT_THAT(StringsOf(t->columns[4]), ElementsAre(">50K", "<=50K"));
}

TEST_F(CsvTest, NaValueSelectionAndHeader) {
  const std::string path = Write("h.csv", "name,score,tag\nann,NA,x\nbob,2.5,NA\n");
  CsvReadOptions o;
  o.header = true;
  o.na_value = "NA";
  o.select = {"tag", "score"};
  absl::StatusOr<CsvTable> t = ReadCsv(
      {path}, {{"", DType::kString, ""}, {"", DType::kFloat, "-1"}, {"", DType::kString, "none"}},
      o);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->names, ElementsAre("tag", "score"));
  EXPECT_THAT(StringsOf(t->columns[0]), ElementsAre("x", "none"));
  EXPECT_EQ(t->columns[1].data<float>()[0], -1.f);
  EXPECT_EQ(t->columns[1].data<float>()[1], 2.5f);
  // A header unlike the declared names is an error naming the line.
  o.select.clear();
  absl::StatusOr<CsvTable> wrong =
      ReadCsv({path}, {{"name", DType::kString}, {"points", DType::kFloat}, {"tag", DType::kString}},
              o);
  EXPECT_THAT(std::string(wrong.status().message()), HasSubstr("h.csv:1: header column 2"));
}

TEST_F(CsvTest, ListsArePaddedToTheLongest) {
  const std::string path = Write("l.csv", "a|b|c,1|2\n,\nd,7\n");
  std::vector<CsvColumn> cols = {{"tags", DType::kString, "", "|"},
                                 {"ids", DType::kInt64, "", "|"}};
  absl::StatusOr<CsvTable> t = ReadCsv({path}, cols, {});
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->columns[0].shape(), TensorShape({3, 3}));
  EXPECT_THAT(StringsOf(t->columns[0]), ElementsAre("a", "b", "c", "", "", "", "d", "", ""));
  ASSERT_EQ(t->columns[1].shape(), TensorShape({3, 2}));
  EXPECT_THAT(IntsOf(t->columns[1]), ElementsAre(1, 2, -1, -1, 7, -1));
  absl::StatusOr<DatasetPtr> ds = CsvDataset(*std::move(t));
  ASSERT_TRUE(ds.ok());
  auto batches = CollectAll(*(*ds)->Batch(2));
  ASSERT_TRUE(batches.ok()) << batches.status();
  EXPECT_EQ((*batches)[0][0].shape(), TensorShape({2, 3}));
  EXPECT_EQ((*batches)[1][0].StringAt(0), "d");
}

TEST_F(CsvTest, BadRowsAreNamedOrSkippedAndCounted) {
  const std::string path = Write("bad.csv", "1,a\n2\nx,b\n3,c\n");
  std::vector<CsvColumn> cols = {{"n", DType::kInt64}, {"s", DType::kString}};
  absl::StatusOr<CsvTable> strict = ReadCsv({path}, cols, {});
  EXPECT_EQ(strict.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(strict.status().message()),
              HasSubstr("bad.csv:2: expected 2 fields but found 1"));
  CsvReadOptions skip;
  skip.skip_bad_rows = true;
  absl::StatusOr<CsvTable> t = ReadCsv({path}, cols, skip);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->rows, 2);
  EXPECT_EQ(t->skipped_rows, 2);
  EXPECT_THAT(t->first_skipped, HasSubstr("bad.csv:2"));
  EXPECT_THAT(IntsOf(t->columns[0]), ElementsAre(1, 3));
  EXPECT_THAT(StringsOf(t->columns[1]), ElementsAre("a", "c"));  // No half row left behind.
}

TEST_F(CsvTest, OtherErrorsNameTheirPlace) {
  std::vector<CsvColumn> cols = {{"n", DType::kInt64}, {"s", DType::kString}};
  auto msg = [&](const std::string& text) {
    return std::string(ReadCsv({Write("e.csv", text)}, cols, {}).status().message());
  };
  EXPECT_THAT(msg("1,a\nmany,b\n"), HasSubstr("e.csv:2: column 1 (n): cannot parse \"many\""));
  EXPECT_THAT(msg("1,a\n,b\n"), HasSubstr("e.csv:2: column 1 (n): empty field"));
  EXPECT_THAT(msg("1,\"a\n"), HasSubstr("unterminated quoted field"));
  EXPECT_EQ(ReadCsv({env::JoinPath(dir_.path(), "none.csv")}, cols, {}).status().code(),
            absl::StatusCode::kNotFound);
  CsvReadOptions o;
  o.select = {"nope"};
  EXPECT_THAT(std::string(ReadCsv({Write("s.csv", "1,a\n")}, cols, o).status().message()),
              HasSubstr("no column named 'nope'"));
  EXPECT_THAT(std::string(ReadCsv({Write("s.csv", "1,a\n")},
                                  {{"n", DType::kInt64, "zero"}, {"s", DType::kString}}, {})
                              .status()
                              .message()),
              HasSubstr("default value: cannot parse \"zero\""));
  EXPECT_FALSE(ReadCsv({Write("f.csv", "1.5\n")}, {{"x", DType::kFloat, "", "|"}}, {}).ok());
}

}  // namespace
}  // namespace tandem::data

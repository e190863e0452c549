// tandem's JSON reader against nlohmann::json: the same verdict (JSON or not) and the
// same value on hand-picked hard cases (escapes, surrogates, UTF-8, number edges,
// whitespace, trailing text, integers beyond 64 bits), plus its own API: number kinds,
// member order and lookup, depth limit, error messages.
#include "serving/rest_json_reader.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tandem::serving {
namespace {

using ::testing::HasSubstr;

nlohmann::json ToNlohmann(const JsonValue& v) {
  switch (v.kind()) {
    case JsonKind::kNull:
      return nullptr;
    case JsonKind::kBool:
      return v.bool_value();
    case JsonKind::kInt:
      return v.int_value();
    case JsonKind::kUint:
      return v.uint_value();
    case JsonKind::kDouble:
      return v.number();
    case JsonKind::kString:
      return std::string(v.string());
    case JsonKind::kArray: {
      nlohmann::json a = nlohmann::json::array();
      for (size_t i = 0; i < v.size(); ++i) {
        JsonValue e = v.first();
        for (size_t k = 0; k < i; ++k) e = e.next();
        a.push_back(ToNlohmann(e));
      }
      return a;
    }
    case JsonKind::kObject: {
      nlohmann::json o = nlohmann::json::object();
      v.ForEachMember(
          [&](absl::string_view k, const JsonValue& m) { o[std::string(k)] = ToNlohmann(m); });
      return o;
    }
  }
  return nullptr;
}

TEST(JsonReaderTest, AgreesWithNlohmannOnHardCases) {
  const std::vector<std::string> cases = {"0",
                                          "-0",
                                          "1",
                                          "-1",
                                          "0.5",
                                          "-0.0",
                                          "1e5",
                                          "1E+5",
                                          "1e-5",
                                          "2.5e-324",
                                          "1e-400",
                                          "1e308",
                                          "1e309",
                                          "-1e309",
                                          "9223372036854775807",
                                          "9223372036854775808",
                                          "-9223372036854775808",
                                          "-9223372036854775809",
                                          "18446744073709551615",
                                          "18446744073709551616",
                                          "123456789012345678901234567890",
                                          "-123456789012345678901234567890",
                                          "[1, 123456789012345678901234567890, 2]",
                                          "123456789012345678901234567890e2",
                                          "01234567890123456789012345",
                                          "[\"\\\"123456789012345678901234567890\"]",
                                          "[\"\\\\\", 123456789012345678901234567890]",
                                          "[123456789012345678901234567890 1]",
                                          "{\"123456789012345678901234567890\": 1e400}",
                                          "01",
                                          "-",
                                          "1.",
                                          ".5",
                                          "1e",
                                          "1e+",
                                          "+1",
                                          "0x10",
                                          "NaN",
                                          "Infinity",
                                          "-Infinity",
                                          "true",
                                          "false",
                                          "null",
                                          "tru",
                                          "nul",
                                          "True",
                                          "\"\"",
                                          "\"abc\"",
                                          "\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"",
                                          "\"\\u0041\\u00e9\\u20ac\"",
                                          "\"\\ud83d\\ude00\"",
                                          "\"\\ud83d\"",
                                          "\"\\ude00\"",
                                          "\"\\ud83d\\u0041\"",
                                          "\"\\u12\"",
                                          "\"\\uZZZZ\"",
                                          "\"\\x41\"",
                                          "\"\\u0000\"",
                                          std::string("\"a\0b\"", 5),
                                          std::string("[1] \0 x", 7),
                                          std::string("[1]\0", 4) + std::string(100, '['),
                                          std::string("[1,\0 2]", 7),
                                          "\"\t\"",
                                          "\"\x7f\"",
                                          "\"\xc3\xa9\"",
                                          "\"\xc3\"",
                                          "\"\xc0\x80\"",
                                          "\"\xe0\x80\x80\"",
                                          "\"\xed\xa0\x80\"",
                                          "\"\xf0\x9f\x98\x80\"",
                                          "\"\xf4\x90\x80\x80\"",
                                          "\"\xff\"",
                                          "\"unterminated",
                                          "[]",
                                          "[ ]",
                                          "[1,]",
                                          "[,1]",
                                          "[1 2]",
                                          "[1,[2,[3]]]",
                                          "{}",
                                          "{ }",
                                          "{\"a\":1}",
                                          "{\"a\" : 1 , \"b\" : [true, null]}",
                                          "{\"a\":1,}",
                                          "{a:1}",
                                          "{\"a\" 1}",
                                          "{\"a\":1 \"b\":2}",
                                          "{\"a\":1,\"a\":2}",
                                          "{\"\":0}",
                                          " \t\n\r1 \r\n",
                                          "1 2",
                                          "[1]x",
                                          "",
                                          " ",
                                          "[",
                                          "{",
                                          "]",
                                          "\xef\xbb\xbf{}",
                                          "[1e2, -3, 4.5, \"x\", {}]",
                                          "{\"b64\": \"AAAA\"}",
                                          "[\"\\u00e9\", \"\\u00E9\"]"};
  for (const std::string& text : cases) {
    absl::StatusOr<JsonDocument> mine = JsonDocument::Parse(text, 64);
    const nlohmann::json theirs = nlohmann::json::parse(text, nullptr, false);
    ASSERT_EQ(mine.ok(), !theirs.is_discarded())
        << "'" << text << "': "
        << (mine.ok() ? "tandem accepts, nlohmann refuses" : std::string(mine.status().message()));
    if (mine.ok()) {
      EXPECT_EQ(ToNlohmann(mine->root()), theirs) << "'" << text << "'";
    }
  }
}

TEST(JsonReaderTest, NumbersKeepTheirKind) {
  auto doc = JsonDocument::Parse("[-5, 5, 5.0, 18446744073709551615, 1e400]", 8);
  EXPECT_FALSE(doc.ok());  // 1e400 does not fit a double.
  doc = JsonDocument::Parse("[-5, 5, 5.0, 18446744073709551615, 18446744073709551616]", 8);
  ASSERT_TRUE(doc.ok()) << doc.status();
  JsonValue v = doc->root().first();
  EXPECT_EQ(v.kind(), JsonKind::kInt);
  EXPECT_EQ(v.int_value(), -5);
  v = v.next();
  EXPECT_EQ(v.kind(), JsonKind::kUint);
  EXPECT_EQ(v.uint_value(), 5u);
  v = v.next();
  EXPECT_EQ(v.kind(), JsonKind::kDouble);
  EXPECT_FALSE(v.is_integer());
  v = v.next();
  EXPECT_EQ(v.uint_value(), 18446744073709551615u);
  v = v.next();
  EXPECT_EQ(v.kind(), JsonKind::kDouble);  // One past uint64: read as a double.
  EXPECT_EQ(v.number(), 18446744073709551616.0);
}

TEST(JsonReaderTest, ObjectsKeepOrderAndFindTheLastDuplicate) {
  auto doc = JsonDocument::Parse(R"({"b": 1, "a": [2, 3], "b": "x"})", 8);
  ASSERT_TRUE(doc.ok()) << doc.status();
  const JsonValue root = doc->root();
  EXPECT_EQ(root.size(), 3u);
  std::vector<std::string> keys;
  root.ForEachMember([&](absl::string_view k, const JsonValue&) { keys.emplace_back(k); });
  EXPECT_THAT(keys, ::testing::ElementsAre("b", "a", "b"));
  ASSERT_TRUE(root.Find("b").has_value());
  EXPECT_EQ(root.Find("b")->string(), "x");
  EXPECT_EQ(root.Find("a")->size(), 2u);
  EXPECT_FALSE(root.Find("c").has_value());
  EXPECT_FALSE(root.Find("a")->Find("b").has_value());  // Not an object.
}

TEST(JsonReaderTest, IntegersBeyond64BitsAreDoublesOutsideStringsOnly) {
  auto doc = JsonDocument::Parse(
      R"(["\"123456789012345678901234567890", -123456789012345678901234567890, 7])", 8);
  ASSERT_TRUE(doc.ok()) << doc.status();
  JsonValue v = doc->root().first();
  EXPECT_EQ(v.string(), "\"123456789012345678901234567890");
  v = v.next();
  EXPECT_EQ(v.kind(), JsonKind::kDouble);
  EXPECT_EQ(v.number(), -123456789012345678901234567890.0);
  v = v.next();
  EXPECT_EQ(v.kind(), JsonKind::kUint);
  EXPECT_EQ(v.uint_value(), 7u);
  // Text that is not JSON stays refused when the big integer is read as a double.
  EXPECT_FALSE(JsonDocument::Parse("[123456789012345678901234567890,]", 8).ok());
  EXPECT_FALSE(JsonDocument::Parse("[00123456789012345678901234567890]", 8).ok());
}

TEST(JsonReaderTest, DepthLimitAndErrors) {
  EXPECT_TRUE(JsonDocument::Parse("[[[1]]]", 3).ok());
  EXPECT_TRUE(JsonDocument::Parse("{\"a\": {\"b\": [1]}}", 3).ok());
  EXPECT_THAT(JsonDocument::Parse("[[[[1]]]]", 3).status().message(),
              HasSubstr("JSON Parse error: lists and objects nested more than 3 deep"));
  EXPECT_FALSE(JsonDocument::Parse("{\"a\": {\"b\": [[1]]}}", 3).ok());
  EXPECT_TRUE(JsonDocument::Parse("1", 0).ok());
  EXPECT_FALSE(JsonDocument::Parse("[1]", 0).ok());
  // simdjson does not count an empty list or object as a level.
  EXPECT_TRUE(JsonDocument::Parse("[[[[]]]]", 3).ok());
  EXPECT_FALSE(JsonDocument::Parse("[[[[[]]]]]", 3).ok());
  const absl::Status comma = JsonDocument::Parse("[1, 2 3]", 8).status();
  EXPECT_EQ(comma.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(comma.message(), HasSubstr("JSON Parse error: a missing or extra comma"));
  EXPECT_THAT(JsonDocument::Parse("{\"a\": \"\xff\"}", 8).status().message(),
              HasSubstr("JSON Parse error: invalid UTF-8"));
  EXPECT_THAT(JsonDocument::Parse("[1.5e999]", 8).status().message(),
              HasSubstr("JSON Parse error: an invalid number, or one beyond a double's range"));
  EXPECT_THAT(JsonDocument::Parse("[\"\\ud83d\"]", 8).status().message(),
              HasSubstr("lone surrogate"));
  EXPECT_THAT(JsonDocument::Parse("[\"abc", 8).status().message(),
              HasSubstr("JSON Parse error: an unterminated string"));
  EXPECT_THAT(JsonDocument::Parse(" ", 8).status().message(), HasSubstr("no value"));
}

TEST(JsonReaderTest, LongNumericListsAreWalkedInOrder) {
  std::string text = "[";
  for (int i = 0; i < 10000; ++i) text += (i ? "," : "") + std::to_string(i * 0.25);
  text += "]";
  auto doc = JsonDocument::Parse(text, 8);
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ(doc->root().size(), 10000u);
  JsonValue v = doc->root().first();
  for (int i = 0; i < 9999; ++i) {
    ASSERT_EQ(v.number(), i * 0.25);
    v = v.next();
  }
  EXPECT_EQ(v.number(), 9999 * 0.25);
}

TEST(JsonReaderTest, TheDocumentCanBeMovedAndOutlivesTheText) {
  absl::StatusOr<JsonDocument> doc = [] {
    std::string text = R"({"key": ["value", 1.5]})";
    return JsonDocument::Parse(text, 8);
  }();
  ASSERT_TRUE(doc.ok()) << doc.status();
  const JsonDocument moved = *std::move(doc);
  const std::optional<JsonValue> list = moved.root().Find("key");
  ASSERT_TRUE(list.has_value());
  EXPECT_EQ(list->first().string(), "value");
  EXPECT_EQ(list->first().next().number(), 1.5);
}

}  // namespace
}  // namespace tandem::serving

#include "serving/rest_json_reader.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <optional>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace tandem::serving {
namespace {

constexpr size_t kSaturatedSize = 0xFFFFFF;  // simdjson's array and object sizes stop here.
constexpr size_t kKeptParserCapacity = size_t{1} << 20;

absl::Status ParseError(simdjson::error_code error, int max_depth) {
  std::string what;
  switch (error) {
    case simdjson::DEPTH_ERROR:
      what = absl::StrCat("lists and objects nested more than ", max_depth, " deep");
      break;
    case simdjson::NUMBER_ERROR:
      what = "an invalid number, or one beyond a double's range";
      break;
    case simdjson::STRING_ERROR:
      what = "an invalid escape in a string (or a lone surrogate in a \\u escape)";
      break;
    case simdjson::UTF8_ERROR:
      what = "invalid UTF-8";
      break;
    case simdjson::UNESCAPED_CHARS:
      what = "a control character in a string";
      break;
    case simdjson::UNCLOSED_STRING:
      what = "an unterminated string";
      break;
    case simdjson::T_ATOM_ERROR:
    case simdjson::F_ATOM_ERROR:
    case simdjson::N_ATOM_ERROR:
      what = "an invalid literal (not true, false or null)";
      break;
    case simdjson::EMPTY:
      what = "no value (the text is empty or blank)";
      break;
    case simdjson::TAPE_ERROR:
    case simdjson::INCOMPLETE_ARRAY_OR_OBJECT:
    case simdjson::TRAILING_CONTENT:
      what =
          "a missing or extra comma, colon, bracket or brace, a key that is not a string, an "
          "unexpected character, or text after the value";
      break;
    case simdjson::MEMALLOC:
      return absl::ResourceExhaustedError("JSON Parse error: out of memory");
    default:
      what = simdjson::error_message(error);
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat("JSON Parse error: ", what));
}

// `text` with ".0" after every integer outside strings that fits neither int64 nor
// uint64, so that simdjson (which refuses such integers) reads it as a double, as
// nlohmann::json does; nullopt when there is none. Only integer tokens change, so
// text that is not JSON stays not JSON.
std::optional<std::string> BigIntegersAsDoubles(absl::string_view text) {
  const auto is_number_char = [](char c) {
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
  };
  std::string out;
  size_t copied = 0;  // text[0, copied) is in `out`.
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '"') {  // Skip the string: to the first quote after an even run of backslashes.
      size_t backslashes = 0;
      for (++i; i < text.size(); ++i) {
        if (text[i] == '"' && backslashes % 2 == 0) break;
        backslashes = text[i] == '\\' ? backslashes + 1 : 0;
      }
      ++i;
      continue;
    }
    if (!is_number_char(c)) {
      ++i;
      continue;
    }
    const size_t start = i;
    while (i < text.size() && is_number_char(text[i])) ++i;
    const absl::string_view token = text.substr(start, i - start);
    const size_t digits_from = token[0] == '-' ? 1 : 0;
    if (token.size() == digits_from ||
        token.find_first_not_of("0123456789", digits_from) != absl::string_view::npos) {
      continue;  // Not a plain integer.
    }
    std::errc ec;
    if (digits_from == 1) {
      int64_t v;
      ec = std::from_chars(token.data(), token.data() + token.size(), v).ec;
    } else {
      uint64_t v;
      ec = std::from_chars(token.data(), token.data() + token.size(), v).ec;
    }
    if (ec != std::errc::result_out_of_range) continue;
    out.append(text.data() + copied, i - copied);
    out.append(".0");
    copied = i;
  }
  if (copied == 0) return std::nullopt;
  out.append(text.data() + copied, text.size() - copied);
  return out;
}

}  // namespace

absl::StatusOr<JsonDocument> JsonDocument::Parse(absl::string_view text, int max_depth) {
  if (text.size() >= simdjson::SIMDJSON_MAXSIZE_BYTES) {
    return absl::InvalidArgumentError("JSON Parse error: the text is larger than 4 GiB");
  }
  if (text.size() >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // A BOM.
  JsonDocument doc;
  doc.doc_ = std::make_unique<simdjson::dom::document>();
  // The parser's buffers (about 4 bytes per byte of text) are kept for the thread's
  // next document unless they grew past kKeptParserCapacity.
  thread_local std::unique_ptr<simdjson::dom::parser> kept;
  std::unique_ptr<simdjson::dom::parser> parser = std::move(kept);
  if (parser == nullptr) parser = std::make_unique<simdjson::dom::parser>();
  // simdjson counts the document itself as a level.
  const size_t depth = static_cast<size_t>(std::max(max_depth, 0)) + 1;
  simdjson::error_code error = simdjson::SUCCESS;
  if (parser->max_depth() != depth) {
    error = parser->allocate(std::max({parser->capacity(), text.size(), size_t{64}}), depth);
  }
  const auto parse = [&](absl::string_view t) {
    return parser->parse_into_document(*doc.doc_, t.data(), t.size()).get(doc.root_);
  };
  if (!error) error = parse(text);
  // Two kinds of text that nlohmann::json accepts and simdjson refuses, looked for
  // only once simdjson has refused the text. A NUL byte ends the text for nlohmann
  // (before the end of the value, the text is cut short and refused either way).
  if (error && error != simdjson::MEMALLOC) {
    if (const void* nul = std::memchr(text.data(), '\0', text.size())) {
      text = text.substr(0, static_cast<const char*>(nul) - text.data());
      error = parse(text);
    }
  }
  // Integers beyond 64 bits, which nlohmann reads as doubles.
  if (error == simdjson::NUMBER_ERROR) {
    if (std::optional<std::string> doubles = BigIntegersAsDoubles(text)) error = parse(*doubles);
  }
  if (parser->capacity() <= kKeptParserCapacity) kept = std::move(parser);
  if (error) return ParseError(error, max_depth);
  return doc;
}

JsonKind JsonValue::kind() const {
  switch (type()) {
    case Type::NULL_VALUE:
      return JsonKind::kNull;
    case Type::BOOL:
      return JsonKind::kBool;
    case Type::INT64:
      return int_value() < 0 ? JsonKind::kInt : JsonKind::kUint;
    case Type::UINT64:
      return JsonKind::kUint;
    case Type::DOUBLE:
      return JsonKind::kDouble;
    case Type::STRING:
      return JsonKind::kString;
    case Type::ARRAY:
      return JsonKind::kArray;
    case Type::OBJECT:
      return JsonKind::kObject;
  }
  return JsonKind::kNull;
}

const char* JsonValue::type_name() const {
  switch (kind()) {
    case JsonKind::kNull:
      return "null";
    case JsonKind::kBool:
      return "boolean";
    case JsonKind::kString:
      return "string";
    case JsonKind::kArray:
      return "array";
    case JsonKind::kObject:
      return "object";
    default:
      return "number";
  }
}

size_t JsonValue::size() const {
  if (is_array()) {
    const simdjson::dom::array a = element_.get_array().value_unsafe();
    if (const size_t n = a.size(); n < kSaturatedSize) return n;
    size_t n = 0;
    for (auto it = a.begin(); it != a.end(); ++it) ++n;
    return n;
  }
  if (is_object()) {
    const simdjson::dom::object o = element_.get_object().value_unsafe();
    if (const size_t n = o.size(); n < kSaturatedSize) return n;
    size_t n = 0;
    for (auto it = o.begin(); it != o.end(); ++it) ++n;
    return n;
  }
  return 0;
}

std::optional<JsonValue> JsonValue::Find(absl::string_view key) const {
  std::optional<JsonValue> found;
  ForEachMember([&](absl::string_view k, JsonValue v) {
    if (k == key) found = v;
  });
  return found;
}

std::string JsonValue::Preview() const {
  switch (kind()) {
    case JsonKind::kNull:
      return "null";
    case JsonKind::kBool:
      return bool_value() ? "true" : "false";
    case JsonKind::kInt:
      return absl::StrCat(int_value());
    case JsonKind::kUint:
      return absl::StrCat(uint_value());
    case JsonKind::kDouble:
      return absl::StrCat(number());
    case JsonKind::kString: {
      const absl::string_view s = string();
      return s.size() <= 36 ? absl::StrCat("\"", s, "\"")
                            : absl::StrCat("\"", s.substr(0, 33), "...\"");
    }
    case JsonKind::kArray:
      return absl::StrCat("a list of ", size(), " values");
    case JsonKind::kObject:
      return absl::StrCat("an object of ", size(), " keys");
  }
  return "";
}

}  // namespace tandem::serving

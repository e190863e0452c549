#include "serving/rest_json_reader.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"

namespace tandem::serving {

using internal::JsonNode;
static_assert(sizeof(JsonNode) == 16, "a value costs 16 bytes");

// Recursive descent over the text; each value appends its node, then its subtree.
class JsonParser {
 public:
  JsonParser(absl::string_view text, int max_depth, JsonDocument* doc)
      : begin_(text.data()),
        p_(text.data()),
        end_(text.data() + text.size()),
        max_depth_(max_depth),
        doc_(doc) {}

  absl::Status Document() {
    if (end_ - p_ >= 3 && absl::string_view(p_, 3) == "\xEF\xBB\xBF") p_ += 3;  // A UTF-8 BOM.
    TANDEM_RETURN_IF_ERROR(Value(0));
    SkipSpace();
    // A NUL byte ends the text, as it does for nlohmann::json.
    if (p_ != end_ && *p_ != '\0') return Error("unexpected text after the value");
    return absl::OkStatus();
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("JSON Parse error at byte ", p_ - begin_, ": ", what));
  }

  void SkipSpace() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  uint32_t Add(JsonKind kind) {
    doc_->nodes_.emplace_back();
    doc_->nodes_.back().kind = kind;
    return static_cast<uint32_t>(doc_->nodes_.size() - 1);
  }
  void Close(uint32_t node) { doc_->nodes_[node].end = static_cast<uint32_t>(doc_->nodes_.size()); }

  absl::Status Value(int depth) {
    SkipSpace();
    if (p_ == end_) return Error("unexpected end of the text");
    switch (*p_) {
      case '[':
        return Array(depth + 1);
      case '{':
        return Object(depth + 1);
      case '"':
        return String();
      case 't':
        return Literal("true", JsonKind::kBool, true);
      case 'f':
        return Literal("false", JsonKind::kBool, false);
      case 'n':
        return Literal("null", JsonKind::kNull, false);
      default:
        if (*p_ == '-' || (*p_ >= '0' && *p_ <= '9')) return Number();
        return Error("expected a value");
    }
  }

  absl::Status Literal(absl::string_view word, JsonKind kind, bool value) {
    if (static_cast<size_t>(end_ - p_) < word.size() ||
        absl::string_view(p_, word.size()) != word) {
      return Error("invalid literal");
    }
    p_ += word.size();
    const uint32_t n = Add(kind);
    doc_->nodes_[n].b = value;
    Close(n);
    return absl::OkStatus();
  }

  absl::Status Array(int depth) {
    if (depth > max_depth_) return Error("nested too deep");
    const uint32_t n = Add(JsonKind::kArray);
    ++p_;
    uint32_t count = 0;
    SkipSpace();
    if (p_ < end_ && *p_ == ']') {
      ++p_;
    } else {
      while (true) {
        TANDEM_RETURN_IF_ERROR(Value(depth));
        ++count;
        SkipSpace();
        if (p_ == end_) return Error("unexpected end of the text in a list");
        if (*p_ == ',') {
          ++p_;
          continue;
        }
        if (*p_ != ']') return Error("expected ',' or ']'");
        ++p_;
        break;
      }
    }
    doc_->nodes_[n].count = count;
    Close(n);
    return absl::OkStatus();
  }

  absl::Status Object(int depth) {
    if (depth > max_depth_) return Error("nested too deep");
    const uint32_t n = Add(JsonKind::kObject);
    ++p_;
    uint32_t count = 0;
    SkipSpace();
    if (p_ < end_ && *p_ == '}') {
      ++p_;
    } else {
      while (true) {
        SkipSpace();
        if (p_ == end_ || *p_ != '"') return Error("expected a key (a string)");
        TANDEM_RETURN_IF_ERROR(String());
        SkipSpace();
        if (p_ == end_ || *p_ != ':') return Error("expected ':'");
        ++p_;
        TANDEM_RETURN_IF_ERROR(Value(depth));
        ++count;
        SkipSpace();
        if (p_ == end_) return Error("unexpected end of the text in an object");
        if (*p_ == ',') {
          ++p_;
          continue;
        }
        if (*p_ != '}') return Error("expected ',' or '}'");
        ++p_;
        break;
      }
    }
    doc_->nodes_[n].count = count;
    Close(n);
    return absl::OkStatus();
  }

  static int Hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // Reads the 4 hex digits after "\u".
  absl::Status Hex4(uint32_t* code) {
    if (end_ - p_ < 4) return Error("incomplete \\u escape");
    *code = 0;
    for (int k = 0; k < 4; ++k) {
      const int h = Hex(p_[k]);
      if (h < 0) return Error("invalid \\u escape");
      *code = *code * 16 + static_cast<uint32_t>(h);
    }
    p_ += 4;
    return absl::OkStatus();
  }

  static void AppendUtf8(std::string* out, uint32_t c) {
    if (c < 0x80) {
      out->push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (c >> 6)));
      out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (c >> 12)));
      out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (c >> 18)));
      out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }

  absl::Status Escape(std::string* out) {
    ++p_;  // The backslash.
    if (p_ == end_) return Error("unterminated string");
    const char c = *p_++;
    switch (c) {
      case '"':
      case '\\':
      case '/':
        out->push_back(c);
        return absl::OkStatus();
      case 'b':
        out->push_back('\b');
        return absl::OkStatus();
      case 'f':
        out->push_back('\f');
        return absl::OkStatus();
      case 'n':
        out->push_back('\n');
        return absl::OkStatus();
      case 'r':
        out->push_back('\r');
        return absl::OkStatus();
      case 't':
        out->push_back('\t');
        return absl::OkStatus();
      case 'u':
        break;
      default:
        return Error("invalid escape");
    }
    uint32_t code = 0;
    TANDEM_RETURN_IF_ERROR(Hex4(&code));
    if (code >= 0xDC00 && code <= 0xDFFF) return Error("lone low surrogate in a \\u escape");
    if (code >= 0xD800 && code <= 0xDBFF) {
      uint32_t low = 0;
      if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') {
        return Error("high surrogate not followed by a low one");
      }
      p_ += 2;
      TANDEM_RETURN_IF_ERROR(Hex4(&low));
      if (low < 0xDC00 || low > 0xDFFF) return Error("high surrogate not followed by a low one");
      code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    }
    AppendUtf8(out, code);
    return absl::OkStatus();
  }

  // Length of the valid UTF-8 sequence of 2 to 4 bytes at p_, or 0.
  size_t Utf8Length() const {
    const auto b = [&](ptrdiff_t k) { return static_cast<unsigned char>(p_[k]); };
    const auto cont = [&](ptrdiff_t k, unsigned lo = 0x80, unsigned hi = 0xBF) {
      return p_ + k < end_ && b(k) >= lo && b(k) <= hi;
    };
    const unsigned c = b(0);
    if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
    if (c == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
    if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(1) && cont(2) ? 3 : 0;
    if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
    if (c == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
    if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
    if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
    return 0;
  }

  absl::Status String() {
    ++p_;  // The opening quote.
    std::string& out = doc_->strings_;
    const size_t offset = out.size();
    while (true) {
      const char* run = p_;
      while (p_ < end_ && *p_ != '"' && *p_ != '\\' && static_cast<unsigned char>(*p_) >= 0x20 &&
             static_cast<unsigned char>(*p_) < 0x80) {
        ++p_;
      }
      out.append(run, p_ - run);
      if (p_ == end_) return Error("unterminated string");
      const unsigned char c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        break;
      }
      if (c == '\\') {
        TANDEM_RETURN_IF_ERROR(Escape(&out));
      } else if (c < 0x20) {
        return Error("control character in a string");
      } else {
        const size_t n = Utf8Length();
        if (n == 0) return Error("invalid UTF-8 in a string");
        out.append(p_, n);
        p_ += n;
      }
    }
    if (out.size() - offset > std::numeric_limits<uint32_t>::max() ||
        out.size() > std::numeric_limits<uint32_t>::max()) {
      return Error("string too long");
    }
    const uint32_t n = Add(JsonKind::kString);
    doc_->nodes_[n].str = {static_cast<uint32_t>(offset),
                           static_cast<uint32_t>(out.size() - offset)};
    Close(n);
    return absl::OkStatus();
  }

  static bool IsDigit(char c) { return c >= '0' && c <= '9'; }

  absl::Status Number() {
    const char* start = p_;
    bool integer = true;
    if (*p_ == '-') ++p_;
    if (p_ == end_ || !IsDigit(*p_)) return Error("invalid number");
    if (*p_ == '0') {
      ++p_;
    } else {
      while (p_ < end_ && IsDigit(*p_)) ++p_;
    }
    if (p_ < end_ && *p_ == '.') {
      integer = false;
      ++p_;
      if (p_ == end_ || !IsDigit(*p_)) return Error("invalid number: no digit after '.'");
      while (p_ < end_ && IsDigit(*p_)) ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      integer = false;
      ++p_;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || !IsDigit(*p_)) return Error("invalid number: no digit in the exponent");
      while (p_ < end_ && IsDigit(*p_)) ++p_;
    }
    const uint32_t n = Add(JsonKind::kDouble);
    JsonNode& node = doc_->nodes_[n];
    Close(n);
    if (integer) {
      if (*start == '-') {
        if (std::from_chars(start, p_, node.i).ec == std::errc()) {
          node.kind = JsonKind::kInt;
          return absl::OkStatus();
        }
      } else if (std::from_chars(start, p_, node.u).ec == std::errc()) {
        node.kind = JsonKind::kUint;
        return absl::OkStatus();
      }
    }
    // A double (or an integer too large for 64 bits, read as one).
    const std::from_chars_result r = std::from_chars(start, p_, node.d);
    if (r.ec == std::errc::result_out_of_range) {
      // Overflow is refused; underflow becomes 0 or a subnormal, as strtod gives.
      node.d = std::strtod(std::string(start, p_).c_str(), nullptr);
    } else if (r.ec != std::errc()) {
      return Error("invalid number");
    }
    if (!std::isfinite(node.d)) return Error("number out of range");
    return absl::OkStatus();
  }

  const char* const begin_;
  const char* p_;
  const char* const end_;
  const int max_depth_;
  JsonDocument* const doc_;
};

absl::StatusOr<JsonDocument> JsonDocument::Parse(absl::string_view text, int max_depth) {
  if (text.size() >= std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError("JSON Parse error: the text is larger than 4 GiB");
  }
  JsonDocument doc;
  JsonParser parser(text, max_depth, &doc);
  TANDEM_RETURN_IF_ERROR(parser.Document());
  return doc;
}

const JsonNode& JsonValue::node() const { return doc_->nodes_[index_]; }

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

double JsonValue::number() const {
  switch (kind()) {
    case JsonKind::kInt:
      return static_cast<double>(node().i);
    case JsonKind::kUint:
      return static_cast<double>(node().u);
    default:
      return node().d;
  }
}

absl::string_view JsonValue::string() const {
  return absl::string_view(doc_->strings_).substr(node().str.offset, node().str.size);
}

std::optional<JsonValue> JsonValue::Find(absl::string_view key) const {
  std::optional<JsonValue> found;
  if (!is_object()) return found;
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
      return absl::StrCat(node().d);
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

// serving/rest_json_reader.h
//
// JsonDocument: a strict JSON (RFC 8259) reader for REST request bodies, made for
// bodies that are mostly long lists of numbers. It is simdjson's DOM parser (Debian's
// libsimdjson-dev; the best of its kernels for the CPU, chosen at run time) behind a
// small interface: simdjson validates the whole text and parses it into its tape, and
// a JsonValue is a handle on one value of that tape. On :predict bodies of 1 to 256
// Fashion-MNIST images (14 KiB to 3.7 MiB) it parses in 0.4-0.8x the time of the
// hand-written tokenizer it replaced and about a tenth of nlohmann::json's, on a
// 2-vCPU AMD EPYC (AVX2); tests/bench/json_reader_bench.cc measures it.
//
// It accepts exactly what nlohmann::json accepts, with the same values (the fuzz
// target FuzzPredictRequest checks the two agree): UTF-8 is validated, escapes
// (surrogate pairs included) decoded, integers kept exact as int64 or uint64 when they
// fit (else read as double, which simdjson refuses and this reader does by itself),
// numbers beyond double's range refused; like nlohmann it skips a leading UTF-8 byte
// order mark and takes a NUL byte after the value as the end of the text. Objects
// keep every member in order; Find returns the last member of a name, as nlohmann
// does. Errors are INVALID_ARGUMENT "JSON Parse error: <what is wrong>" (simdjson
// does not say where; RESOURCE_EXHAUSTED when memory runs out). Lists and objects nested more than
// `max_depth` deep are an error, except that an empty one does not count as a level (simdjson's
// rule; the parse is not recursive, the limit bounds its stack). rest_json.h's CheckJsonDepth
// counts every level and says where the limit is passed.
//
// Memory: simdjson's tape takes 16 bytes per number, list or object and 8 per other
// value, plus the decoded strings. A document reserves about 10 bytes of address
// space per byte of text, touched only as far as used; each thread keeps its parser
// (about 4 bytes per byte of its largest text, when that is at most 1 MiB) for its
// next document.
//
// Thread safety: a JsonDocument and its JsonValues are immutable once parsed; const
// methods may be called concurrently. Parse may be called from any thread.
#ifndef TANDEM_SERVING_REST_JSON_READER_H_
#define TANDEM_SERVING_REST_JSON_READER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "simdjson.h"

namespace tandem::serving {

enum class JsonKind : uint8_t { kNull, kBool, kInt, kUint, kDouble, kString, kArray, kObject };

// A value of a JsonDocument: a cheap handle, valid while the document lives.
class JsonValue {
 public:
  // kInt is a negative integer, kUint a non-negative one (as nlohmann::json).
  JsonKind kind() const;
  bool is_null() const { return type() == Type::NULL_VALUE; }
  bool is_bool() const { return type() == Type::BOOL; }
  bool is_integer() const { return type() == Type::INT64 || type() == Type::UINT64; }
  bool is_unsigned() const {
    return type() == Type::UINT64 || (type() == Type::INT64 && int_value() >= 0);
  }
  bool is_number() const { return is_integer() || type() == Type::DOUBLE; }
  bool is_string() const { return type() == Type::STRING; }
  bool is_array() const { return type() == Type::ARRAY; }
  bool is_object() const { return type() == Type::OBJECT; }
  // "null", "boolean", "number", "string", "array", "object".
  const char* type_name() const;

  bool bool_value() const { return element_.get_bool().value_unsafe(); }  // REQUIRES: is_bool().
  // REQUIRES: kind() == kInt.
  int64_t int_value() const { return element_.get_int64().value_unsafe(); }
  // REQUIRES: is_unsigned().
  uint64_t uint_value() const { return element_.get_uint64().value_unsafe(); }
  // REQUIRES: is_number().
  double number() const { return element_.get_double().value_unsafe(); }
  // REQUIRES: is_string().
  absl::string_view string() const {
    const std::string_view s = element_.get_string().value_unsafe();
    return absl::string_view(s.data(), s.size());
  }
  // Array elements or object members; 0 for scalars.
  size_t size() const;
  bool empty() const { return size() == 0; }

  // Arrays: the first element (REQUIRES: size() > 0), and the value after this one
  // in its array (REQUIRES: this is an element of an array, not its last).
  JsonValue first() const {
    const simdjson::dom::array::iterator it = element_.get_array().value_unsafe().begin();
    return JsonValue(*it, it);
  }
  JsonValue next() const {
    simdjson::dom::array::iterator it = position_;
    ++it;
    return JsonValue(*it, it);
  }

  // Objects: calls fn(key, value) for each member in order.
  template <typename Fn>
  void ForEachMember(Fn fn) const {
    if (!is_object()) return;
    const simdjson::dom::object object = element_.get_object().value_unsafe();
    for (const simdjson::dom::key_value_pair member : object) {
      fn(absl::string_view(member.key.data(), member.key.size()), JsonValue(member.value));
    }
  }
  // Objects: the value of the last member named `key`.
  std::optional<JsonValue> Find(absl::string_view key) const;
  bool Contains(absl::string_view key) const { return Find(key).has_value(); }

  // Scalars as short text ("1.5", "true", "\"abc\""), at most about 40 characters;
  // arrays and objects as "a list of N values" / "an object of N keys".
  std::string Preview() const;

 private:
  friend class JsonDocument;
  using Type = simdjson::dom::element_type;
  explicit JsonValue(simdjson::dom::element element, simdjson::dom::array::iterator position = {})
      : element_(element), position_(position) {}
  Type type() const { return element_.type(); }

  simdjson::dom::element element_;
  simdjson::dom::array::iterator position_;  // In its array, when it is an element.
};

class JsonDocument {
 public:
  static absl::StatusOr<JsonDocument> Parse(absl::string_view text, int max_depth);
  JsonValue root() const { return JsonValue(root_); }

 private:
  JsonDocument() = default;

  // The tape and strings the values point into; on the heap so that moving the
  // JsonDocument leaves them in place.
  std::unique_ptr<simdjson::dom::document> doc_;
  simdjson::dom::element root_;
};

}  // namespace tandem::serving

#endif  // TANDEM_SERVING_REST_JSON_READER_H_

#include "serving/rest_json.h"

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/status.h"
#include "framework/tensor/tensor.h"
#include "serving/rest_json_reader.h"

namespace tandem::serving {
namespace {

constexpr char kB64Refused[] =
    "a base64 value ({\"b64\": ...}) can only be one string of a string input";

template <typename... Args>
absl::Status Invalid(const Args&... args) {
  return absl::InvalidArgumentError(absl::StrCat(args...));
}

// Where a value being decoded sits, spelled out only when there is an error.
struct Position {
  const std::string* input = nullptr;
  int64_t instance = -1;       // -1: a columnar value (the whole batch).
  std::vector<int64_t> index;  // List indices inside the value.

  std::string Describe() const {
    std::string s = absl::StrCat("input '", *input, "'");
    if (instance >= 0) absl::StrAppend(&s, ", instance ", instance);
    if (!index.empty()) {
      absl::StrAppend(&s, ", element ");
      for (int64_t i : index) absl::StrAppend(&s, "[", i, "]");
    }
    return s;
  }
};

absl::Status InvalidAt(const Position& at, absl::string_view what) {
  return Invalid(at.Describe(), ": ", what);
}

// A short description of a JSON value for messages (never the whole of a large one).
std::string Preview(const JsonValue& v) {
  if (v.is_array() || v.is_object() || v.is_null()) return v.Preview();
  return absl::StrCat(v.type_name(), " ", v.Preview());
}

bool IsB64(const JsonValue& v) { return v.is_object() && v.Contains("b64"); }

std::string ShapeString(const Dims& dims) { return PartialShape(dims).DebugString(); }

std::string InputNames(const Signature& signature) {
  std::vector<std::string> names;
  for (const auto& [name, info] : signature.inputs) names.push_back(absl::StrCat("'", name, "'"));
  return absl::StrJoin(names, ", ");
}

absl::Status TypeMismatch(const JsonValue& v, DType dtype, const Position& at) {
  if (IsB64(v) && dtype != DType::kString) return InvalidAt(at, kB64Refused);
  const char* wanted = dtype == DType::kFloat    ? "a number"
                       : dtype == DType::kBool   ? "true or false"
                       : dtype == DType::kString ? "a string"
                                                 : "an integer";
  std::string what =
      absl::StrCat("expected ", wanted, " (", DTypeName(dtype), "), got ", Preview(v));
  if (v.is_array()) absl::StrAppend(&what, " (the value nests deeper than the input's shape)");
  return InvalidAt(at, what);
}

// A string input's value: a JSON string, or {"b64": "<base64>"} for any bytes.
absl::Status StoreString(const JsonValue& v, std::string* dst, const Position& at) {
  if (v.is_string()) {
    dst->assign(v.string().data(), v.string().size());
    return absl::OkStatus();
  }
  if (IsB64(v)) {
    std::optional<JsonValue> b64 = v.Find("b64");
    if (v.size() != 1 || !b64->is_string() || !absl::Base64Unescape(b64->string(), dst)) {
      return InvalidAt(at, absl::StrCat("a base64 value must be {\"b64\": \"<base64 text>\"}, got ",
                                        Preview(v)));
    }
    return absl::OkStatus();
  }
  return TypeMismatch(v, DType::kString, at);
}

template <typename T>
absl::Status StoreInt(const JsonValue& v, DType dtype, T* dst, const Position& at) {
  if (!v.is_integer()) return TypeMismatch(v, dtype, at);
  constexpr int64_t kMin = static_cast<int64_t>(std::numeric_limits<T>::min());
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<T>::max());
  bool in_range;
  if (v.is_unsigned()) {
    const uint64_t u = v.uint_value();
    in_range = u <= kMax;
    if (in_range) *dst = static_cast<T>(u);
  } else {
    const int64_t i = v.int_value();
    in_range = i >= kMin && (i < 0 || static_cast<uint64_t>(i) <= kMax);
    if (in_range) *dst = static_cast<T>(i);
  }
  if (!in_range) {
    return InvalidAt(at, absl::StrCat(Preview(v), " is out of range for ", DTypeName(dtype)));
  }
  return absl::OkStatus();
}

// Stores the scalar `v` as element `i` of a `dtype` buffer.
absl::Status StoreLeaf(const JsonValue& v, DType dtype, char* out, int64_t i, const Position& at) {
  switch (dtype) {
    case DType::kFloat: {
      if (!v.is_number()) return TypeMismatch(v, dtype, at);
      const double d = v.number();
      if (std::isfinite(d) && std::fabs(d) > FLT_MAX) {
        return InvalidAt(at, absl::StrCat(Preview(v), " is out of range for float32"));
      }
      reinterpret_cast<float*>(out)[i] = static_cast<float>(d);
      return absl::OkStatus();
    }
    case DType::kBool:
      if (!v.is_bool()) return TypeMismatch(v, dtype, at);
      reinterpret_cast<bool*>(out)[i] = v.bool_value();
      return absl::OkStatus();
    case DType::kInt32:
      return StoreInt(v, dtype, reinterpret_cast<int32_t*>(out) + i, at);
    case DType::kInt64:
      return StoreInt(v, dtype, reinterpret_cast<int64_t*>(out) + i, at);
    case DType::kUInt8:
      return StoreInt(v, dtype, reinterpret_cast<uint8_t*>(out) + i, at);
    case DType::kString:
      return StoreString(v, reinterpret_cast<std::string*>(out) + i, at);
    default:
      return InvalidAt(at, absl::StrCat("dtype ", DTypeName(dtype), " cannot be sent as JSON"));
  }
}

// Writes `v`, whose shape must be dims[d:], into `out` from element *pos on.
absl::Status Fill(const JsonValue& v, const Dims& dims, size_t d, DType dtype, char* out,
                  int64_t* pos, Position& at) {
  if (d == dims.size()) {
    TANDEM_RETURN_IF_ERROR(StoreLeaf(v, dtype, out, *pos, at));
    ++*pos;
    return absl::OkStatus();
  }
  if (IsB64(v)) return InvalidAt(at, kB64Refused);
  if (!v.is_array() || static_cast<int64_t>(v.size()) != dims[d]) {
    return InvalidAt(at, absl::StrCat("expected a list of ", dims[d], " values, got ", Preview(v),
                                      " (every value of an input must have one shape, here ",
                                      ShapeString(dims), ")"));
  }
  at.index.push_back(0);
  JsonValue element = v.first();
  if (d + 1 == dims.size()) {  // A list of scalars, the bulk of a request: no recursion.
    for (int64_t k = 0; k < dims[d]; ++k, ++*pos) {
      if (k > 0) element = element.next();
      if (!StoreLeaf(element, dtype, out, *pos, at).ok()) {
        at.index.back() = k;
        return StoreLeaf(element, dtype, out, *pos, at);
      }
    }
  } else {
    for (int64_t k = 0; k < dims[d]; ++k) {
      if (k > 0) element = element.next();
      at.index.back() = k;
      TANDEM_RETURN_IF_ERROR(Fill(element, dims, d + 1, dtype, out, pos, at));
    }
  }
  at.index.pop_back();
  return absl::OkStatus();
}

// The shape of `v` found by following first elements `expected.size()` lists down,
// checked against the known dims of `expected` (-1: any size).
absl::StatusOr<Dims> InferDims(const JsonValue& v, const Dims& expected, const Position& at) {
  Dims dims;
  JsonValue cur = v;
  for (size_t d = 0; d < expected.size(); ++d) {
    if (IsB64(cur)) return InvalidAt(at, kB64Refused);
    if (!cur.is_array()) {
      return InvalidAt(
          at, absl::StrCat("expected a value of shape ", ShapeString(expected), " (lists nested ",
                           expected.size(), " deep), got ", Preview(v)));
    }
    dims.push_back(static_cast<int64_t>(cur.size()));
    if (cur.empty()) {
      for (size_t k = d + 1; k < expected.size(); ++k)
        dims.push_back(std::max<int64_t>(expected[k], 0));
      break;
    }
    cur = cur.first();
  }
  for (size_t d = 0; d < expected.size(); ++d) {
    if (expected[d] >= 0 && dims[d] != expected[d]) {
      return InvalidAt(at, absl::StrCat("has shape ", ShapeString(dims),
                                        " but the input's shape is ", ShapeString(expected)));
    }
  }
  return dims;
}

// Allocates the tensor for `values` (each of shape `dims`, stacked when `stacked`) and
// decodes them into it.
absl::StatusOr<Tensor> Decode(const std::vector<JsonValue>& values, const Dims& dims, bool stacked,
                              const TensorInfo& info, size_t body_size, Position& at) {
  Dims full = dims;
  if (stacked) full.insert(full.begin(), static_cast<int64_t>(values.size()));
  absl::StatusOr<TensorShape> shape = TensorShape::Create(full);
  if (!shape.ok()) return InvalidAt(at, shape.status().message());
  // Every element is at least one byte of the body: a larger tensor means the values
  // do not all have the first one's shape, and is not allocated.
  if (static_cast<uint64_t>(shape->num_elements()) > body_size) {
    return InvalidAt(at, absl::StrCat("the values do not all have the shape ", ShapeString(dims),
                                      " of the first one"));
  }
  Tensor t(info.dtype, *shape);
  int64_t pos = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (stacked) at.instance = static_cast<int64_t>(i);
    TANDEM_RETURN_IF_ERROR(Fill(values[i], dims, 0, info.dtype, t.raw_data(), &pos, at));
  }
  return t;
}

// Whether `info` is a variable-length list per example: a feature column's list of
// strings or int64 ids, [batch, -1] (the only inputs an export leaves that open).
// Examples may give lists of different lengths, and the shorter ones are padded with ''
// or -1, the feature columns' missing-value marks.
bool IsRagged(const TensorInfo& info) {
  return info.shape.rank() == 2 && info.shape.dim(1) < 0 &&
         (info.dtype == DType::kString || info.dtype == DType::kInt64);
}

// The [examples, longest list] tensor of ragged `values` (each a list, or one value).
absl::StatusOr<Tensor> DecodeRagged(const std::vector<JsonValue>& values, const TensorInfo& info,
                                    size_t body_size, Position& at) {
  int64_t width = 1;
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].is_array()) width = std::max<int64_t>(width, values[i].size());
  }
  const int64_t n = static_cast<int64_t>(values.size());
  // Each value takes at least one byte of the body; padding is bounded by that too.
  if (static_cast<uint64_t>(n) * static_cast<uint64_t>(width) > 4 * body_size + 64) {
    return InvalidAt(at, absl::StrCat(n, " lists padded to ", width, " values is too large"));
  }
  Tensor t(info.dtype, TensorShape({n, width}));
  for (int64_t i = 0; info.dtype == DType::kInt64 && i < n * width; ++i) {
    t.data<int64_t>()[i] = -1;
  }
  for (int64_t i = 0; i < n; ++i) {
    at.instance = i;
    const JsonValue& v = values[i];
    if (!v.is_array()) {
      TANDEM_RETURN_IF_ERROR(StoreLeaf(v, info.dtype, t.raw_data(), i * width, at));
      continue;
    }
    at.index.push_back(0);
    JsonValue element = v.empty() ? v : v.first();
    for (int64_t k = 0; k < static_cast<int64_t>(v.size()); ++k) {
      if (k > 0) element = element.next();
      at.index.back() = k;
      TANDEM_RETURN_IF_ERROR(StoreLeaf(element, info.dtype, t.raw_data(), i * width + k, at));
    }
    at.index.pop_back();
  }
  return t;
}

// Checks that a signature entry can be decoded from JSON at all.
absl::Status CheckDecodable(const std::string& name, const TensorInfo& info) {
  if (!info.shape.known_rank() || info.shape.rank() < 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("the signature's input '", name, "' has no batch dimension"));
  }
  if (info.dtype == DType::kBFloat16 || DTypeSize(info.dtype) == 0) {
    return Invalid("input '", name, "' has dtype ", DTypeName(info.dtype),
                   ", which this server does not decode from JSON");
  }
  return absl::OkStatus();
}

// `obj` must name exactly the signature's inputs; `where` says whose keys they are.
absl::Status CheckInputKeys(const JsonValue& obj, const Signature& signature,
                            absl::string_view where) {
  absl::Status status;
  obj.ForEachMember([&](absl::string_view key, const JsonValue&) {
    if (status.ok() && signature.inputs.count(std::string(key)) == 0) {
      status =
          Invalid(where, " has input '", key,
                  "', which the signature does not have (its inputs: ", InputNames(signature), ")");
    }
  });
  TANDEM_RETURN_IF_ERROR(status);
  for (const auto& [name, info] : signature.inputs) {
    if (!obj.Contains(name)) return Invalid(where, " lacks input '", name, "'");
  }
  return absl::OkStatus();
}

absl::StatusOr<PredictRequest> ParseRows(const JsonValue& instances, const Signature& signature,
                                         size_t body_size, const RestLimits& limits) {
  if (!instances.is_array()) return Invalid("'instances' must be a list, got ", Preview(instances));
  const int64_t n = static_cast<int64_t>(instances.size());
  if (n == 0) return Invalid("'instances' is empty: nothing to predict");
  if (n > limits.max_instances) {
    return Invalid("'instances' holds ", n, " examples, more than the limit of ",
                   limits.max_instances, " per request");
  }
  std::vector<JsonValue> list;
  list.reserve(n);
  JsonValue element = instances.first();
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) element = element.next();
    list.push_back(element);
  }
  // With one input an instance may be its bare value; otherwise instances name inputs.
  const bool named = signature.inputs.size() != 1 || (list[0].is_object() && !IsB64(list[0]));
  if (named) {
    for (int64_t i = 0; i < n; ++i) {
      const JsonValue& instance = list[i];
      if (IsB64(instance)) return Invalid("instance ", i, ": ", kB64Refused);
      if (!instance.is_object()) {
        return Invalid("instance ", i, " must be an object of the inputs (", InputNames(signature),
                       "), got ", Preview(instance));
      }
      TANDEM_RETURN_IF_ERROR(CheckInputKeys(instance, signature, absl::StrCat("instance ", i)));
    }
  }
  PredictRequest request;
  request.format = RequestFormat::kRow;
  request.batch_size = n;
  std::vector<JsonValue> values = list;
  for (const auto& [name, info] : signature.inputs) {
    TANDEM_RETURN_IF_ERROR(CheckDecodable(name, info));
    for (int64_t i = 0; i < n; ++i) values[i] = named ? *list[i].Find(name) : list[i];
    Position at{&name, 0, {}};
    if (IsRagged(info)) {
      TANDEM_ASSIGN_OR_RETURN(Tensor t, DecodeRagged(values, info, body_size, at));
      request.inputs.emplace(name, std::move(t));
      continue;
    }
    const Dims inner(info.shape.dims().begin() + 1, info.shape.dims().end());
    TANDEM_ASSIGN_OR_RETURN(Dims dims, InferDims(values[0], inner, at));
    TANDEM_ASSIGN_OR_RETURN(Tensor t, Decode(values, dims, /*stacked=*/true, info, body_size, at));
    request.inputs.emplace(name, std::move(t));
  }
  return request;
}

absl::StatusOr<PredictRequest> ParseColumns(const JsonValue& inputs, const Signature& signature,
                                            size_t body_size, const RestLimits& limits) {
  const bool named = inputs.is_object() && !IsB64(inputs);
  if (!named && signature.inputs.size() != 1) {
    if (IsB64(inputs)) return Invalid("'inputs': ", kB64Refused);
    return Invalid("'inputs' must be an object of the inputs (", InputNames(signature), "), got ",
                   Preview(inputs));
  }
  if (named) TANDEM_RETURN_IF_ERROR(CheckInputKeys(inputs, signature, "'inputs'"));
  PredictRequest request;
  request.format = RequestFormat::kColumnar;
  std::string batch_input;
  for (const auto& [name, info] : signature.inputs) {
    TANDEM_RETURN_IF_ERROR(CheckDecodable(name, info));
    const JsonValue value = named ? *inputs.Find(name) : inputs;
    Position at{&name, -1, {}};
    if (IsRagged(info)) {
      if (!value.is_array() || value.empty()) {
        return InvalidAt(at, absl::StrCat("expected a list of examples' lists, got ", Preview(value)));
      }
      std::vector<JsonValue> examples;
      JsonValue e = value.first();
      for (size_t k = 0; k < value.size(); ++k, e = k < value.size() ? e.next() : e) {
        examples.push_back(e);
      }
      if (static_cast<int64_t>(examples.size()) > limits.max_instances ||
          (!batch_input.empty() && static_cast<int64_t>(examples.size()) != request.batch_size)) {
        return InvalidAt(at, absl::StrCat("holds ", examples.size(),
                                          " examples: over the limit, or unlike another input"));
      }
      TANDEM_ASSIGN_OR_RETURN(Tensor t, DecodeRagged(examples, info, body_size, at));
      batch_input = name;
      request.batch_size = static_cast<int64_t>(examples.size());
      request.inputs.emplace(name, std::move(t));
      continue;
    }
    TANDEM_ASSIGN_OR_RETURN(Dims dims, InferDims(value, info.shape.dims(), at));
    if (dims[0] == 0) return InvalidAt(at, "holds no examples: nothing to predict");
    if (dims[0] > limits.max_instances) {
      return InvalidAt(at, absl::StrCat("holds ", dims[0], " examples, more than the limit of ",
                                        limits.max_instances, " per request"));
    }
    if (!batch_input.empty() && dims[0] != request.batch_size) {
      return InvalidAt(
          at, absl::StrCat("holds ", dims[0], " examples but input '", batch_input, "' holds ",
                           request.batch_size, ": every input needs the same batch size"));
    }
    batch_input = name;
    request.batch_size = dims[0];
    TANDEM_ASSIGN_OR_RETURN(Tensor t,
                            Decode({value}, dims, /*stacked=*/false, info, body_size, at));
    request.inputs.emplace(name, std::move(t));
  }
  return request;
}

}  // namespace

absl::Status CheckJsonDepth(absl::string_view json, int max_depth) {
  // Byte classes outside strings: 1 a quote, 2 an opening bracket, 3 a closing one.
  static constexpr std::array<uint8_t, 256> kClass = [] {
    std::array<uint8_t, 256> c{};
    c['"'] = 1;
    c['['] = c['{'] = 2;
    c[']'] = c['}'] = 3;
    return c;
  }();
  const char* const begin = json.data();
  const char* const end = begin + json.size();
  int depth = 0;
  for (const char* p = begin; p < end; ++p) {
    switch (kClass[static_cast<unsigned char>(*p)]) {
      case 1:  // Skip the string: to the first quote after an even run of backslashes.
        for (const char* q = p + 1;; q = p + 1) {
          p = static_cast<const char*>(std::memchr(q, '"', end - q));
          if (p == nullptr) return absl::OkStatus();  // Unterminated: the parser says so.
          const char* b = p;
          while (b > q && b[-1] == '\\') --b;
          if ((p - b) % 2 == 0) break;
        }
        break;
      case 2:
        if (++depth > max_depth) {
          return Invalid("JSON nests lists and objects more than ", max_depth,
                         " levels deep (at byte ", p - begin, ")");
        }
        break;
      case 3:
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<PredictRequest> ParsePredictRequest(absl::string_view body,
                                                   const Signature& signature,
                                                   const RestLimits& limits) {
  TANDEM_RETURN_IF_ERROR(CheckJsonDepth(body, limits.max_json_depth));
  TANDEM_ASSIGN_OR_RETURN(const JsonDocument doc, JsonDocument::Parse(body, limits.max_json_depth));
  const JsonValue root = doc.root();
  if (!root.is_object()) return Invalid("the request must be a JSON object, got ", Preview(root));
  if (std::optional<JsonValue> name = root.Find("signature_name")) {
    if (!name->is_string())
      return Invalid("'signature_name' must be a string, got ", Preview(*name));
    if (!name->string().empty() && name->string() != kDefaultSignatureName) {
      return Invalid("Serving signature name: \"", name->string(), "\" not found in signature def");
    }
  }
  const std::optional<JsonValue> instances = root.Find("instances");
  const std::optional<JsonValue> inputs = root.Find("inputs");
  if (instances && inputs) {
    return Invalid("Not formatted correctly: expecting only one of 'inputs' or 'instances' keys");
  }
  if (instances) return ParseRows(*instances, signature, body.size(), limits);
  if (inputs) return ParseColumns(*inputs, signature, body.size(), limits);
  return Invalid("Missing 'inputs' or 'instances' key");
}

}  // namespace tandem::serving

#include "serving/rest_response.h"

#include <charconv>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "framework/tensor/tensor.h"
#include "nlohmann/json.hpp"

namespace tandem::serving {
namespace {

using json = nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// The shortest text that reads back as `f`, with ".0" on integral values so that
// clients keep a float; NaN and infinities as TensorFlow Serving writes them.
void AppendFloat(std::string* out, float f) {
  if (std::isnan(f)) {
    out->append("NaN");
    return;
  }
  if (std::isinf(f)) {
    out->append(f > 0 ? "Infinity" : "-Infinity");
    return;
  }
  char buf[32];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), f);
  const absl::string_view text(buf, r.ptr - buf);
  out->append(text.data(), text.size());
  if (text.find_first_of(".e") == absl::string_view::npos) out->append(".0");
}

void AppendScalar(std::string* out, const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat:
      AppendFloat(out, t.data<float>()[i]);
      break;
    case DType::kBFloat16:
      AppendFloat(out, static_cast<float>(t.data<bfloat16>()[i]));
      break;
    case DType::kInt32:
      absl::StrAppend(out, t.data<int32_t>()[i]);
      break;
    case DType::kInt64:
      absl::StrAppend(out, t.data<int64_t>()[i]);
      break;
    case DType::kUInt8:
      absl::StrAppend(out, static_cast<int>(t.data<uint8_t>()[i]));
      break;
    case DType::kBool:
      out->append(t.data<bool>()[i] ? "true" : "false");
      break;
    case DType::kString:
      out->append(Dump(json(t.StringAt(i))));  // Bytes that are not UTF-8 become U+FFFD.
      break;
    default:
      out->append("null");
  }
}

// Appends the elements from *pos on, nested as dims[d:].
void AppendNested(std::string* out, const Tensor& t, const Dims& dims, size_t d, int64_t* pos) {
  if (d == dims.size()) {
    AppendScalar(out, t, (*pos)++);
    return;
  }
  out->push_back('[');
  for (int64_t k = 0; k < dims[d]; ++k) {
    if (k > 0) out->push_back(',');
    AppendNested(out, t, dims, d + 1, pos);
  }
  out->push_back(']');
}

void AppendKey(std::string* out, const std::string& key) {
  out->append(Dump(json(key)));
  out->push_back(':');
}

// Row `row` of `t` (shape without the batch dimension).
void AppendRow(std::string* out, const Tensor& t, int64_t row) {
  const Dims inner(t.shape().dims().begin() + 1, t.shape().dims().end());
  int64_t pos = row * (t.NumElements() / t.dim(0));
  AppendNested(out, t, inner, 0, &pos);
}

json TensorInfoJson(const TensorInfo& info) {
  json dims = json::array();
  for (int64_t d : info.shape.dims()) dims.push_back({{"size", std::to_string(d)}, {"name", ""}});
  return {{"dtype", TfDTypeName(info.dtype)},
          {"tensor_shape", {{"dim", dims}, {"unknown_rank", !info.shape.known_rank()}}},
          {"name", info.tensor}};
}

}  // namespace

absl::StatusOr<std::string> PredictResponseJson(const NamedTensors& outputs, RequestFormat format) {
  int64_t batch = -1;
  for (const auto& [name, t] : outputs) {
    if (t.rank() < 1) {
      return absl::InternalError(absl::StrCat("output '", name, "' has no batch dimension"));
    }
    if (format == RequestFormat::kRow && batch >= 0 && t.dim(0) != batch) {
      return absl::InternalError(
          absl::StrCat("output '", name, "' has ", t.dim(0), " rows, another output ", batch));
    }
    batch = t.dim(0);
  }
  std::string out;
  if (format == RequestFormat::kColumnar) {
    out.append("{\"outputs\":");
    if (outputs.size() == 1) {
      const Tensor& t = outputs.begin()->second;
      int64_t pos = 0;
      AppendNested(&out, t, t.shape().dims(), 0, &pos);
    } else {
      out.push_back('{');
      bool first = true;
      for (const auto& [name, t] : outputs) {
        if (!first) out.push_back(',');
        first = false;
        AppendKey(&out, name);
        int64_t pos = 0;
        AppendNested(&out, t, t.shape().dims(), 0, &pos);
      }
      out.push_back('}');
    }
    out.push_back('}');
    return out;
  }
  out.append("{\"predictions\":[");
  for (int64_t row = 0; row < batch; ++row) {
    if (row > 0) out.push_back(',');
    if (outputs.size() == 1) {
      AppendRow(&out, outputs.begin()->second, row);
      continue;
    }
    out.push_back('{');
    bool first = true;
    for (const auto& [name, t] : outputs) {
      if (!first) out.push_back(',');
      first = false;
      AppendKey(&out, name);
      AppendRow(&out, t, row);
    }
    out.push_back('}');
  }
  out.append("]}");
  return out;
}

std::string ModelStatusJson(int64_t version) {
  json status = {{"version", std::to_string(version)},
                 {"state", "AVAILABLE"},
                 {"status", {{"error_code", "OK"}, {"error_message", ""}}}};
  return Dump({{"model_version_status", json::array({status})}});
}

std::string ModelMetadataJson(const std::string& model_name, int64_t version,
                              const Signature& signature) {
  json inputs = json::object(), outputs = json::object();
  for (const auto& [name, info] : signature.inputs) inputs[name] = TensorInfoJson(info);
  for (const auto& [name, info] : signature.outputs) outputs[name] = TensorInfoJson(info);
  json def = {
      {"inputs", inputs}, {"outputs", outputs}, {"method_name", "tensorflow/serving/predict"}};
  json metadata = {{"signature_def", {{"signature_def", {{kDefaultSignatureName, def}}}}}};
  json spec = {{"name", model_name}, {"signature_name", ""}, {"version", std::to_string(version)}};
  return Dump({{"model_spec", spec}, {"metadata", metadata}});
}

std::string ErrorJson(absl::string_view message) { return Dump({{"error", std::string(message)}}); }

int HttpStatusFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

std::string TfDTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat:
      return "DT_FLOAT";
    case DType::kInt32:
      return "DT_INT32";
    case DType::kInt64:
      return "DT_INT64";
    case DType::kUInt8:
      return "DT_UINT8";
    case DType::kBool:
      return "DT_BOOL";
    case DType::kString:
      return "DT_STRING";
    case DType::kBFloat16:
      return "DT_BFLOAT16";
    case DType::kResource:
      return "DT_RESOURCE";
    default:
      return "DT_INVALID";
  }
}

}  // namespace tandem::serving

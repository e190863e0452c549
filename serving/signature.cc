// serving/signature.cc
//
// signature.json <-> Signature, validating every field of untrusted input.
#include "serving/signature.h"

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "nlohmann/json.hpp"

namespace tandem::serving {
namespace {

using Json = nlohmann::json;

absl::Status Bad(absl::string_view source, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", what));
}

Json TensorInfoJson(const TensorInfo& info) {
  Json shape = Json::array();
  for (int64_t d : info.shape.dims()) shape.push_back(d);
  return {{"tensor", info.tensor}, {"dtype", std::string(DTypeName(info.dtype))}, {"shape", shape}};
}

absl::StatusOr<std::string> StringField(const Json& object, const std::string& key,
                                        absl::string_view source, absl::string_view where) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) {
    return Bad(source, absl::StrCat(where, ": '", key, "' must be a string"));
  }
  return it->get<std::string>();
}

absl::StatusOr<TensorInfo> ParseTensorInfo(const Json& j, absl::string_view source,
                                           const std::string& where) {
  if (!j.is_object()) return Bad(source, where + " must be an object");
  TensorInfo info;
  TANDEM_ASSIGN_OR_RETURN(info.tensor, StringField(j, "tensor", source, where));
  TANDEM_ASSIGN_OR_RETURN(std::string dtype, StringField(j, "dtype", source, where));
  absl::StatusOr<DType> parsed = ParseDType(dtype);
  if (!parsed.ok() || *parsed == DType::kResource || *parsed == DType::kInvalid) {
    return Bad(source, absl::StrCat(where, ": unsupported dtype '", dtype, "'"));
  }
  info.dtype = *parsed;
  auto shape = j.find("shape");
  if (shape == j.end() || !shape->is_array() || shape->empty() || shape->size() > 32) {
    return Bad(source, where + ": 'shape' must be a list of 1 to 32 dimensions");
  }
  Dims dims;
  for (const Json& d : *shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < -1 || d.get<int64_t>() > (int64_t{1} << 40)) {
      return Bad(source, where + ": 'shape' dimensions must be integers >= -1");
    }
    dims.push_back(d.get<int64_t>());
  }
  info.shape = PartialShape(absl::MakeConstSpan(dims));
  return info;
}

absl::StatusOr<std::map<std::string, TensorInfo>> ParseInfos(const Json& root,
                                                             const std::string& key,
                                                             absl::string_view source) {
  auto it = root.find(key);
  if (it == root.end() || !it->is_object() || it->empty()) {
    return Bad(source, absl::StrCat("'", key, "' must be a non-empty object"));
  }
  if (it->size() > kMaxSignatureEntries) return Bad(source, "'" + key + "' has too many entries");
  std::map<std::string, TensorInfo> out;
  for (const auto& [name, value] : it->items()) {
    if (name.empty()) return Bad(source, "'" + key + "' has an empty name");
    TANDEM_ASSIGN_OR_RETURN(out[name],
                            ParseTensorInfo(value, source, absl::StrCat(key, ".", name)));
  }
  return out;
}

}  // namespace

std::string SignatureToJson(const Signature& s) {
  Json root;
  root["format"] = kExportFormat;
  root["format_version"] = kExportFormatVersion;
  root["model_name"] = s.model_name;
  root["global_step"] = s.global_step;
  root["checkpoint"] = s.checkpoint;
  for (const auto& [name, info] : s.inputs) root["inputs"][name] = TensorInfoJson(info);
  for (const auto& [name, info] : s.outputs) root["outputs"][name] = TensorInfoJson(info);
  root["restore"]["op"] = s.restore_op;
  root["restore"]["feeds"] = Json::object();
  for (const auto& [var, feed] : s.restore_feeds) root["restore"]["feeds"][var] = feed;
  root["metrics"] = Json::object();
  for (const auto& [name, value] : s.metrics) root["metrics"][name] = value;
  return root.dump(2) + "\n";
}

absl::StatusOr<Signature> ParseSignatureJson(absl::string_view text, absl::string_view source) {
  Json root = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return Bad(source, "not valid JSON");
  if (!root.is_object()) return Bad(source, "must be a JSON object");
  TANDEM_ASSIGN_OR_RETURN(std::string format, StringField(root, "format", source, "signature"));
  if (format != kExportFormat) {
    return Bad(source, absl::StrCat("'format' is '", format, "', expected '", kExportFormat, "'"));
  }
  auto version = root.find("format_version");
  if (version == root.end() || !version->is_number_integer() ||
      version->get<int64_t>() != kExportFormatVersion) {
    return Bad(source, absl::StrCat("'format_version' must be ", kExportFormatVersion,
                                    " (this build reads that version only)"));
  }
  Signature s;
  TANDEM_ASSIGN_OR_RETURN(s.model_name, StringField(root, "model_name", source, "signature"));
  auto step = root.find("global_step");
  if (step == root.end() || !step->is_number_integer()) {
    return Bad(source, "'global_step' must be an integer");
  }
  s.global_step = step->get<int64_t>();
  if (auto c = root.find("checkpoint"); c != root.end()) {
    if (!c->is_string()) return Bad(source, "'checkpoint' must be a string");
    s.checkpoint = c->get<std::string>();
  }
  TANDEM_ASSIGN_OR_RETURN(s.inputs, ParseInfos(root, "inputs", source));
  TANDEM_ASSIGN_OR_RETURN(s.outputs, ParseInfos(root, "outputs", source));
  auto restore = root.find("restore");
  if (restore == root.end() || !restore->is_object()) {
    return Bad(source, "'restore' must be an object");
  }
  TANDEM_ASSIGN_OR_RETURN(s.restore_op, StringField(*restore, "op", source, "restore"));
  auto feeds = restore->find("feeds");
  if (feeds == restore->end() || !feeds->is_object() || feeds->size() > kMaxSignatureEntries) {
    return Bad(source, "'restore.feeds' must be an object of variable -> tensor");
  }
  for (const auto& [var, feed] : feeds->items()) {
    if (!feed.is_string()) return Bad(source, "restore.feeds." + var + " must be a string");
    s.restore_feeds[var] = feed.get<std::string>();
  }
  if (auto m = root.find("metrics"); m != root.end()) {
    if (!m->is_object() || m->size() > kMaxSignatureEntries) {
      return Bad(source, "'metrics' must be an object of numbers");
    }
    for (const auto& [name, value] : m->items()) {
      if (!value.is_number()) return Bad(source, "metrics." + name + " must be a number");
      s.metrics[name] = value.get<double>();
    }
  }
  for (const auto* infos : {&s.inputs, &s.outputs}) {
    for (const auto& [name, info] : *infos) {
      if (info.shape.dim(0) != -1) {
        return Bad(source,
                   absl::StrCat("'", name, "': the first dimension (the batch) must be -1"));
      }
    }
  }
  return s;
}

}  // namespace tandem::serving

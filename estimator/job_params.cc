// estimator/job_params.cc
//
// ParamValue and the typed [model.params] lookups of ModelSection (estimator/job_config.h).
#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "estimator/internal/did_you_mean.h"
#include "estimator/job_config.h"
#include "framework/core/status.h"

namespace tandem {
namespace {

constexpr char kConfigErrorUrl[] = "type.tandem.dev/config_error";

absl::StatusOr<const ParamValue*> FindParam(const ModelSection& section, absl::string_view key,
                                            ParamValue::Type type, absl::string_view want) {
  section.read.Mark(key);
  auto it = section.params.find(std::string(key));
  if (it == section.params.end()) return nullptr;
  if (it->second.type != type &&
      !(type == ParamValue::Type::kDouble && it->second.type == ParamValue::Type::kInt)) {
    return ConfigError(absl::StrCat("[model.params] ", key, " must be ", want));
  }
  return &it->second;
}

}  // namespace

absl::Status ConfigError(absl::string_view message, absl::StatusCode code) {
  return AsConfigError(absl::Status(code, message));
}

absl::Status AsConfigError(absl::Status status) {
  if (!status.ok()) status.SetPayload(kConfigErrorUrl, absl::Cord("1"));
  return status;
}

bool IsConfigError(const absl::Status& status) {
  return status.GetPayload(kConfigErrorUrl).has_value();
}

struct ParamUseTracker::State {
  absl::Mutex mu;
  std::set<std::string> used ABSL_GUARDED_BY(mu);
};

ParamUseTracker::ParamUseTracker() : state_(std::make_shared<State>()) {}

void ParamUseTracker::Mark(absl::string_view key) const {
  absl::MutexLock lock(&state_->mu);
  state_->used.emplace(key);
}

std::vector<std::string> ParamUseTracker::Used() const {
  absl::MutexLock lock(&state_->mu);
  return {state_->used.begin(), state_->used.end()};
}

absl::Status ModelSection::CheckEveryKeyRead() const {
  const std::vector<std::string> used = read.Used();
  std::vector<std::string> unknown;
  for (const auto& [key, unused] : params) {
    if (!std::binary_search(used.begin(), used.end(), key)) {
      unknown.push_back(absl::StrCat("'", key, "'", internal::DidYouMean(key, used)));
    }
  }
  if (unknown.empty()) return absl::OkStatus();
  return ConfigError(absl::StrCat(
      "[model.params] unknown key", unknown.size() > 1 ? "s " : " ", absl::StrJoin(unknown, ", "),
      " for model '", name, "'; it reads: ", used.empty() ? "nothing" : absl::StrJoin(used, ", ")));
}

ParamValue ParamValue::Bool(bool v) {
  ParamValue p;
  p.type = Type::kBool;
  p.bool_value = v;
  return p;
}
ParamValue ParamValue::Int(int64_t v) {
  ParamValue p;
  p.type = Type::kInt;
  p.int_value = v;
  return p;
}
ParamValue ParamValue::Double(double v) {
  ParamValue p;
  p.type = Type::kDouble;
  p.double_value = v;
  return p;
}
ParamValue ParamValue::String(std::string v) {
  ParamValue p;
  p.type = Type::kString;
  p.string_value = std::move(v);
  return p;
}
ParamValue ParamValue::Array(std::vector<ParamValue> v) {
  ParamValue p;
  p.type = Type::kArray;
  p.array = std::move(v);
  return p;
}
bool ParamValue::operator==(const ParamValue& o) const {
  return type == o.type && bool_value == o.bool_value && int_value == o.int_value &&
         double_value == o.double_value && string_value == o.string_value && array == o.array;
}

absl::StatusOr<int64_t> ModelSection::GetInt(absl::string_view key, int64_t default_value) const {
  TANDEM_ASSIGN_OR_RETURN(const ParamValue* v,
                          FindParam(*this, key, ParamValue::Type::kInt, "an integer"));
  return v == nullptr ? default_value : v->int_value;
}

absl::StatusOr<double> ModelSection::GetDouble(absl::string_view key, double default_value) const {
  TANDEM_ASSIGN_OR_RETURN(const ParamValue* v,
                          FindParam(*this, key, ParamValue::Type::kDouble, "a number"));
  if (v == nullptr) return default_value;
  return v->type == ParamValue::Type::kInt ? static_cast<double>(v->int_value) : v->double_value;
}

absl::StatusOr<bool> ModelSection::GetBool(absl::string_view key, bool default_value) const {
  TANDEM_ASSIGN_OR_RETURN(const ParamValue* v,
                          FindParam(*this, key, ParamValue::Type::kBool, "a boolean"));
  return v == nullptr ? default_value : v->bool_value;
}

absl::StatusOr<std::string> ModelSection::GetString(absl::string_view key,
                                                    absl::string_view default_value) const {
  TANDEM_ASSIGN_OR_RETURN(const ParamValue* v,
                          FindParam(*this, key, ParamValue::Type::kString, "a string"));
  return v == nullptr ? std::string(default_value) : v->string_value;
}

absl::StatusOr<std::vector<int64_t>> ModelSection::GetIntList(
    absl::string_view key, std::vector<int64_t> default_value) const {
  TANDEM_ASSIGN_OR_RETURN(const ParamValue* v,
                          FindParam(*this, key, ParamValue::Type::kArray, "an array of integers"));
  if (v == nullptr) return default_value;
  std::vector<int64_t> out;
  for (const ParamValue& e : v->array) {
    if (e.type != ParamValue::Type::kInt) {
      return ConfigError(absl::StrCat("[model.params] ", key, " must be an array of integers"));
    }
    out.push_back(e.int_value);
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> ModelSection::GetStringList(
    absl::string_view key, std::vector<std::string> default_value) const {
  TANDEM_ASSIGN_OR_RETURN(const ParamValue* v,
                          FindParam(*this, key, ParamValue::Type::kArray, "an array of strings"));
  if (v == nullptr) return default_value;
  std::vector<std::string> out;
  for (const ParamValue& e : v->array) {
    if (e.type != ParamValue::Type::kString) {
      return ConfigError(absl::StrCat("[model.params] ", key, " must be an array of strings"));
    }
    out.push_back(e.string_value);
  }
  return out;
}

bool ModelSection::Has(absl::string_view key) const {
  read.Mark(key);
  return params.contains(std::string(key));
}

}  // namespace tandem

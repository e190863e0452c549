// estimator/internal/export_config.cc
#include "estimator/internal/export_config.h"

#include <regex>

#include "absl/strings/str_cat.h"

namespace tandem::internal {
namespace {

// Letters, digits, '_', '-' and '.', not starting with '.': safe in a path and a URL.
bool IsSafeName(const std::string& name) {
  if (name.empty() || name.size() > 128 || name[0] == '.') return false;
  for (char ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '-' && ch != '.') {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::Status CheckExportAndWarmStart(const JobConfig& c,
                                     const std::function<std::string(const std::string&)>& where) {
  auto error = [&](const std::string& key, absl::string_view message) {
    return ConfigError(absl::StrCat(where(key), ": ", message));
  };
  const ExportSection& e = c.export_;
  if (e.strategy != "best") {
    if (e.metric != "loss") {
      return error("export.metric", "[export] metric applies to strategy = \"best\" only");
    }
    if (!e.metric_mode.empty()) {
      return error("export.metric_mode",
                   "[export] metric_mode applies to strategy = \"best\" only");
    }
  } else if (e.metric != "loss" && e.metric_mode.empty()) {
    return error("export.metric_mode",
                 absl::StrCat("[export] metric_mode (\"min\" or \"max\") is required for metric '",
                              e.metric, "'; only loss defaults to \"min\""));
  }
  if (!IsSafeName(e.name)) {
    return error("export.name", absl::StrCat("[export] name '", e.name,
                                             "' must be letters, digits, '_', '-' or '.'"));
  }
  if (!e.model_name.empty() && !IsSafeName(e.model_name)) {
    return error("export.model_name", absl::StrCat("[export] model_name '", e.model_name,
                                                   "' must be letters, digits, '_', '-' or '.'"));
  }
  const TrainSection& t = c.train;
  if (t.warm_start_from.empty()) {
    if (t.warm_start_vars != ".*") {
      return error("train.warm_start_vars", "[train] warm_start_vars needs warm_start_from");
    }
    if (!t.warm_start_map.empty()) {
      return error("train.warm_start_map", "[train] warm_start_map needs warm_start_from");
    }
  }
  // std::regex compiles recursively: bound the pattern before handing it over.
  if (t.warm_start_vars.size() > 1024) {
    return error("train.warm_start_vars", "[train] warm_start_vars is longer than 1024 characters");
  }
  try {
    std::regex unused(t.warm_start_vars);
  } catch (const std::regex_error& ex) {
    return error("train.warm_start_vars",
                 absl::StrCat("[train] warm_start_vars '", t.warm_start_vars,
                              "' is not a regex: ", ex.what()));
  }
  return absl::OkStatus();
}

}  // namespace tandem::internal

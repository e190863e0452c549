// estimator/internal/data_config.cc
#include "estimator/internal/data_config.h"

#include <glob.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "framework/core/env.h"
#include "framework/core/status.h"

namespace tandem::internal {
namespace {

// The column type and default of a column_defaults entry.
absl::StatusOr<data::CsvColumn> ColumnOf(const std::string& name, const ParamValue& v) {
  data::CsvColumn c;
  c.name = name;
  switch (v.type) {
    case ParamValue::Type::kInt:
      c.dtype = DType::kInt64;
      c.default_value = absl::StrCat(v.int_value);
      break;
    case ParamValue::Type::kDouble:
      c.dtype = DType::kFloat;
      c.default_value = absl::StrCat(v.double_value);
      break;
    case ParamValue::Type::kString:
      c.dtype = DType::kString;
      c.default_value = v.string_value;
      break;
    case ParamValue::Type::kBool:
      c.dtype = DType::kBool;
      c.default_value = v.bool_value ? "true" : "false";
      break;
    case ParamValue::Type::kArray:
      // [] : required, of the type of its one element when it has one ([0], [""]).
      if (v.array.size() > 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "[data] column_defaults entry of '", name,
            "' must be a value, [] (required, float32) or [a value] (required, of its type)"));
      }
      if (v.array.empty()) {
        c.dtype = DType::kFloat;
      } else {
        TANDEM_ASSIGN_OR_RETURN(c, ColumnOf(name, v.array[0]));
      }
      c.default_value.reset();
      break;
  }
  return c;
}

}  // namespace

absl::StatusOr<std::vector<data::CsvColumn>> CsvColumnsFromConfig(const DataSection& d) {
  std::vector<data::CsvColumn> columns;
  for (size_t i = 0; i < d.column_names.size(); ++i) {
    data::CsvColumn c;
    if (i < d.column_defaults.size()) {
      TANDEM_ASSIGN_OR_RETURN(c, ColumnOf(d.column_names[i], d.column_defaults[i]));
    } else {
      c.name = d.column_names[i];
      c.dtype = DType::kString;  // No default given: a required string.
    }
    if (auto it = d.value_separators.find(c.name); it != d.value_separators.end()) {
      c.value_separator = it->second;
    }
    columns.push_back(std::move(c));
  }
  return columns;
}

data::CsvReadOptions CsvOptionsFromConfig(const DataSection& d) {
  data::CsvReadOptions o;
  o.header = d.header;
  o.delimiter = d.field_delim.empty() ? ',' : d.field_delim[0];
  o.skip_initial_space = d.skip_initial_space;
  o.na_value = d.na_value;
  o.comment = d.comment;
  o.strip_line_suffix = d.strip_line_suffix;
  o.skip_bad_rows = d.skip_bad_rows;
  return o;
}

absl::StatusOr<std::vector<std::string>> DataFiles(const std::string& value, const char* key) {
  std::vector<std::string> files;
  for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
    const std::string pattern(absl::StripAsciiWhitespace(part));
    if (pattern.find_first_of("*?[") == std::string::npos) {
      if (!env::FileExists(pattern)) {
        return ConfigError(absl::StrCat("[data] ", key, ": no such file ", pattern),
                           absl::StatusCode::kNotFound);
      }
      files.push_back(pattern);
      continue;
    }
    glob_t g{};
    const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
    std::vector<std::string> matched;
    for (size_t i = 0; rc == 0 && i < g.gl_pathc; ++i) matched.emplace_back(g.gl_pathv[i]);
    globfree(&g);
    if (matched.empty()) {
      return ConfigError(absl::StrCat("[data] ", key, ": no file matches ", pattern),
                         absl::StatusCode::kNotFound);
    }
    std::sort(matched.begin(), matched.end());
    files.insert(files.end(), matched.begin(), matched.end());
  }
  if (files.empty()) return ConfigError(absl::StrCat("[data] ", key, " is empty"));
  return files;
}

absl::Status CheckData(const JobConfig& c,
                       const std::function<std::string(const std::string&)>& where) {
  const DataSection& d = c.data;
  auto error = [&](const std::string& key, absl::string_view message) {
    return ConfigError(absl::StrCat(where("data." + key), ": [data] ", key, " ", message));
  };
  const DataSection defaults;
  const bool csv = d.format == "csv";
  struct Key {
    const char* name;
    bool set;
  };
  const Key csv_keys[] = {
      {"column_names", !d.column_names.empty()},
      {"column_defaults", !d.column_defaults.empty()},
      {"header", d.header != defaults.header},
      {"field_delim", d.field_delim != defaults.field_delim},
      {"skip_initial_space", d.skip_initial_space != defaults.skip_initial_space},
      {"na_value", !d.na_value.empty()},
      {"comment", !d.comment.empty()},
      {"strip_line_suffix", !d.strip_line_suffix.empty()},
      {"skip_bad_rows", d.skip_bad_rows},
      {"value_separators", !d.value_separators.empty()},
  };
  for (const Key& k : csv_keys) {
    if (k.set && !csv) {
      return error(k.name, absl::StrCat("is a csv key, and format is \"", d.format, "\""));
    }
  }
  if (d.compression != defaults.compression && d.format != "tfrecord_example") {
    return error("compression", "is a tfrecord_example key");
  }
  if (!d.label_name.empty() && d.format.empty()) {
    return error("label_name", "needs a format (\"csv\" or \"tfrecord_example\")");
  }
  if (!csv) return absl::OkStatus();
  if (d.field_delim.size() != 1) return error("field_delim", "must be one character");
  if (d.column_names.empty() && !d.header) {
    return error("column_names", "is required for csv without a header line");
  }
  if (!d.column_defaults.empty() && d.column_defaults.size() != d.column_names.size()) {
    return error("column_defaults",
                 absl::StrCat("has ", d.column_defaults.size(), " entries for ",
                              d.column_names.size(), " column_names"));
  }
  auto is_column = [&](const std::string& name) {
    return std::find(d.column_names.begin(), d.column_names.end(), name) != d.column_names.end();
  };
  if (!d.column_names.empty() && !d.label_name.empty() && !is_column(d.label_name)) {
    return error("label_name", absl::StrCat("'", d.label_name, "' is not one of column_names (",
                                            absl::StrJoin(d.column_names, ", "), ")"));
  }
  for (const auto& [name, sep] : d.value_separators) {
    if (!d.column_names.empty() && !is_column(name)) {
      return error("value_separators", absl::StrCat("names '", name, "', not a column"));
    }
    if (sep.empty()) return error("value_separators", absl::StrCat("'", name, "' is empty"));
  }
  absl::StatusOr<std::vector<data::CsvColumn>> columns = CsvColumnsFromConfig(d);
  if (!columns.ok()) return error("column_defaults", columns.status().message());
  return absl::OkStatus();
}

}  // namespace tandem::internal

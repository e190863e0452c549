// estimator/internal/data_config.h
//
// The [data] keys of the premade estimators' input (estimator/canned/):
//
//   format            "csv" or "tfrecord_example" ("": the model reads its own data)
//   train_path,       the files: a path, a glob pattern, or several joined by ','
//   eval_path
//   label_name        the label's column or feature key
//   csv: column_names (in file order), column_defaults (one per column: its type, from
//        the value's TOML type, integer -> int64, float -> float32, string, boolean, and
//        the value of an empty field; [] for a required field), header, field_delim,
//        skip_initial_space, na_value, comment, strip_line_suffix, skip_bad_rows,
//        value_separators = { column = "|" } (a list per field) (framework/data/csv.h)
//   tfrecord_example: compression ("auto": gzip when the name ends in .gz, "none",
//        "gzip") (framework/data/example_parser.h)
//
// CheckData refuses, as config errors naming the key, what cannot work: csv keys with
// another format, column_defaults not one per column, a label_name that is not a
// column, a field_delim that is not one character, a value_separators column that is
// not one. Files are looked for when the input is made.
//
// Thread safety: pure functions.
#ifndef TANDEM_ESTIMATOR_INTERNAL_DATA_CONFIG_H_
#define TANDEM_ESTIMATOR_INTERNAL_DATA_CONFIG_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "estimator/job_config.h"
#include "framework/data/csv.h"

namespace tandem::internal {

absl::Status CheckData(const JobConfig& c,
                       const std::function<std::string(const std::string&)>& where);

// The files of a train_path / eval_path value (`key` names it in errors): each
// ','-separated part is a path or a glob pattern; NOT_FOUND (a config error) when a
// part matches nothing.
absl::StatusOr<std::vector<std::string>> DataFiles(const std::string& value, const char* key);

// The csv columns and reading options of [data].
absl::StatusOr<std::vector<data::CsvColumn>> CsvColumnsFromConfig(const DataSection& d);
data::CsvReadOptions CsvOptionsFromConfig(const DataSection& d);

}  // namespace tandem::internal

#endif  // TANDEM_ESTIMATOR_INTERNAL_DATA_CONFIG_H_

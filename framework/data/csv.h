// framework/data/csv.h
//
// CSV input: ReadCsv reads whole files (plain or gzip) into columns, one tensor per
// column with the rows along dimension 0, and CsvDataset serves such a table as a
// dataset of rows (a RowSource: Shuffle and Batch gather rows straight from it). The
// files are parsed once, when the dataset is made, so a bad file fails the job at its
// start, not in its seventh epoch.
//
//   std::vector<CsvColumn> cols = {{"age", DType::kInt64, "0"},
//                                  {"workclass", DType::kString, ""}, ...};
//   CsvReadOptions o;
//   o.skip_initial_space = true;
//   TANDEM_ASSIGN_OR_RETURN(CsvTable t, ReadCsv({"adult.data.gz"}, cols, o));
//
// Fields: split on the delimiter; a field may be double-quoted ("" is a quote inside).
// An empty field, or one equal to na_value, takes its column's default (TensorFlow's
// record_defaults); a column without a default refuses it. Numbers may have spaces
// around them; strings are kept as they are (skip_initial_space drops the spaces after
// a delimiter, as Python's csv module and TensorFlow's census input do). A column with
// a value_separator holds a list per row ("a|b|c"): its tensor is [rows, longest list],
// padded with '' (strings) or -1 (integers), the missing-value marks of the feature
// columns (framework/ops/feature_ops.h).
//
// Errors name the file, the line and the column: "adult.data:17: column 3 (fnlwgt):
// cannot parse \"x\" as int64", "adult.data:9: expected 15 fields but found 14". With
// skip_bad_rows such a row is left out and counted (CsvTable::skipped_rows, and the
// first error kept for the log) instead; nothing else is ever dropped. A file holds at
// most a quarter of the memory this process may use, before or after decompression
// (env::ReadFile, MaybeGunzip).
//
// Thread safety: pure functions; the dataset is immutable.
#ifndef TANDEM_FRAMEWORK_DATA_CSV_H_
#define TANDEM_FRAMEWORK_DATA_CSV_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/data/dataset.h"

namespace tandem::data {

struct CsvColumn {
  std::string name;  // "" with a header: taken from the header.
  DType dtype = DType::kFloat;  // float32, int32, int64, uint8, bool or string.
  std::optional<std::string> default_value;  // Text of an empty field's value; none: required.
  std::string value_separator;  // Non-empty: a list of values per field (strings, integers).
};

struct CsvReadOptions {
  bool header = false;  // Each file's first line names the columns (checked against them).
  char delimiter = ',';
  bool skip_initial_space = false;  // Spaces after a delimiter are not part of the field.
  std::string na_value;             // A field equal to this (non-empty) is missing.
  std::string comment;              // Lines starting with this (non-empty) are skipped.
  std::string strip_line_suffix;    // Removed from the end of each line that has it.
  bool skip_bad_rows = false;       // Leave out (and count) rows that do not parse.
  std::vector<std::string> select;  // The columns to keep, in this order; empty: all.
};

struct CsvTable {
  std::vector<std::string> names;  // The kept columns, in order.
  std::vector<Tensor> columns;     // [rows] or [rows, longest list].
  int64_t rows = 0;
  int64_t skipped_rows = 0;  // skip_bad_rows: rows left out.
  std::string first_skipped;  // The first left-out row's error.
};

absl::StatusOr<CsvTable> ReadCsv(const std::vector<std::string>& paths,
                                 std::vector<CsvColumn> columns, const CsvReadOptions& options);

// The rows of `table`: element i is {column[i] for each column}. `name` is the dataset's
// DebugString.
absl::StatusOr<DatasetPtr> CsvDataset(CsvTable table, std::string name = "FromCsv");

}  // namespace tandem::data

#endif  // TANDEM_FRAMEWORK_DATA_CSV_H_

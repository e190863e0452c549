// framework/data/csv.cc
#include "framework/data/csv.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/data/idx_reader.h"

namespace tandem::data {
namespace {

bool ListAllowed(DType d) {
  return d == DType::kString || d == DType::kInt64 || d == DType::kInt32;
}

// Splits one line into fields; a quoted field may hold the delimiter and "" for a quote.
absl::Status SplitLine(absl::string_view line, const CsvReadOptions& o,
                       std::vector<std::string>* fields) {
  fields->clear();
  size_t i = 0;
  while (true) {
    std::string& field = fields->emplace_back();
    if (o.skip_initial_space) {
      while (i < line.size() && line[i] == ' ') ++i;
    }
    if (i < line.size() && line[i] == '"') {
      ++i;
      while (true) {
        if (i >= line.size()) return absl::InvalidArgumentError("unterminated quoted field");
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            field.push_back('"');
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field.push_back(line[i++]);
      }
      if (i < line.size() && line[i] != o.delimiter) {
        return absl::InvalidArgumentError("unexpected character after closing quote");
      }
    } else {
      const size_t end = std::min(line.find(o.delimiter, i), line.size());
      field.assign(line.data() + i, end - i);
      i = end;
    }
    if (i >= line.size()) return absl::OkStatus();
    ++i;  // The delimiter.
  }
}

// The values of one column while the files are read.
class ColumnValues {
 public:
  explicit ColumnValues(const CsvColumn& c) : column_(c) {}

  // Parses `text` (one value, not a list) and appends it.
  absl::Status Append(absl::string_view text) {
    auto bad = [&] {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot parse \"", text, "\" as ", DTypeName(column_.dtype)));
    };
    if (column_.dtype == DType::kString) {
      strings_.emplace_back(text);
      return absl::OkStatus();
    }
    const absl::string_view s = absl::StripAsciiWhitespace(text);
    switch (column_.dtype) {
      case DType::kFloat: {
        float v;
        if (!absl::SimpleAtof(s, &v)) return bad();
        floats_.push_back(v);
        return absl::OkStatus();
      }
      case DType::kInt32:
      case DType::kInt64:
      case DType::kUInt8: {
        int64_t v;
        if (!absl::SimpleAtoi(s, &v)) return bad();
        if ((column_.dtype == DType::kInt32 && (v < INT32_MIN || v > INT32_MAX)) ||
            (column_.dtype == DType::kUInt8 && (v < 0 || v > 255))) {
          return bad();
        }
        ints_.push_back(v);
        return absl::OkStatus();
      }
      case DType::kBool: {
        if (s == "true" || s == "1") {
          ints_.push_back(1);
        } else if (s == "false" || s == "0") {
          ints_.push_back(0);
        } else {
          return bad();
        }
        return absl::OkStatus();
      }
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("unsupported CSV column dtype ", DTypeName(column_.dtype)));
    }
  }

  // One field of a row: its values (a missing field takes the default).
  absl::Status AppendField(absl::string_view field, const CsvReadOptions& o) {
    const bool missing = field.empty() || (!o.na_value.empty() && field == o.na_value);
    if (column_.value_separator.empty()) {
      if (!missing) return Append(field);
      if (!column_.default_value) return absl::InvalidArgumentError("empty field");
      return Append(*column_.default_value);
    }
    int64_t n = 0;
    if (missing) {
      if (!column_.default_value) return absl::InvalidArgumentError("empty field");
      if (!column_.default_value->empty()) {
        TANDEM_RETURN_IF_ERROR(Append(*column_.default_value));
        n = 1;
      }
    } else {
      for (absl::string_view v : absl::StrSplit(field, column_.value_separator)) {
        if (v.empty()) continue;
        TANDEM_RETURN_IF_ERROR(Append(v));
        ++n;
      }
    }
    counts_.push_back(n);
    return absl::OkStatus();
  }

  // Marks and undoes a row.
  struct Mark {
    size_t values, counts;
  };
  Mark mark() const { return {size(), counts_.size()}; }
  void Undo(const Mark& m) {
    floats_.resize(std::min(floats_.size(), m.values));
    ints_.resize(std::min(ints_.size(), m.values));
    strings_.resize(std::min(strings_.size(), m.values));
    counts_.resize(m.counts);
  }

  // The column's tensor for `rows` rows; RESOURCE_EXHAUSTED when padding its lists to
  // the longest would take more than a quarter of the memory this process may use.
  absl::StatusOr<Tensor> Finish(int64_t rows) {
    if (!column_.value_separator.empty()) {
      int64_t width = 1;
      for (int64_t n : counts_) width = std::max(width, n);
      const double bytes = static_cast<double>(rows) * static_cast<double>(width) *
                           static_cast<double>(DTypeSize(column_.dtype));
      if (bytes > env::MemoryLimitBytes() / 4) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "CSV column ", column_.name, ": ", rows, " rows padded to its longest list of ",
            width, " values need ", static_cast<int64_t>(bytes / (1 << 20)),
            " MiB, more than a quarter of the memory this process may use"));
      }
      return FinishList(rows);
    }
    const TensorShape shape({rows});
    switch (column_.dtype) {
      case DType::kFloat:
        return Tensor::FromVector<float>(floats_, shape);
      case DType::kString: {
        Tensor t(DType::kString, shape);
        std::string* p = t.data<std::string>();
        for (int64_t i = 0; i < rows; ++i) p[i] = std::move(strings_[i]);
        return t;
      }
      default: {
        Tensor t(column_.dtype, shape);
        for (int64_t i = 0; i < rows; ++i) Store(t, i, ints_[i]);
        return t;
      }
    }
  }

 private:
  size_t size() const { return floats_.size() + ints_.size() + strings_.size(); }

  static void Store(Tensor& t, int64_t i, int64_t v) {
    switch (t.dtype()) {
      case DType::kInt32:
        t.data<int32_t>()[i] = static_cast<int32_t>(v);
        break;
      case DType::kInt64:
        t.data<int64_t>()[i] = v;
        break;
      case DType::kUInt8:
        t.data<uint8_t>()[i] = static_cast<uint8_t>(v);
        break;
      case DType::kBool:
        t.data<bool>()[i] = v != 0;
        break;
      default:
        break;
    }
  }

  Tensor FinishList(int64_t rows) {
    int64_t width = 1;
    for (int64_t n : counts_) width = std::max(width, n);
    Tensor t(column_.dtype, TensorShape({rows, width}));
    const bool strings = column_.dtype == DType::kString;
    for (int64_t i = 0; i < rows * width; ++i) {
      if (!strings) Store(t, i, -1);
    }
    size_t next = 0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < counts_[r]; ++j, ++next) {
        if (strings) {
          t.data<std::string>()[r * width + j] = std::move(strings_[next]);
        } else {
          Store(t, r * width + j, ints_[next]);
        }
      }
    }
    return t;
  }

  const CsvColumn& column_;
  std::vector<float> floats_;
  std::vector<int64_t> ints_;  // Integers and bools.
  std::vector<std::string> strings_;
  std::vector<int64_t> counts_;  // Lists: values per row.
};

absl::Status CheckColumns(const std::vector<CsvColumn>& columns, bool header) {
  if (columns.empty()) return absl::InvalidArgumentError("CSV: no columns declared");
  for (size_t c = 0; c < columns.size(); ++c) {
    const CsvColumn& col = columns[c];
    const std::string what = absl::StrCat("CSV column ", c + 1, " (", col.name, ")");
    if (col.name.empty() && !header) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": no name and no header"));
    }
    for (size_t d = 0; d < c; ++d) {
      if (!col.name.empty() && columns[d].name == col.name) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": a second column of that name"));
      }
    }
    if (!col.value_separator.empty() && !ListAllowed(col.dtype)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": a value_separator needs a string or integer column, it is ",
          DTypeName(col.dtype)));
    }
    const DType d = col.dtype;
    if (d != DType::kFloat && d != DType::kInt32 && d != DType::kInt64 && d != DType::kUInt8 &&
        d != DType::kBool && d != DType::kString) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": unsupported CSV column dtype ", DTypeName(d)));
    }
    // A list's empty default means no value.
    if (col.default_value && !(col.default_value->empty() && !col.value_separator.empty())) {
      ColumnValues probe(col);
      if (absl::Status s = probe.Append(*col.default_value); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": default value: ", s.message()));
      }
    }
  }
  return absl::OkStatus();
}

// Reads one file's lines into `values`.
class FileReader {
 public:
  // `after_header` (may be null) runs once the header has named the columns.
  FileReader(const std::string& path, std::vector<CsvColumn>& columns, const CsvReadOptions& o,
             const std::vector<int>& keep, std::vector<ColumnValues>& values, CsvTable& table,
             std::function<absl::Status()> after_header)
      : path_(path),
        columns_(columns),
        o_(o),
        keep_(keep),
        values_(values),
        table_(table),
        after_header_(std::move(after_header)) {}

  absl::Status Read() {
    TANDEM_ASSIGN_OR_RETURN(std::string raw, env::ReadFile(path_));
    TANDEM_ASSIGN_OR_RETURN(std::string text, MaybeGunzip(raw, path_));
    raw.clear();
    raw.shrink_to_fit();
    absl::string_view rest(text);
    int64_t line_no = 0;
    bool header = o_.header;
    while (!rest.empty()) {
      size_t end = rest.find('\n');
      absl::string_view line = rest.substr(0, end);
      rest = end == absl::string_view::npos ? absl::string_view() : rest.substr(end + 1);
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (header) {
        header = false;
        TANDEM_RETURN_IF_ERROR(CheckHeader(line, line_no));
        if (after_header_) TANDEM_RETURN_IF_ERROR(after_header_());
        continue;
      }
      if (absl::StripAsciiWhitespace(line).empty()) continue;
      if (!o_.comment.empty() && absl::StartsWith(line, o_.comment)) continue;
      if (!o_.strip_line_suffix.empty()) absl::ConsumeSuffix(&line, o_.strip_line_suffix);
      absl::Status s = Row(line);
      if (s.ok()) {
        ++table_.rows;
        continue;
      }
      const std::string message = absl::StrCat(path_, ":", line_no, ": ", s.message());
      if (!o_.skip_bad_rows) return absl::InvalidArgumentError(message);
      if (table_.skipped_rows++ == 0) table_.first_skipped = message;
    }
    if (o_.header && line_no == 0) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ": empty file, expected a header line"));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status CheckHeader(absl::string_view line, int64_t line_no) {
    absl::Status s = SplitLine(line, o_, &fields_);
    if (s.ok() && fields_.size() != columns_.size()) {
      s = absl::InvalidArgumentError(absl::StrCat("header has ", fields_.size(),
                                                  " columns but ", columns_.size(),
                                                  " were declared"));
    }
    for (size_t c = 0; s.ok() && c < columns_.size(); ++c) {
      if (columns_[c].name.empty()) columns_[c].name = fields_[c];
      if (columns_[c].name != fields_[c]) {
        s = absl::InvalidArgumentError(absl::StrCat("header column ", c + 1, " is \"", fields_[c],
                                                    "\", declared \"", columns_[c].name, "\""));
      }
    }
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(path_, ":", line_no, ": ", s.message()));
    return absl::OkStatus();
  }

  absl::Status Row(absl::string_view line) {
    TANDEM_RETURN_IF_ERROR(SplitLine(line, o_, &fields_));
    if (fields_.size() != columns_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("expected ", columns_.size(), " fields but found ", fields_.size()));
    }
    marks_.clear();
    for (ColumnValues& v : values_) marks_.push_back(v.mark());
    for (size_t k = 0; k < keep_.size(); ++k) {
      const int c = keep_[k];
      absl::Status s = values_[k].AppendField(fields_[c], o_);
      if (!s.ok()) {
        for (size_t j = 0; j < values_.size(); ++j) values_[j].Undo(marks_[j]);
        return absl::InvalidArgumentError(
            absl::StrCat("column ", c + 1, " (", columns_[c].name, "): ", s.message()));
      }
    }
    return absl::OkStatus();
  }

  const std::string& path_;
  std::vector<CsvColumn>& columns_;
  const CsvReadOptions& o_;
  const std::vector<int>& keep_;
  std::vector<ColumnValues>& values_;
  CsvTable& table_;
  std::function<absl::Status()> after_header_;
  std::vector<std::string> fields_;
  std::vector<ColumnValues::Mark> marks_;
};

}  // namespace

absl::StatusOr<CsvTable> ReadCsv(const std::vector<std::string>& paths,
                                 std::vector<CsvColumn> columns, const CsvReadOptions& options) {
  if (paths.empty()) return absl::InvalidArgumentError("CSV: no files to read");
  TANDEM_RETURN_IF_ERROR(CheckColumns(columns, options.header));
  for (const std::string& p : paths) {
    if (!env::FileExists(p)) return absl::NotFoundError(absl::StrCat("CSV: no such file ", p));
  }
  CsvTable table;
  std::vector<int> keep;
  std::vector<ColumnValues> values;
  auto choose = [&]() -> absl::Status {
    keep.clear();
    if (options.select.empty()) {
      for (size_t c = 0; c < columns.size(); ++c) keep.push_back(static_cast<int>(c));
    }
    for (const std::string& name : options.select) {
      auto it = std::find_if(columns.begin(), columns.end(),
                             [&](const CsvColumn& c) { return c.name == name; });
      if (it == columns.end()) {
        std::vector<std::string> names;
        for (const CsvColumn& c : columns) names.push_back(c.name);
        return absl::InvalidArgumentError(absl::StrCat("CSV: no column named '", name,
                                                       "' (the columns: ",
                                                       absl::StrJoin(names, ", "), ")"));
      }
      keep.push_back(static_cast<int>(it - columns.begin()));
    }
    values.clear();
    values.reserve(keep.size());
    for (int c : keep) values.emplace_back(columns[c]);
    return absl::OkStatus();
  };
  // With a header, the names are known after the first file's first line.
  const bool names_known = std::none_of(columns.begin(), columns.end(),
                                        [](const CsvColumn& c) { return c.name.empty(); });
  if (names_known) TANDEM_RETURN_IF_ERROR(choose());
  for (size_t i = 0; i < paths.size(); ++i) {
    // With unnamed columns, the first file's header names them before any row is read.
    std::function<absl::Status()> after_header;
    if (i == 0 && !names_known) after_header = choose;
    TANDEM_RETURN_IF_ERROR(
        FileReader(paths[i], columns, options, keep, values, table, after_header).Read());
  }
  for (size_t k = 0; k < keep.size(); ++k) {
    table.names.push_back(columns[keep[k]].name);
    TANDEM_ASSIGN_OR_RETURN(Tensor column, values[k].Finish(table.rows));
    table.columns.push_back(std::move(column));
  }
  return table;
}

absl::StatusOr<DatasetPtr> CsvDataset(CsvTable table, std::string name) {
  if (table.columns.empty()) return absl::InvalidArgumentError(name + ": no columns");
  if (table.rows == 0) return absl::InvalidArgumentError(name + ": no rows");
  return FromTensors(std::move(table.columns), std::move(name));
}

}  // namespace tandem::data

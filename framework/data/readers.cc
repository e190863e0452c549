#include "framework/data/readers.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "framework/core/env.h"
#include "framework/core/record_io.h"
#include "framework/core/status.h"
#include "framework/data/fashion_mnist.h"
#include "framework/data/idx_reader.h"

namespace tandem::data {
namespace {

using NextResult = absl::StatusOr<std::optional<Element>>;

// ------------------------------------------------------------------------ CSV

// Splits one line into fields; quoted fields may contain the delimiter and "".
absl::Status SplitCsvLine(absl::string_view line, char delim, std::vector<std::string>* fields) {
  fields->clear();
  std::string field;
  size_t i = 0;
  while (true) {
    field.clear();
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
      if (i < line.size() && line[i] != delim) {
        return absl::InvalidArgumentError("unexpected character after closing quote");
      }
    } else {
      while (i < line.size() && line[i] != delim) field.push_back(line[i++]);
    }
    fields->push_back(field);
    if (i >= line.size()) return absl::OkStatus();
    ++i;  // Skip the delimiter.
  }
}

absl::StatusOr<Tensor> ParseCsvField(absl::string_view text, DType dtype) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  if (s.empty()) return absl::InvalidArgumentError("empty field");
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot parse \"", text, "\" as ", DTypeName(dtype)));
  };
  switch (dtype) {
    case DType::kFloat: {
      float v;
      if (!absl::SimpleAtof(s, &v)) return bad();
      return Tensor::Scalar<float>(v);
    }
    case DType::kInt32: {
      int32_t v;
      if (!absl::SimpleAtoi(s, &v)) return bad();
      return Tensor::Scalar<int32_t>(v);
    }
    case DType::kInt64: {
      int64_t v;
      if (!absl::SimpleAtoi(s, &v)) return bad();
      return Tensor::Scalar<int64_t>(v);
    }
    case DType::kUInt8: {
      int32_t v;
      if (!absl::SimpleAtoi(s, &v) || v < 0 || v > 255) return bad();
      return Tensor::Scalar<uint8_t>(static_cast<uint8_t>(v));
    }
    case DType::kBool: {
      if (s == "true" || s == "1") return Tensor::Scalar<bool>(true);
      if (s == "false" || s == "0") return Tensor::Scalar<bool>(false);
      return bad();
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("unsupported CSV column dtype ", DTypeName(dtype)));
  }
}

class CsvDataset : public Dataset {
 public:
  CsvDataset(std::string path, std::vector<DType> types, CsvOptions options)
      : path_(std::move(path)), types_(std::move(types)), options_(options) {}
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator() const override;
  std::string DebugString() const override { return absl::StrCat("FromCsv(", path_, ")"); }

 private:
  class Iter : public Iterator {
   public:
    Iter(const CsvDataset* ds, std::string contents)
        : path_(ds->path_),
          types_(ds->types_),
          options_(ds->options_),
          contents_(std::move(contents)) {}
    absl::Status ReadHeader();
    NextResult GetNext() override;

   private:
    // The next line without its terminator; false at end of file.
    bool NextLine(absl::string_view* line);
    absl::Status LineError(absl::string_view what) const {
      return absl::InvalidArgumentError(absl::StrCat(path_, ":", line_no_, ": ", what));
    }

    std::string path_;
    std::vector<DType> types_;
    CsvOptions options_;
    std::string contents_;
    std::vector<std::string> names_;
    size_t pos_ = 0;
    int64_t line_no_ = 0;
    std::vector<std::string> fields_;
  };

  std::string path_;
  std::vector<DType> types_;
  CsvOptions options_;
};

bool CsvDataset::Iter::NextLine(absl::string_view* line) {
  if (pos_ >= contents_.size()) return false;
  size_t end = contents_.find('\n', pos_);
  if (end == std::string::npos) end = contents_.size();
  *line = absl::string_view(contents_).substr(pos_, end - pos_);
  if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
  pos_ = end + 1;
  ++line_no_;
  return true;
}

absl::Status CsvDataset::Iter::ReadHeader() {
  if (!options_.header) {
    for (size_t c = 0; c < types_.size(); ++c) names_.push_back(absl::StrCat("column", c + 1));
    return absl::OkStatus();
  }
  absl::string_view line;
  if (!NextLine(&line)) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": empty file, expected a header line"));
  }
  absl::Status s = SplitCsvLine(line, options_.delimiter, &names_);
  if (!s.ok()) return LineError(s.message());
  if (names_.size() != types_.size()) {
    return LineError(absl::StrCat("header has ", names_.size(), " columns but ", types_.size(),
                                  " column types were given"));
  }
  return absl::OkStatus();
}

NextResult CsvDataset::Iter::GetNext() {
  absl::string_view line;
  do {
    if (!NextLine(&line)) return std::nullopt;
  } while (absl::StripAsciiWhitespace(line).empty());
  absl::Status s = SplitCsvLine(line, options_.delimiter, &fields_);
  if (!s.ok()) return LineError(s.message());
  if (fields_.size() != types_.size()) {
    return LineError(
        absl::StrCat("expected ", types_.size(), " fields but found ", fields_.size()));
  }
  Element e;
  e.reserve(types_.size());
  for (size_t c = 0; c < types_.size(); ++c) {
    absl::StatusOr<Tensor> t = ParseCsvField(fields_[c], types_[c]);
    if (!t.ok()) {
      return LineError(
          absl::StrCat("column ", c + 1, " (", names_[c], "): ", t.status().message()));
    }
    e.push_back(*std::move(t));
  }
  return e;
}

absl::StatusOr<std::unique_ptr<Iterator>> CsvDataset::MakeIterator() const {
  TANDEM_ASSIGN_OR_RETURN(std::string contents, env::ReadFile(path_));
  auto it = std::make_unique<Iter>(this, std::move(contents));
  TANDEM_RETURN_IF_ERROR(it->ReadHeader());
  return std::unique_ptr<Iterator>(std::move(it));
}

// ------------------------------------------------------------------------ TFRecord

class TFRecordDataset : public Dataset {
 public:
  explicit TFRecordDataset(std::vector<std::string> paths) : paths_(std::move(paths)) {}
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator() const override {
    return std::unique_ptr<Iterator>(new Iter(paths_));
  }
  std::string DebugString() const override { return "FromTFRecords"; }

 private:
  class Iter : public Iterator {
   public:
    explicit Iter(std::vector<std::string> paths) : paths_(std::move(paths)) {}
    NextResult GetNext() override {
      while (true) {
        if (reader_ == nullptr) {
          if (next_file_ >= paths_.size()) return std::nullopt;
          TANDEM_ASSIGN_OR_RETURN(reader_, io::RecordReader::Open(paths_[next_file_++]));
        }
        TANDEM_ASSIGN_OR_RETURN(std::optional<std::string> record, reader_->ReadRecord());
        if (!record) {
          reader_.reset();
          continue;
        }
        Tensor t(DType::kUInt8, TensorShape({static_cast<int64_t>(record->size())}));
        if (!record->empty()) std::memcpy(t.raw_data(), record->data(), record->size());
        return Element{std::move(t)};
      }
    }

   private:
    std::vector<std::string> paths_;
    size_t next_file_ = 0;
    std::unique_ptr<io::RecordReader> reader_;
  };
  std::vector<std::string> paths_;
};

}  // namespace

namespace {

absl::StatusOr<DatasetPtr> IdxDataset(absl::StatusOr<LabeledImages> split) {
  if (!split.ok()) return split.status();
  return FromTensors({std::move(split->images), std::move(split->labels)}, "FromIdx");
}

}  // namespace

absl::StatusOr<DatasetPtr> FromIdx(const std::string& images_path, const std::string& labels_path,
                                   PixelFormat pixels) {
  return IdxDataset(LoadIdxPair(images_path, labels_path, pixels));
}

absl::StatusOr<DatasetPtr> FromIdxSplit(std::string dir, const std::string& prefix,
                                        PixelFormat pixels) {
  return IdxDataset(LoadIdxSplit(std::move(dir), prefix, pixels));
}

MapFn PixelsToUnitFloat(size_t component) {
  return [component](Element e) -> absl::StatusOr<Element> {
    if (component >= e.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("PixelsToUnitFloat: component ", component, " of an element of ", e.size()));
    }
    const Tensor& bytes = e[component];
    if (bytes.dtype() != DType::kUInt8) {
      return absl::InvalidArgumentError(absl::StrCat("PixelsToUnitFloat: component ", component,
                                                     " is ", DTypeName(bytes.dtype()),
                                                     ", not uint8"));
    }
    Tensor unit(DType::kFloat, bytes.shape());
    BytesToUnitFloat(bytes.data<uint8_t>(), unit.data<float>(), bytes.NumElements());
    e[component] = std::move(unit);
    return e;
  };
}

absl::StatusOr<DatasetPtr> FromCsv(const std::string& path, std::vector<DType> column_types,
                                   CsvOptions options) {
  if (column_types.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("FromCsv(", path, "): no column types"));
  }
  for (size_t c = 0; c < column_types.size(); ++c) {
    absl::StatusOr<Tensor> probe = ParseCsvField("0", column_types[c]);
    if (!probe.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("FromCsv(", path, "): column ", c + 1, ": ", probe.status().message()));
    }
  }
  if (!env::FileExists(path)) {
    return absl::NotFoundError(absl::StrCat("FromCsv: no such file ", path));
  }
  return DatasetPtr(std::make_shared<CsvDataset>(path, std::move(column_types), options));
}

absl::StatusOr<DatasetPtr> FromTFRecords(std::vector<std::string> paths) {
  for (const std::string& p : paths) {
    if (!env::FileExists(p)) {
      return absl::NotFoundError(absl::StrCat("FromTFRecords: no such file ", p));
    }
  }
  return DatasetPtr(std::make_shared<TFRecordDataset>(std::move(paths)));
}

}  // namespace tandem::data

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
#include "framework/data/csv.h"
#include "framework/data/fashion_mnist.h"
#include "framework/data/idx_reader.h"

namespace tandem::data {
namespace {

using NextResult = absl::StatusOr<std::optional<Element>>;

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
  std::vector<CsvColumn> columns;
  for (size_t c = 0; c < column_types.size(); ++c) {
    columns.push_back({options.header ? "" : absl::StrCat("column", c + 1), column_types[c]});
  }
  CsvReadOptions o;
  o.header = options.header;
  o.delimiter = options.delimiter;
  TANDEM_ASSIGN_OR_RETURN(CsvTable table, ReadCsv({path}, std::move(columns), o));
  return CsvDataset(std::move(table), absl::StrCat("FromCsv(", path, ")"));
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

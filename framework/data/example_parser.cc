// framework/data/example_parser.cc
#include "framework/data/example_parser.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/env.h"
#include "framework/core/record_io.h"
#include "framework/core/status.h"
#include "framework/data/idx_reader.h"
#include "framework/protos/example.pb.h"

namespace tandem::data {
namespace {

// TensorFlow's names of the list kinds in its messages.
const char* KindName(DType d) {
  switch (d) {
    case DType::kFloat:
      return "float";
    case DType::kInt64:
      return "int64";
    default:
      return "bytes";
  }
}

proto::Feature::KindCase KindOf(DType d) {
  switch (d) {
    case DType::kFloat:
      return proto::Feature::kFloatList;
    case DType::kInt64:
      return proto::Feature::kInt64List;
    default:
      return proto::Feature::kBytesList;
  }
}

const char* KindName(proto::Feature::KindCase k) {
  switch (k) {
    case proto::Feature::kFloatList:
      return "float";
    case proto::Feature::kInt64List:
      return "int64";
    case proto::Feature::kBytesList:
      return "bytes";
    default:
      return "none";
  }
}

// The values of one feature while the examples are read.
struct Column {
  const ExampleFeature* spec;
  int64_t width = 1;  // Fixed length: values per example.
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<int64_t> counts;  // Variable length: values per example.

  size_t size() const { return floats.size() + ints.size() + strings.size(); }

  void Append(const proto::Feature& f) {
    switch (spec->dtype) {
      case DType::kFloat:
        floats.insert(floats.end(), f.float_list().value().begin(), f.float_list().value().end());
        break;
      case DType::kInt64:
        ints.insert(ints.end(), f.int64_list().value().begin(), f.int64_list().value().end());
        break;
      default:
        strings.insert(strings.end(), f.bytes_list().value().begin(),
                       f.bytes_list().value().end());
        break;
    }
  }
  void AppendDefault() {
    for (double v : spec->default_value) {
      if (spec->dtype == DType::kFloat) {
        floats.push_back(static_cast<float>(v));
      } else {
        ints.push_back(static_cast<int64_t>(v));
      }
    }
  }
  static int ListSize(const proto::Feature& f) {
    switch (f.kind_case()) {
      case proto::Feature::kFloatList:
        return f.float_list().value_size();
      case proto::Feature::kInt64List:
        return f.int64_list().value_size();
      case proto::Feature::kBytesList:
        return f.bytes_list().value_size();
      default:
        return 0;
    }
  }

  absl::Status Add(const proto::Features& features) {
    const auto& map = features.feature();
    auto it = map.find(spec->key);
    const bool present = it != map.end() && it->second.kind_case() != proto::Feature::KIND_NOT_SET;
    if (present && it->second.kind_case() != KindOf(spec->dtype)) {
      return absl::InvalidArgumentError(
          absl::StrCat("feature '", spec->key, "': Data types don't match. Data type: ",
                       KindName(it->second.kind_case()), " but expected type: ",
                       KindName(spec->dtype)));
    }
    if (spec->var_len) {
      if (present) Append(it->second);
      counts.push_back(present ? ListSize(it->second) : 0);
      return absl::OkStatus();
    }
    if (!present) {
      if (spec->default_value.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("feature '", spec->key, "' (data type: ",
                                                       DTypeName(spec->dtype),
                                                       ") is required but could not be found"));
      }
      AppendDefault();
      return absl::OkStatus();
    }
    if (ListSize(it->second) != width) {
      return absl::InvalidArgumentError(absl::StrCat(
          "feature '", spec->key, "': Number of ", KindName(spec->dtype),
          " values != expected. Values size: ", ListSize(it->second), " but output shape: [",
          absl::StrJoin(spec->shape, ","), "]"));
    }
    Append(it->second);
    return absl::OkStatus();
  }

  absl::StatusOr<Tensor> Finish(int64_t n) {
    std::vector<int64_t> dims = {n};
    int64_t row = width;
    if (spec->var_len) {
      row = 1;
      for (int64_t c : counts) row = std::max(row, c);
      const double bytes = static_cast<double>(n) * static_cast<double>(row) *
                           static_cast<double>(DTypeSize(spec->dtype));
      if (bytes > env::MemoryLimitBytes() / 4) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "feature '", spec->key, "': ", n, " examples padded to its longest list of ", row,
            " values need ", static_cast<int64_t>(bytes / (1 << 20)),
            " MiB, more than a quarter of the memory this process may use"));
      }
      dims.push_back(row);
    } else if (!(spec->shape.size() == 1 && spec->shape[0] == 1)) {
      dims.insert(dims.end(), spec->shape.begin(), spec->shape.end());
    }
    Tensor t(spec->dtype, TensorShape(absl::MakeConstSpan(dims)));
    for (int64_t i = 0; i < n * row; ++i) {
      if (spec->dtype == DType::kFloat) t.data<float>()[i] = 0.f;
      if (spec->dtype == DType::kInt64) t.data<int64_t>()[i] = -1;
    }
    size_t next = 0;
    for (int64_t e = 0; e < n; ++e) {
      const int64_t m = spec->var_len ? counts[e] : width;
      for (int64_t j = 0; j < m; ++j, ++next) {
        const int64_t at = e * row + j;
        if (spec->dtype == DType::kFloat) {
          t.data<float>()[at] = floats[next];
        } else if (spec->dtype == DType::kInt64) {
          t.data<int64_t>()[at] = ints[next];
        } else {
          t.data<std::string>()[at] = std::move(strings[next]);
        }
      }
    }
    return t;
  }
};

absl::Status CheckFeatures(const std::vector<ExampleFeature>& features) {
  if (features.empty()) return absl::InvalidArgumentError("parse_example: no features requested");
  for (const ExampleFeature& f : features) {
    if (f.dtype != DType::kFloat && f.dtype != DType::kInt64 && f.dtype != DType::kString) {
      return absl::InvalidArgumentError(absl::StrCat("parse_example: feature '", f.key,
                                                     "' must be float32, int64 or string, not ",
                                                     DTypeName(f.dtype)));
    }
    int64_t width = 1;
    for (int64_t d : f.shape) {
      if (d < 1 || width > (int64_t{1} << 24) / d) {
        return absl::InvalidArgumentError(absl::StrCat("parse_example: feature '", f.key,
                                                       "' has a bad shape [",
                                                       absl::StrJoin(f.shape, ","), "]"));
      }
      width *= d;
    }
    if (!f.var_len && f.shape.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("parse_example: feature '", f.key, "' has an empty shape"));
    }
    if (!f.default_value.empty() &&
        (f.var_len || f.dtype == DType::kString ||
         static_cast<int64_t>(f.default_value.size()) != width)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parse_example: feature '", f.key, "': a default needs a fixed-length numeric feature "
                                             "and one value per element of its shape"));
    }
  }
  return absl::OkStatus();
}

// ParseExamples with `where(r)` naming record r in errors ("file: record 3").
absl::StatusOr<std::vector<Tensor>> Parse(const std::vector<absl::string_view>& records,
                                          const std::vector<ExampleFeature>& features,
                                          const std::function<std::string(size_t)>& where) {
  TANDEM_RETURN_IF_ERROR(CheckFeatures(features));
  std::vector<Column> columns;
  for (const ExampleFeature& f : features) {
    Column c{&f};
    for (int64_t d : f.shape) c.width *= d;
    columns.push_back(std::move(c));
  }
  proto::Example example;
  for (size_t r = 0; r < records.size(); ++r) {
    if (!example.ParseFromArray(records[r].data(), static_cast<int>(records[r].size()))) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(r), ": not a serialized tf.train.Example"));
    }
    for (Column& c : columns) {
      absl::Status s = c.Add(example.features());
      if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(where(r), ": ", s.message()));
    }
  }
  std::vector<Tensor> out;
  for (Column& c : columns) {
    TANDEM_ASSIGN_OR_RETURN(Tensor t, c.Finish(static_cast<int64_t>(records.size())));
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<Tensor>> ParseExamples(const std::vector<absl::string_view>& records,
                                                  const std::vector<ExampleFeature>& features,
                                                  const std::string& name) {
  return Parse(records, features, [&](size_t r) { return absl::StrCat(name, ": record ", r); });
}

absl::StatusOr<std::vector<Tensor>> ReadExampleFiles(const std::vector<std::string>& paths,
                                                     const std::vector<ExampleFeature>& features,
                                                     Compression compression) {
  if (paths.empty()) return absl::InvalidArgumentError("tf.Example input: no files to read");
  std::vector<std::string> contents;
  std::vector<absl::string_view> records;
  std::vector<size_t> first_record;  // Per file: the index of its first record.
  // The views point into `contents`, whose strings do not move once read.
  contents.reserve(paths.size());
  for (const std::string& p : paths) {
    TANDEM_ASSIGN_OR_RETURN(std::string bytes, env::ReadFile(p));
    const bool gzip = compression == Compression::kGzip ||
                      (compression == Compression::kAuto && absl::EndsWith(p, ".gz"));
    if (gzip) {
      if (bytes.size() < 2 || bytes[0] != '\x1f' || bytes[1] != '\x8b') {
        return absl::InvalidArgumentError(absl::StrCat(p, ": not gzip data"));
      }
      TANDEM_ASSIGN_OR_RETURN(bytes, MaybeGunzip(bytes, p));
    }
    contents.push_back(std::move(bytes));
    TANDEM_ASSIGN_OR_RETURN(std::vector<absl::string_view> file_records,
                            io::SplitRecords(contents.back(), p));
    first_record.push_back(records.size());
    records.insert(records.end(), file_records.begin(), file_records.end());
  }
  return Parse(records, features, [&](size_t r) {
    const size_t file =
        std::upper_bound(first_record.begin(), first_record.end(), r) - first_record.begin() - 1;
    return absl::StrCat(paths[file], ": record ", r - first_record[file]);
  });
}

}  // namespace tandem::data

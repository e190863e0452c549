// apps/trainer/json_lines.cc
#include "apps/trainer/json_lines.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tandem {
namespace {

// One JSON value per row of `t`: a number for a single element, else a flat list.
nlohmann::json RowJson(const Tensor& t, int64_t row) {
  const int64_t per_row = t.dim(0) == 0 ? 0 : t.NumElements() / t.dim(0);
  nlohmann::json values = nlohmann::json::array();
  for (int64_t j = row * per_row; j < (row + 1) * per_row; ++j) {
    switch (t.dtype()) {
      case DType::kFloat:
        values.push_back(t.data<float>()[j]);
        break;
      case DType::kInt32:
        values.push_back(t.data<int32_t>()[j]);
        break;
      case DType::kInt64:
        values.push_back(t.data<int64_t>()[j]);
        break;
      case DType::kUInt8:
        values.push_back(t.data<uint8_t>()[j]);
        break;
      case DType::kBool:
        values.push_back(t.data<bool>()[j]);
        break;
      case DType::kString:
        values.push_back(t.StringAt(j));
        break;
      default:
        values.push_back(nullptr);
    }
  }
  if (per_row == 1 && t.shape().dims().size() == 1) return values[0];
  return values;
}

}  // namespace

absl::Status JsonLinesWriter::Write(const std::map<std::string, Tensor>& batch) {
  int64_t rows = -1;
  for (const auto& [key, t] : batch) {
    if (t.shape().dims().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("prediction '", key, "' is a scalar"));
    }
    if (rows >= 0 && t.dim(0) != rows) {
      return absl::InvalidArgumentError(absl::StrCat("predictions disagree on the batch size: '",
                                                     key, "' has ", t.dim(0), " rows"));
    }
    rows = t.dim(0);
  }
  for (int64_t i = 0; i < rows; ++i) {
    nlohmann::json line = nlohmann::json::object();
    for (const auto& [key, t] : batch) line[key] = RowJson(t, i);
    // Strings that are not UTF-8 (a model's own bytes) print with U+FFFD in their place.
    *out_ << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    ++count_;
  }
  if (!*out_) return absl::DataLossError("writing predictions failed");
  return absl::OkStatus();
}

}  // namespace tandem

// framework/tensor/tensor_format.cc: see tensor_format.h.
#include "framework/tensor/tensor_format.h"

#include <charconv>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tandem {

std::string FormatElement(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kInt64:
      return absl::StrCat(t.data<int64_t>()[i]);
    case DType::kInt32:
      return absl::StrCat(t.data<int32_t>()[i]);
    case DType::kUInt8:
      return absl::StrCat(static_cast<int>(t.data<uint8_t>()[i]));
    case DType::kBool:
      return t.data<bool>()[i] ? "True" : "False";
    case DType::kFloat: {
      char buf[32];
      auto r = std::to_chars(buf, buf + sizeof(buf), t.data<float>()[i]);
      return std::string(buf, r.ptr);
    }
    case DType::kString:
      return absl::StrCat("b'", absl::CHexEscape(t.StringAt(i)), "'");
    default:
      return absl::StrFormat("%g", t.ValueAsDouble(i));
  }
}

}  // namespace tandem

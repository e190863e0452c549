#include "framework/tensor/dtype.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace tandem {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat:
    case DType::kInt32:
      return 4;
    case DType::kInt64:
      return 8;
    case DType::kUInt8:
    case DType::kBool:
      return 1;
    case DType::kBFloat16:
      return 2;
    case DType::kString:
      return sizeof(std::string);
    default:
      return 0;
  }
}

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat:
      return "float32";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kUInt8:
      return "uint8";
    case DType::kBool:
      return "bool";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kString:
      return "string";
    case DType::kResource:
      return "resource";
    default:
      return "invalid";
  }
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  std::string n = absl::AsciiStrToLower(name);
  if (n.rfind("dt_", 0) == 0) n = n.substr(3);
  if (n == "float32" || n == "float") return DType::kFloat;
  if (n == "bfloat16") return DType::kBFloat16;
  if (n == "int32") return DType::kInt32;
  if (n == "int64") return DType::kInt64;
  if (n == "uint8") return DType::kUInt8;
  if (n == "bool") return DType::kBool;
  if (n == "string") return DType::kString;
  if (n == "resource") return DType::kResource;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", name,
                   "' (expected float32, bfloat16, int32, int64, uint8, bool or string)"));
}

bool IsValidDType(int v) {
  switch (static_cast<DType>(v)) {
    case DType::kFloat:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUInt8:
    case DType::kBool:
    case DType::kBFloat16:
    case DType::kString:
    case DType::kResource:
      return true;
    default:
      return false;
  }
}

bool IsFloating(DType d) { return d == DType::kFloat || d == DType::kBFloat16; }
bool IsInteger(DType d) { return d == DType::kInt32 || d == DType::kInt64 || d == DType::kUInt8; }

}  // namespace tandem

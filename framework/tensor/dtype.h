// framework/tensor/dtype.h
//
// DType names the element type of a tensor. Values match TensorFlow's DataType
// numbers (and tandem.proto.DataType). kResource tensors hold ResourceHandles, not
// bytes. kString tensors hold std::string objects (byte strings, any bytes): they live
// in host memory only, are made by the input pipeline, feeds and the few ops that take
// them (OpDef::takes_strings), and are copied element by element (CopyElements in
// tensor.h), never as raw bytes. DTypeTraits maps C++ types to DTypes for templated
// kernels.
//
// Thread safety: all functions are pure.
#ifndef TANDEM_FRAMEWORK_TENSOR_DTYPE_H_
#define TANDEM_FRAMEWORK_TENSOR_DTYPE_H_

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem {

enum class DType : int {
  kInvalid = 0,
  kFloat = 1,
  kInt32 = 3,
  kUInt8 = 4,
  kInt64 = 9,
  kString = 7,
  kBool = 10,
  kBFloat16 = 14,
  kResource = 20,
};

// Bytes per element; 0 for kInvalid and kResource; sizeof(std::string) for kString
// (the bytes of the object, not of its characters).
size_t DTypeSize(DType dtype);
// "float32", "bfloat16", "int32", "int64", "uint8", "bool", "string", "resource".
absl::string_view DTypeName(DType dtype);
// Accepts the names above plus "float" and TensorFlow's "DT_FLOAT" style.
absl::StatusOr<DType> ParseDType(absl::string_view name);
// True for a DType number a peer may legally send.
bool IsValidDType(int value);
bool IsFloating(DType dtype);  // kFloat, kBFloat16
bool IsInteger(DType dtype);   // kInt32, kInt64, kUInt8

// bfloat16: the top 16 bits of an IEEE float32, rounded to nearest even.
struct bfloat16 {
  uint16_t bits = 0;
  bfloat16() = default;
  explicit bfloat16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      bits = 0x7fc0;  // NaN
    } else {
      u += 0x7fffu + ((u >> 16) & 1u);
      bits = static_cast<uint16_t>(u >> 16);
    }
  }
  explicit operator float() const {
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

template <typename T>
struct DTypeTraits;
template <>
struct DTypeTraits<float> {
  static constexpr DType kDType = DType::kFloat;
};
template <>
struct DTypeTraits<bfloat16> {
  static constexpr DType kDType = DType::kBFloat16;
};
template <>
struct DTypeTraits<int32_t> {
  static constexpr DType kDType = DType::kInt32;
};
template <>
struct DTypeTraits<int64_t> {
  static constexpr DType kDType = DType::kInt64;
};
template <>
struct DTypeTraits<uint8_t> {
  static constexpr DType kDType = DType::kUInt8;
};
template <>
struct DTypeTraits<bool> {
  static constexpr DType kDType = DType::kBool;
};
template <>
struct DTypeTraits<std::string> {
  static constexpr DType kDType = DType::kString;
};

template <typename T>
constexpr DType DTypeOf() {
  return DTypeTraits<T>::kDType;
}

}  // namespace tandem

// Calls MACRO(T) with T the C++ type for `dtype` among the listed numeric types; the
// `default` case runs `on_error`.
#define TANDEM_SWITCH_NUMERIC(dtype, MACRO, on_error) \
  switch (dtype) {                                    \
    case ::tandem::DType::kFloat: {                   \
      MACRO(float);                                   \
      break;                                          \
    }                                                 \
    case ::tandem::DType::kInt32: {                   \
      MACRO(int32_t);                                 \
      break;                                          \
    }                                                 \
    case ::tandem::DType::kInt64: {                   \
      MACRO(int64_t);                                 \
      break;                                          \
    }                                                 \
    case ::tandem::DType::kUInt8: {                   \
      MACRO(uint8_t);                                 \
      break;                                          \
    }                                                 \
    default: {                                        \
      on_error;                                       \
    }                                                 \
  }

#endif  // TANDEM_FRAMEWORK_TENSOR_DTYPE_H_

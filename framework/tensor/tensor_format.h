// framework/tensor/tensor_format.h
//
// FormatElement: element i of a host tensor as text, the one way tandem prints values
// (the logging hook's tensors, `ckpt dump`), as NumPy prints them, which is what a
// TensorFlow user reads in the same places: integers in decimal, bools True / False,
// float32 as the shortest text that reads back as the same float (so logged losses
// compare exactly), other floating types with %g's 6 significant digits, strings as
// b'...' with C escapes.
//
// Thread safety: a pure function.
#ifndef TANDEM_FRAMEWORK_TENSOR_TENSOR_FORMAT_H_
#define TANDEM_FRAMEWORK_TENSOR_TENSOR_FORMAT_H_

#include <cstdint>
#include <string>

#include "framework/tensor/tensor.h"

namespace tandem {

// REQUIRES: t is a host tensor, 0 <= i < t.NumElements(), dtype not kResource.
std::string FormatElement(const Tensor& t, int64_t i);

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_TENSOR_TENSOR_FORMAT_H_

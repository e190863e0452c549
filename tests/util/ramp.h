// tests/util/ramp.h
//
// Ramp: a float32 tensor of sin(scale * i) + offset over its elements in order: values
// of both signs and many magnitudes, the same on every run, so tests compare sessions
// bit for bit without a random generator.
#ifndef TANDEM_TESTS_UTIL_RAMP_H_
#define TANDEM_TESTS_UTIL_RAMP_H_

#include <cmath>
#include <cstdint>

#include "framework/tensor/tensor.h"

namespace tandem::testing {

inline Tensor Ramp(const TensorShape& shape, float scale, float offset) {
  Tensor t(DType::kFloat, shape);
  int64_t i = 0;
  for (float& v : t.flat<float>()) v = std::sin(scale * static_cast<float>(i++)) + offset;
  return t;
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_UTIL_RAMP_H_

// tests/util/window_geometry.h
//
// WindowGeometry: the output size of a convolution or pooling window along one
// dimension and the padding before it, by TensorFlow's rules (SAME puts the odd
// padding row after), for the tests' naive reference loops.
#ifndef TANDEM_TESTS_UTIL_WINDOW_GEOMETRY_H_
#define TANDEM_TESTS_UTIL_WINDOW_GEOMETRY_H_

#include <algorithm>
#include <cstdint>

namespace tandem::testing {

struct WindowGeometry {
  int64_t out, pad;
};

inline WindowGeometry Window(int64_t in, int64_t k, int64_t stride, int64_t dilation, bool same) {
  const int64_t eff = (k - 1) * dilation + 1;
  if (!same) return {(in - eff) / stride + 1, 0};
  const int64_t out = (in + stride - 1) / stride;
  return {out, std::max<int64_t>((out - 1) * stride + eff - in, 0) / 2};
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_UTIL_WINDOW_GEOMETRY_H_

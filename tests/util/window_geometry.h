// tests/util/window_geometry.h
//
// WindowGeometry: the output size of a convolution or pooling window along one
// dimension and the padding before it, by TensorFlow's rules (SAME puts the odd
// padding row after), for the tests' naive reference loops; ConvCase and ForEachTap,
// the convolution those loops sum over; ExpectWithinSumOfTerms, the check of a kernel's
// sums against them.
#ifndef TANDEM_TESTS_UTIL_WINDOW_GEOMETRY_H_
#define TANDEM_TESTS_UTIL_WINDOW_GEOMETRY_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

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

// One convolution of the kernel tests: input [n,h,w,c], filter [kh,kw,c,o], a stride
// and a dilation for both axes, SAME or VALID.
struct ConvCase {
  std::string name;
  int64_t n, h, w, c, kh, kw, o, stride, dilation;
  bool same;
  WindowGeometry out_h() const { return Window(h, kh, stride, dilation, same); }
  WindowGeometry out_w() const { return Window(w, kw, stride, dilation, same); }
};
inline void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name; }

// Calls fn(x, dy, tap) with the flat NHWC index of each input element that output
// position (b, y, x) reads through tap (i, j), the index of that output position [n,
// oh, ow] and the tap's index i * kw + j: every term of the convolution, channels left
// to the caller.
template <typename F>
void ForEachTap(const ConvCase& k, F&& fn) {
  const WindowGeometry oh = k.out_h(), ow = k.out_w();
  for (int64_t b = 0; b < k.n; ++b)
    for (int64_t y = 0; y < oh.out; ++y)
      for (int64_t xo = 0; xo < ow.out; ++xo)
        for (int64_t i = 0; i < k.kh; ++i)
          for (int64_t j = 0; j < k.kw; ++j) {
            const int64_t iy = y * k.stride + i * k.dilation - oh.pad;
            const int64_t ix = xo * k.stride + j * k.dilation - ow.pad;
            if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
            fn((b * k.h + iy) * k.w + ix, (b * oh.out + y) * ow.out + xo, i * k.kw + j);
          }
}

// Fails the test for each element (up to 5) of `got` further from `want` than
// `tolerance` times scale (the sum of the |terms| that made it, plus 1e-6).
inline void ExpectWithinSumOfTerms(const std::vector<float>& got, const std::vector<double>& want,
                                   const std::vector<double>& scale, double tolerance) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    if (std::fabs(got[i] - want[i]) > tolerance * (scale[i] + 1e-6)) {
      ADD_FAILURE() << "element " << i << ": got " << got[i] << ", want " << want[i];
      ++bad;
    }
  }
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_UTIL_WINDOW_GEOMETRY_H_

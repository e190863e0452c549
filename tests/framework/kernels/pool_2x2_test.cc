// The 2x2 max-pool rows (pool_2x2.h), float32 and bfloat16, against a scalar
// reference of the rule every pooling kernel shares: the window's first maximum in
// row-major order, NaNs skipped (a -inf start), the maximum's own bits (+0 and -0
// kept apart); the argmax rows' codes name that maximum, and routing by them gives the
// same gradient. Channel counts that fill whole AVX-512 vectors take the vector rows
// where the CPU has AVX-512BW and VL; the others take the loops. The general loops of
// pool_util.h follow the same rule where a window holds NaNs.
#include "framework/kernels/cpu/pool_2x2.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "framework/kernels/cpu/pool_util.h"
#include "gtest/gtest.h"

namespace tandem::nn {
namespace {

float Wide(float v) { return v; }
float Wide(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// Index (0-3) of the window's first maximum, or -1 where every element is NaN.
int FirstMax(const float (&x)[4]) {
  float m = -std::numeric_limits<float>::infinity();
  for (float v : x) m = v > m ? v : m;
  for (int k = 0; k < 4; ++k) {
    if (x[k] == m) return k;
  }
  return -1;
}

// Values that tie, signed zeros, infinities and NaNs, and ordinary ones.
template <typename T>
std::vector<T> Values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  const float specials[] = {0.0f,
                            -0.0f,
                            1.0f,
                            1.0f,
                            -2.0f,
                            3.5f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  std::vector<T> out(n);
  for (T& v : out) {
    float f = rng() % 3 == 0 ? std::uniform_real_distribution<float>(-4, 4)(rng)
                             : specials[rng() % (sizeof(specials) / sizeof(float))];
    if constexpr (sizeof(T) == 2) {
      uint32_t u;
      std::memcpy(&u, &f, sizeof(u));
      v = static_cast<uint16_t>(u >> 16);
    } else {
      v = f;
    }
  }
  return out;
}

template <typename T>
bool SameBits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <typename T>
void CheckRows(int64_t ow, int64_t c, uint32_t seed) {
  const int64_t w = 2 * ow;
  const std::vector<T> r0 = Values<T>(w * c, seed), r1 = Values<T>(w * c, seed + 1);
  const std::vector<T> g = Values<T>(ow * c, seed + 2);
  std::vector<T> pooled(ow * c), d0(w * c, T{1}), d1(w * c, T{1});
  MaxPool2x2Row(r0.data(), r1.data(), pooled.data(), ow, c);
  MaxPoolGrad2x2Row(r0.data(), r1.data(), g.data(), d0.data(), d1.data(), ow, c);
  // The argmax rows: the same maxima, codes, and the same gradient routed by the codes.
  std::vector<T> pooled_too(ow * c), e0(w * c, T{1}), e1(w * c, T{1});
  std::vector<uint8_t> codes(ow * c, 0xee);
  MaxPoolArgmax2x2Row(r0.data(), r1.data(), pooled_too.data(), codes.data(), ow, c);
  RouteByArgmax2x2Row(codes.data(), g.data(), e0.data(), e1.data(), ow, c);
  for (int64_t i = 0; i < ow * c; ++i) {
    ASSERT_TRUE(SameBits(pooled[i], pooled_too[i])) << "argmax row's max " << i << " c=" << c;
  }
  for (int64_t i = 0; i < w * c; ++i) {
    ASSERT_TRUE(SameBits(d0[i], e0[i]) && SameBits(d1[i], e1[i]))
        << "gradient routed by codes, element " << i << " c=" << c;
  }
  for (int64_t ox = 0; ox < ow; ++ox) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const T* e[4] = {&r0[2 * ox * c + ch], &r0[(2 * ox + 1) * c + ch], &r1[2 * ox * c + ch],
                       &r1[(2 * ox + 1) * c + ch]};
      const float x[4] = {Wide(*e[0]), Wide(*e[1]), Wide(*e[2]), Wide(*e[3])};
      const int k = FirstMax(x);
      ASSERT_EQ(codes[ox * c + ch], k >= 0 ? k : kNoArgmax) << "code at ox=" << ox << " ch=" << ch;
      const float expected_max = k >= 0 ? x[k] : -std::numeric_limits<float>::infinity();
      const float got = Wide(pooled[ox * c + ch]);
      ASSERT_TRUE(std::signbit(got) == std::signbit(expected_max) &&
                  (got == expected_max || (std::isnan(got) && std::isnan(expected_max))))
          << "max at ox=" << ox << " ch=" << ch << " c=" << c << ": " << got << " vs "
          << expected_max;
      T* out[4] = {&d0[2 * ox * c + ch], &d0[(2 * ox + 1) * c + ch], &d1[2 * ox * c + ch],
                   &d1[(2 * ox + 1) * c + ch]};
      for (int j = 0; j < 4; ++j) {
        const T expected = j == k ? g[ox * c + ch] : T{0};
        ASSERT_TRUE(SameBits(*out[j], expected))
            << "gradient element " << j << " at ox=" << ox << " ch=" << ch << " c=" << c
            << " (first maximum " << k << ")";
      }
    }
  }
}

TEST(Pool2x2Test, Float32RowsMatchTheReference) {
  uint32_t seed = 1;
  for (int64_t c : {16, 32, 48, 3, 17}) {
    for (int64_t ow : {1, 5, 14}) CheckRows<float>(ow, c, seed += 3);
  }
}

TEST(Pool2x2Test, Bfloat16RowsMatchTheReference) {
  uint32_t seed = 101;
  for (int64_t c : {32, 64, 96, 16, 3, 33}) {
    for (int64_t ow : {1, 5, 14}) CheckRows<uint16_t>(ow, c, seed += 3);
  }
}

// The general loops (SAME padding over an odd size: a clipped last window) route a
// window holding NaNs to its maximum, NaNs skipped, and an all-NaN window nowhere, as
// the rows do; the argmax codes say the same.
TEST(Pool2x2Test, GeneralLoopsRouteWindowsWithNaNsAsTheRowsDo) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // 3x3, one channel: window (0,0) {1, NaN / 0.5, 0.2}; window (0,1) {NaN / NaN} (clipped).
  const std::vector<float> x = {1.0f, nan, nan, 0.5f, 0.2f, nan, -1.0f, -2.0f, 3.0f};
  const PoolGeometry s{1, 3, 3, 1, 2, 2, {2, 0, 1}, {2, 0, 1}, {2, 2, 2, 2, true}};
  ASSERT_FALSE(IsFull2x2(s));
  ASSERT_TRUE(PoolsByArgmax(s));
  const Tensor input = Tensor::FromVector<float>(x, TensorShape({1, 3, 3, 1}));
  const Tensor grad =
      Tensor::FromVector<float>(std::vector<float>{10, 20, 30, 40}, TensorShape({1, 2, 2, 1}));
  Tensor pooled(DType::kFloat, s.output_shape()), pooled_too(DType::kFloat, s.output_shape());
  Tensor codes(DType::kUInt8, s.output_shape());
  Tensor routed(DType::kFloat, s.input_shape()), by_codes(DType::kFloat, s.input_shape());
  MaxPoolInto(s, input, &pooled);
  MaxPoolGradInto(s, input, grad, &routed);
  MaxPoolArgmaxInto(s, input, &pooled_too, &codes);
  MaxPoolGradByArgmaxInto(s, codes, grad, &by_codes);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(std::vector<float>(pooled.data<float>(), pooled.data<float>() + 4),
            (std::vector<float>{1.0f, -inf, -1.0f, 3.0f}));
  EXPECT_EQ(std::vector<uint8_t>(codes.data<uint8_t>(), codes.data<uint8_t>() + 4),
            (std::vector<uint8_t>{0, kNoArgmax, 0, 0}));
  const std::vector<float> want = {10, 0, 0, 0, 0, 0, 30, 0, 40};
  EXPECT_EQ(std::vector<float>(routed.data<float>(), routed.data<float>() + 9), want);
  EXPECT_EQ(std::vector<float>(by_codes.data<float>(), by_codes.data<float>() + 9), want);
  EXPECT_EQ(std::memcmp(pooled.raw_data(), pooled_too.raw_data(), pooled.TotalBytes()), 0);
}

}  // namespace
}  // namespace tandem::nn

// tests/framework/kernels/dense_apply_loops_test.cc
//
// The dense optimizer loops give, element for element, the same bits as the formula
// evaluated one float at a time in the documented order, for lengths that leave every
// vector width (4, 8, 16 lanes) a remainder: whichever target clone this CPU runs
// (AVX-512, AVX2 or the baseline) must not fuse or reorder operations.
#include "framework/kernels/cpu/dense_apply_loops.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace {

constexpr int64_t kLengths[] = {1, 3, 5, 8, 15, 16, 17, 31, 33, 100, 1027};

// Deterministic values in [-2, 2) with many distinct mantissas.
std::vector<float> Values(int64_t n, uint32_t seed, bool positive = false) {
  std::vector<float> out(n);
  uint32_t x = seed * 2654435761u + 1;
  for (int64_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    const float u = static_cast<float>(x >> 8) / 16777216.0f;  // [0, 1)
    out[i] = positive ? u * 2.0f + 0.01f : u * 4.0f - 2.0f;
  }
  return out;
}

// Bitwise equality, so a fused or reordered operation shows.
void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want, const char* what,
                    int64_t n) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &want[i], 4);
    ASSERT_EQ(a, b) << what << " element " << i << " of " << n << ": " << got[i] << " vs "
                    << want[i];
  }
}

// The reference formulas' operations, one float at a time, each rounded to float by a
// volatile store: the compiler can neither vectorise nor contract them.
float Sub(float a, float b) {
  volatile float r = a - b;
  return r;
}
float Add(float a, float b) {
  volatile float r = a + b;
  return r;
}
float Mul(float a, float b) {
  volatile float r = a * b;
  return r;
}
float Div(float a, float b) {
  volatile float r = a / b;
  return r;
}
float Sqrt(float a) {
  volatile float r = std::sqrt(a);
  return r;
}

TEST(DenseApplyLoopsTest, AdamMatchesTheScalarFormulaBitForBit) {
  for (const bool nesterov : {false, true}) {
    for (const int64_t n : kLengths) {
      std::vector<float> var = Values(n, 1), m = Values(n, 2), v = Values(n, 3, true),
                         g = Values(n, 4);
      std::vector<float> rvar = var, rm = m, rv = v;
      const float alpha = 0.0123f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-7f;
      apply::Adam(var.data(), m.data(), v.data(), g.data(), alpha, beta1, beta2, eps, nesterov, n);
      const float omb1 = 1.0f - beta1, omb2 = 1.0f - beta2;
      for (int64_t i = 0; i < n; ++i) {
        rm[i] = Add(rm[i], Mul(Sub(g[i], rm[i]), omb1));
        rv[i] = Add(rv[i], Mul(Sub(Mul(g[i], g[i]), rv[i]), omb2));
        const float num = nesterov ? Add(Mul(g[i], omb1), Mul(beta1, rm[i])) : rm[i];
        rvar[i] = Sub(rvar[i], Div(Mul(num, alpha), Add(Sqrt(rv[i]), eps)));
      }
      ExpectSameBits(m, rm, "m", n);
      ExpectSameBits(v, rv, "v", n);
      ExpectSameBits(var, rvar, nesterov ? "var (nesterov)" : "var", n);
    }
  }
}

TEST(DenseApplyLoopsTest, RMSPropAndCenteredMatchTheScalarFormulaBitForBit) {
  for (const int64_t n : kLengths) {
    const std::vector<float> g = Values(n, 5);
    const float lr = 0.01f, rho = 0.9f, momentum = 0.5f, eps = 1e-6f, omr = 1.0f - rho;
    std::vector<float> var = Values(n, 6), ms = Values(n, 7, true), mom = Values(n, 8);
    std::vector<float> rvar = var, rms = ms, rmom = mom;
    apply::RMSProp(var.data(), ms.data(), mom.data(), g.data(), lr, rho, momentum, eps, n);
    for (int64_t i = 0; i < n; ++i) {
      rms[i] = Add(rms[i], Mul(Sub(Mul(g[i], g[i]), rms[i]), omr));
      rmom[i] = Add(Mul(rmom[i], momentum), Div(Mul(lr, g[i]), Sqrt(Add(rms[i], eps))));
      rvar[i] = Sub(rvar[i], rmom[i]);
    }
    ExpectSameBits(ms, rms, "ms", n);
    ExpectSameBits(mom, rmom, "mom", n);
    ExpectSameBits(var, rvar, "var", n);

    // Centered: ms stays above mg^2 (ms in [2, 4), |mg| < 0.5).
    std::vector<float> mg = Values(n, 9), cms = Values(n, 10, true);
    for (float& x : mg) x *= 0.25f;
    for (float& x : cms) x += 2.0f;
    var = Values(n, 11);
    mom = Values(n, 12);
    std::vector<float> rmg = mg, rcms = cms;
    rvar = var;
    rmom = mom;
    apply::CenteredRMSProp(var.data(), mg.data(), cms.data(), mom.data(), g.data(), lr, rho,
                           momentum, eps, n);
    for (int64_t i = 0; i < n; ++i) {
      rcms[i] = Add(rcms[i], Mul(Sub(Mul(g[i], g[i]), rcms[i]), omr));
      rmg[i] = Add(rmg[i], Mul(Sub(g[i], rmg[i]), omr));
      const float denom = Add(Sub(rcms[i], Mul(rmg[i], rmg[i])), eps);
      rmom[i] = Add(Mul(rmom[i], momentum), Div(Mul(lr, g[i]), Sqrt(denom)));
      rvar[i] = Sub(rvar[i], rmom[i]);
    }
    ExpectSameBits(cms, rcms, "centered ms", n);
    ExpectSameBits(mg, rmg, "mg", n);
    ExpectSameBits(mom, rmom, "centered mom", n);
    ExpectSameBits(var, rvar, "centered var", n);
  }
}

TEST(DenseApplyLoopsTest, SgdMomentumAndAdagradMatchTheScalarFormulaBitForBit) {
  for (const int64_t n : kLengths) {
    const std::vector<float> g = Values(n, 13);
    std::vector<float> var = Values(n, 14), rvar = var;
    apply::GradientDescent(var.data(), g.data(), 0.3f, n);
    for (int64_t i = 0; i < n; ++i) rvar[i] = Sub(rvar[i], Mul(0.3f, g[i]));
    ExpectSameBits(var, rvar, "sgd var", n);

    for (const bool nesterov : {false, true}) {
      std::vector<float> accum = Values(n, 15);
      var = Values(n, 16);
      std::vector<float> racc = accum;
      rvar = var;
      const float lr = 0.05f, momentum = 0.9f;
      apply::Momentum(var.data(), accum.data(), g.data(), lr, momentum, nesterov, n);
      for (int64_t i = 0; i < n; ++i) {
        racc[i] = Add(Mul(racc[i], momentum), g[i]);
        rvar[i] = Sub(rvar[i], nesterov ? Add(Mul(g[i], lr), Mul(Mul(racc[i], momentum), lr))
                                        : Mul(lr, racc[i]));
      }
      ExpectSameBits(accum, racc, "momentum accum", n);
      ExpectSameBits(var, rvar, nesterov ? "nesterov var" : "momentum var", n);
    }

    std::vector<float> accum = Values(n, 17, true);
    var = Values(n, 18);
    std::vector<float> racc = accum;
    rvar = var;
    apply::Adagrad(var.data(), accum.data(), g.data(), 0.1f, n);
    for (int64_t i = 0; i < n; ++i) {
      racc[i] = Add(racc[i], Mul(g[i], g[i]));
      rvar[i] = Sub(rvar[i], Div(Mul(g[i], 0.1f), Sqrt(racc[i])));
    }
    ExpectSameBits(accum, racc, "adagrad accum", n);
    ExpectSameBits(var, rvar, "adagrad var", n);
  }
}

}  // namespace
}  // namespace tandem

// framework/kernels/cpu/dense_apply_loops.cc
//
// Built with -fno-math-errno -ffp-contract=off (CMakeLists.txt): see the header.
#include "framework/kernels/cpu/dense_apply_loops.h"

#include <cmath>

namespace tandem::apply {

#define TANDEM_APPLY_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

TANDEM_APPLY_CLONES void GradientDescent(float* __restrict var, const float* __restrict delta,
                                         float alpha, int64_t n) {
  for (int64_t i = 0; i < n; ++i) var[i] -= alpha * delta[i];
}

TANDEM_APPLY_CLONES void Momentum(float* __restrict var, float* __restrict accum,
                                  const float* __restrict grad, float lr, float momentum,
                                  bool nesterov, int64_t n) {
  // -O3 unswitches the loop on `nesterov`.
  for (int64_t i = 0; i < n; ++i) {
    accum[i] = accum[i] * momentum + grad[i];
    var[i] -= nesterov ? grad[i] * lr + accum[i] * momentum * lr : lr * accum[i];
  }
}

TANDEM_APPLY_CLONES void Adagrad(float* __restrict var, float* __restrict accum,
                                 const float* __restrict grad, float lr, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    const float acc = accum[i] + g * g;
    accum[i] = acc;
    var[i] = var[i] - g * lr / std::sqrt(acc);
  }
}

TANDEM_APPLY_CLONES void Adam(float* __restrict var, float* __restrict m, float* __restrict v,
                              const float* __restrict grad, float alpha, float beta1, float beta2,
                              float epsilon, bool nesterov, int64_t n) {
  const float one_minus_beta1 = 1.0f - beta1, one_minus_beta2 = 1.0f - beta2;
  // -O3 unswitches the loop on `nesterov`.
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    const float m_new = m[i] + (g - m[i]) * one_minus_beta1;
    const float v_new = v[i] + (g * g - v[i]) * one_minus_beta2;
    m[i] = m_new;
    v[i] = v_new;
    const float num = nesterov ? g * one_minus_beta1 + beta1 * m_new : m_new;
    var[i] = var[i] - num * alpha / (std::sqrt(v_new) + epsilon);
  }
}

TANDEM_APPLY_CLONES void RMSProp(float* __restrict var, float* __restrict ms, float* __restrict mom,
                                 const float* __restrict grad, float lr, float rho, float momentum,
                                 float epsilon, int64_t n) {
  const float one_minus_rho = 1.0f - rho;
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    const float ms_new = ms[i] + (g * g - ms[i]) * one_minus_rho;
    const float mom_new = mom[i] * momentum + lr * g / std::sqrt(ms_new + epsilon);
    ms[i] = ms_new;
    mom[i] = mom_new;
    var[i] = var[i] - mom_new;
  }
}

TANDEM_APPLY_CLONES void CenteredRMSProp(float* __restrict var, float* __restrict mg,
                                         float* __restrict ms, float* __restrict mom,
                                         const float* __restrict grad, float lr, float rho,
                                         float momentum, float epsilon, int64_t n) {
  const float one_minus_rho = 1.0f - rho;
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    const float ms_new = ms[i] + (g * g - ms[i]) * one_minus_rho;
    const float mg_new = mg[i] + (g - mg[i]) * one_minus_rho;
    const float denom = (ms_new - mg_new * mg_new) + epsilon;
    const float mom_new = mom[i] * momentum + lr * g / std::sqrt(denom);
    ms[i] = ms_new;
    mg[i] = mg_new;
    mom[i] = mom_new;
    var[i] = var[i] - mom_new;
  }
}

}  // namespace tandem::apply

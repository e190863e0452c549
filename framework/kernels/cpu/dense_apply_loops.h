// framework/kernels/cpu/dense_apply_loops.h
//
// The element loops of the dense optimizer updates (training_kernels.cc resolves the
// variables and splits the range over the intra-op pool). Each is compiled for AVX-512,
// AVX2 and the baseline (GCC target_clones, picked once at load time) from one plain
// loop that GCC vectorises: the file is built without errno-setting sqrt and without
// contracting a * b + c into FMA, so every clone computes the same IEEE operations in
// the same order and gives the same bits, the scalar baseline included.
#ifndef TANDEM_FRAMEWORK_KERNELS_CPU_DENSE_APPLY_LOOPS_H_
#define TANDEM_FRAMEWORK_KERNELS_CPU_DENSE_APPLY_LOOPS_H_

#include <cstdint>

namespace tandem::apply {

// var -= alpha * delta
void GradientDescent(float* var, const float* delta, float alpha, int64_t n);
// accum = accum * momentum + grad; var -= lr * accum (Nesterov: grad * lr + accum *
// momentum * lr).
void Momentum(float* var, float* accum, const float* grad, float lr, float momentum, bool nesterov,
              int64_t n);
// accum += grad^2; var -= grad * lr / sqrt(accum)
void Adagrad(float* var, float* accum, const float* grad, float lr, int64_t n);
// m += (g - m)(1 - beta1); v += (g^2 - v)(1 - beta2);
// var -= alpha * m / (sqrt(v) + epsilon), or with Nesterov alpha * (g (1 - beta1) +
// beta1 m) / (sqrt(v) + epsilon). `alpha` is lr * sqrt(1 - beta2^t) / (1 - beta1^t).
void Adam(float* var, float* m, float* v, const float* grad, float alpha, float beta1, float beta2,
          float epsilon, bool nesterov, int64_t n);
// ms += (g^2 - ms)(1 - rho); mom = mom * momentum + lr g / sqrt(ms + epsilon); var -= mom
void RMSProp(float* var, float* ms, float* mom, const float* grad, float lr, float rho,
             float momentum, float epsilon, int64_t n);
// As RMSProp, with mg += (g - mg)(1 - rho) and the denominator sqrt(ms - mg^2 + epsilon).
void CenteredRMSProp(float* var, float* mg, float* ms, float* mom, const float* grad, float lr,
                     float rho, float momentum, float epsilon, int64_t n);

}  // namespace tandem::apply

#endif  // TANDEM_FRAMEWORK_KERNELS_CPU_DENSE_APPLY_LOOPS_H_

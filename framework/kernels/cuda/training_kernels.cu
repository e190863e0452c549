// framework/kernels/cuda/training_kernels.cu
//
// Device code of the dense optimizer updates (training_kernels.cc): one thread per
// element in grid-stride loops, the hyper-parameters read from float32 scalars in
// device memory by every thread. Formulas and their evaluation order are the CPU
// kernels' (framework/kernels/cpu/training_kernels.cc).
#include <cuda_runtime.h>

#include <cstdint>

#include "framework/kernels/cuda/cuda_launchers.h"

namespace tandem::gpu {
namespace {

#define TANDEM_GRID_STRIDE_LOOP(i, n)                                                    \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void GradientDescentKernel(float* var, const float* alpha_p, const float* delta,
                                      int64_t n) {
  const float alpha = *alpha_p;
  TANDEM_GRID_STRIDE_LOOP(i, n) { var[i] -= alpha * delta[i]; }
}

__global__ void MomentumKernel(float* var, float* accum, const float* lr_p, const float* grad,
                               const float* momentum_p, bool nesterov, int64_t n) {
  const float lr = *lr_p, momentum = *momentum_p;
  TANDEM_GRID_STRIDE_LOOP(i, n) {
    const float a = accum[i] * momentum + grad[i];
    accum[i] = a;
    if (nesterov) {
      var[i] -= grad[i] * lr + a * momentum * lr;
    } else {
      var[i] -= lr * a;
    }
  }
}

__global__ void AdagradKernel(float* var, float* accum, const float* lr_p, const float* grad,
                              int64_t n) {
  const float lr = *lr_p;
  TANDEM_GRID_STRIDE_LOOP(i, n) {
    const float g = grad[i];
    const float acc = accum[i] + g * g;
    accum[i] = acc;
    var[i] = var[i] - g * lr / sqrtf(acc);
  }
}

__global__ void AdamKernel(float* var, float* m, float* v, const float* beta1_power_p,
                           const float* beta2_power_p, const float* lr_p, const float* beta1_p,
                           const float* beta2_p, const float* epsilon_p, const float* grad,
                           bool nesterov, int64_t n) {
  const float beta1_power = *beta1_power_p, beta2_power = *beta2_power_p, lr = *lr_p,
              beta1 = *beta1_p, beta2 = *beta2_p, epsilon = *epsilon_p;
  const float alpha = lr * sqrtf(1.0f - beta2_power) / (1.0f - beta1_power);
  const float one_minus_beta1 = 1.0f - beta1, one_minus_beta2 = 1.0f - beta2;
  TANDEM_GRID_STRIDE_LOOP(i, n) {
    const float g = grad[i];
    const float m_new = m[i] + (g - m[i]) * one_minus_beta1;
    const float v_new = v[i] + (g * g - v[i]) * one_minus_beta2;
    m[i] = m_new;
    v[i] = v_new;
    const float step = nesterov ? (g * one_minus_beta1 + beta1 * m_new) * alpha : m_new * alpha;
    var[i] = var[i] - step / (sqrtf(v_new) + epsilon);
  }
}

__global__ void RMSPropKernel(float* var, float* ms, float* mom, const float* lr_p,
                              const float* rho_p, const float* momentum_p, const float* epsilon_p,
                              const float* grad, int64_t n) {
  const float lr = *lr_p, rho = *rho_p, momentum = *momentum_p, epsilon = *epsilon_p;
  const float one_minus_rho = 1.0f - rho;
  TANDEM_GRID_STRIDE_LOOP(i, n) {
    const float g = grad[i];
    const float ms_new = ms[i] + (g * g - ms[i]) * one_minus_rho;
    const float mom_new = mom[i] * momentum + lr * g / sqrtf(ms_new + epsilon);
    ms[i] = ms_new;
    mom[i] = mom_new;
    var[i] = var[i] - mom_new;
  }
}

__global__ void CenteredRMSPropKernel(float* var, float* mg, float* ms, float* mom,
                                      const float* lr_p, const float* rho_p,
                                      const float* momentum_p, const float* epsilon_p,
                                      const float* grad, int64_t n) {
  const float lr = *lr_p, rho = *rho_p, momentum = *momentum_p, epsilon = *epsilon_p;
  const float one_minus_rho = 1.0f - rho;
  TANDEM_GRID_STRIDE_LOOP(i, n) {
    const float g = grad[i];
    const float ms_new = ms[i] + (g * g - ms[i]) * one_minus_rho;
    const float mg_new = mg[i] + (g - mg[i]) * one_minus_rho;
    const float denom = (ms_new - mg_new * mg_new) + epsilon;
    const float mom_new = mom[i] * momentum + lr * g / sqrtf(denom);
    ms[i] = ms_new;
    mg[i] = mg_new;
    mom[i] = mom_new;
    var[i] = var[i] - mom_new;
  }
}

#undef TANDEM_GRID_STRIDE_LOOP

}  // namespace

cudaError_t LaunchApplyGradientDescent(float* var, const float* alpha, const float* delta,
                                       int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  GradientDescentKernel<<<LaunchGrid(n), kLaunchThreads, 0, stream>>>(var, alpha, delta, n);
  return cudaGetLastError();
}

cudaError_t LaunchApplyMomentum(float* var, float* accum, const float* lr, const float* grad,
                                const float* momentum, bool nesterov, int64_t n,
                                cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  MomentumKernel<<<LaunchGrid(n), kLaunchThreads, 0, stream>>>(var, accum, lr, grad, momentum,
                                                               nesterov, n);
  return cudaGetLastError();
}

cudaError_t LaunchApplyAdagrad(float* var, float* accum, const float* lr, const float* grad,
                               int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  AdagradKernel<<<LaunchGrid(n), kLaunchThreads, 0, stream>>>(var, accum, lr, grad, n);
  return cudaGetLastError();
}

cudaError_t LaunchApplyAdam(float* var, float* m, float* v, const float* beta1_power,
                            const float* beta2_power, const float* lr, const float* beta1,
                            const float* beta2, const float* epsilon, const float* grad,
                            bool nesterov, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  AdamKernel<<<LaunchGrid(n), kLaunchThreads, 0, stream>>>(
      var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, nesterov, n);
  return cudaGetLastError();
}

cudaError_t LaunchApplyRMSProp(float* var, float* ms, float* mom, const float* lr, const float* rho,
                               const float* momentum, const float* epsilon, const float* grad,
                               int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  RMSPropKernel<<<LaunchGrid(n), kLaunchThreads, 0, stream>>>(var, ms, mom, lr, rho, momentum,
                                                              epsilon, grad, n);
  return cudaGetLastError();
}

cudaError_t LaunchApplyCenteredRMSProp(float* var, float* mg, float* ms, float* mom,
                                       const float* lr, const float* rho, const float* momentum,
                                       const float* epsilon, const float* grad, int64_t n,
                                       cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  CenteredRMSPropKernel<<<LaunchGrid(n), kLaunchThreads, 0, stream>>>(var, mg, ms, mom, lr, rho,
                                                                      momentum, epsilon, grad, n);
  return cudaGetLastError();
}

}  // namespace tandem::gpu

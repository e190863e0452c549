// tests/framework/gpu/gpu_test_util.h
//
// GPU tests run only in a process that sees a GPU: TANDEM_SKIP_WITHOUT_GPU() skips the
// test with the reason otherwise.
#ifndef TANDEM_TESTS_FRAMEWORK_GPU_GPU_TEST_UTIL_H_
#define TANDEM_TESTS_FRAMEWORK_GPU_GPU_TEST_UTIL_H_

#include "framework/kernels/cuda/cuda_kernels.h"
#include "gtest/gtest.h"

#define TANDEM_SKIP_WITHOUT_GPU()                                               \
  do {                                                                          \
    if (::tandem::gpu::VisibleGpus() == 0) {                                    \
      GTEST_SKIP() << "no GPU visible to this process: the GPU tests need one"; \
    }                                                                           \
  } while (0)

#endif  // TANDEM_TESTS_FRAMEWORK_GPU_GPU_TEST_UTIL_H_

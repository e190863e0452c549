// framework/core/denormal.h
//
// Denormal (subnormal) floats, below 1.2e-38 in float32, take a slow microcode path
// on x86: an op whose operands or results fall there runs many times slower. Training
// drives some gradients and Adam moments there, so a step slows down over a long run.
// tandem flushes them, as TensorFlow does, on every thread that runs kernels:
//   - flush to zero (FTZ): a denormal result is written as zero;
//   - denormals are zero (DAZ): a denormal operand is read as zero.
// Only values below 1.2e-38 in magnitude change (bfloat16 has the same range).
//
// Where it is set:
//   - ThreadPool threads, for their whole life (inter- and intra-op pools, input
//     pipelines);
//   - any other thread while an executor runs kernels on it (the caller of
//     Session::Run, a gRPC thread running a step on a ps), restored afterwards;
//   - OpenMP team threads (OmpParallelFor and oneDNN), which an executor sets once per
//     team (executor.cc) and which inherit it from the thread that creates them;
//   - the collective all-reduce's sums, on whatever thread receives the data.
// TANDEM_KEEP_DENORMALS=1 in the environment turns it off (to measure what it saves,
// or to reproduce results computed without it).
// On x86-64 these are the MXCSR's FTZ and DAZ bits; on AArch64, FPCR.FZ (which covers
// both). Elsewhere the functions do nothing and DenormalsFlushed() is false.
//
// Thread safety: each function acts on the calling thread's floating-point state.
#ifndef TANDEM_FRAMEWORK_CORE_DENORMAL_H_
#define TANDEM_FRAMEWORK_CORE_DENORMAL_H_

#include <cstdint>

namespace tandem {

// Sets FTZ and DAZ on the calling thread, for good.
void FlushDenormals();
// True when the calling thread flushes denormal results and operands.
bool DenormalsFlushed();

// Sets FTZ and DAZ for its lifetime and restores the thread's previous mode after.
class ScopedFlushDenormals {
 public:
  ScopedFlushDenormals();
  ~ScopedFlushDenormals();
  ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
  ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

 private:
  uint64_t saved_;
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_CORE_DENORMAL_H_

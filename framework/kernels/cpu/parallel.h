// framework/kernels/cpu/parallel.h
//
// How tandem's own CPU loops run in parallel inside one op. There are two mechanisms,
// both sized by the session's intra-op thread count ([run] intra_op_threads), and each
// loop uses the one whose reason applies to it:
//
//   OmpParallelFor   an OpenMP team: the threads that oneDNN's primitives run on. Used
//                    by the nn kernels that sit between primitives in a step
//                    (activations and their gradients, softmax, dropout, pooling, batch
//                    norm): after the primitive before them the team's threads are
//                    still spinning, so handing them a loop costs almost nothing.
//   PoolParallelFor  the step's intra-op ThreadPool (OpKernelContext::intra_op_pool).
//                    Used by element-wise math, reductions and the optimizers' updates:
//                    the ops a ps task runs for several workers' steps at once. Every
//                    thread that enters an OpenMP region gets a team of its own, so N
//                    concurrent callers would run N x intra_op_threads threads on the
//                    same cores; the pool is one set of threads shared by all callers.
//                    A step that runs its ops one at a time on its caller (a local
//                    session's default: no inter-op pool) has no such concurrency, and
//                    these loops run on the caller's OpenMP team there too.
//
// `train_bench --model parallel_for` times both on a 1M-element loop with one caller
// and with four concurrent callers.
//
// Both run a range of fewer than 2 x kParallelGrain elements inline on the caller.
//
// Thread safety: both may be called from any thread; fn runs concurrently on disjoint
// ranges and must not throw.
#ifndef TANDEM_FRAMEWORK_KERNELS_CPU_PARALLEL_H_
#define TANDEM_FRAMEWORK_KERNELS_CPU_PARALLEL_H_

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <functional>

#include "framework/core/thread_pool.h"
#include "framework/kernels/op_kernel.h"

namespace tandem {

// Elements per chunk of a cheap element-wise loop: below this, threads cost more than
// they save.
inline constexpr int64_t kParallelGrain = 32 * 1024;

// fn(begin, end) over disjoint chunks covering [0, n) on the calling thread's OpenMP
// team, at least `grain` items per chunk.
template <typename F>
void OmpParallelFor(int64_t n, int64_t grain, const F& fn) {
  if (n <= 0) return;
  const int threads =
      static_cast<int>(std::min<int64_t>(omp_get_max_threads(), n / std::max<int64_t>(grain, 1)));
  if (threads <= 1) {
    fn(int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t begin = n * t / nt, end = n * (t + 1) / nt;
    if (begin < end) fn(begin, end);
  }
}

// fn(begin, end) over chunks of at least `grain` items on `pool` and the caller;
// inline when `pool` is null.
inline void PoolParallelFor(ThreadPool* pool, int64_t n, int64_t grain,
                            const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (pool == nullptr) {
    fn(0, n);
    return;
  }
  pool->ParallelFor(n, std::max<int64_t>(grain, 1), fn);
}
// On the step's intra-op pool, or on the caller's OpenMP team when the step runs its
// ops one at a time (StepContext::ops_one_at_a_time): nothing else applies updates
// beside it then, and the team's threads, still spinning after the last oneDNN
// primitive, would keep a pool thread off the cores (on 2 vCPUs the caller ended up
// running every chunk itself: Adam on fashion_cnn's dense layer took 3.0 ms at 1 and
// at 2 threads).
inline void PoolParallelFor(const OpKernelContext& ctx, int64_t n, int64_t grain,
                            const std::function<void(int64_t, int64_t)>& fn) {
  if (ctx.step().ops_one_at_a_time) {
    OmpParallelFor(n, grain, fn);
    return;
  }
  PoolParallelFor(ctx.intra_op_pool(), n, grain, fn);
}

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_KERNELS_CPU_PARALLEL_H_

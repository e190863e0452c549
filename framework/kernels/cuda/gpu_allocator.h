// framework/kernels/cuda/gpu_allocator.h
//
// GpuAllocator: the caching allocator of one GPU. Blocks are taken from cudaMalloc in
// size classes (multiples of 512 bytes up to 1 MiB, then quarter powers of two) and
// kept in per-class free lists when tensors release them, so a steady training step
// calls cudaMalloc no more. Reuse is stream-ordered: every kernel of the GPU runs on
// its one compute stream (gpu_context.h), so a freed block handed to a later kernel is
// used only after the kernels that used it before. The bytes held (in use plus cached)
// stay under `limit` (a fraction of the GPU's memory); when a request would pass it,
// or cudaMalloc fails, the cached blocks are released and the request is tried once
// more before Allocate returns null.
//
// Thread safety: every method may be called from any thread.
#ifndef TANDEM_FRAMEWORK_KERNELS_CUDA_GPU_ALLOCATOR_H_
#define TANDEM_FRAMEWORK_KERNELS_CUDA_GPU_ALLOCATOR_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "framework/tensor/allocator.h"

namespace tandem::gpu {

class GpuAllocator : public DeviceAllocator {
 public:
  GpuAllocator(int ordinal, cudaStream_t stream, size_t limit);
  ~GpuAllocator() override;

  void* Allocate(size_t bytes, size_t* capacity) override;
  void Deallocate(void* p, size_t capacity) override;
  absl::Status CopyToHost(const void* device_src, void* host_dst, size_t bytes) override;
  absl::Status CopyFromHost(const void* host_src, void* device_dst, size_t bytes) override;
  absl::Status CopyOnDevice(const void* device_src, void* device_dst, size_t bytes) override;
  const std::string& name() const override { return name_; }
  std::string UsageString() const override;

  struct Stats {
    int64_t in_use = 0;  // Bytes in live tensors.
    int64_t peak_in_use = 0;
    int64_t cached = 0;  // Bytes in free lists.
    int64_t limit = 0;
    int64_t mallocs = 0;  // cudaMalloc calls so far.
  };
  Stats GetStats() const;
  // The size class of a request.
  static size_t RoundUp(size_t bytes);

 private:
  void ReleaseCachedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int ordinal_;
  const cudaStream_t stream_;
  const std::string name_;
  mutable absl::Mutex mu_;
  std::map<size_t, std::vector<void*>> free_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::gpu

#endif  // TANDEM_FRAMEWORK_KERNELS_CUDA_GPU_ALLOCATOR_H_

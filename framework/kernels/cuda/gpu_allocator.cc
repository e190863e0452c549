// GpuAllocator: size classes, free lists and the limit (see gpu_allocator.h).
#include "framework/kernels/cuda/gpu_allocator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/kernels/cuda/gpu_context.h"
#include "glog/logging.h"

namespace tandem::gpu {

GpuAllocator::GpuAllocator(int ordinal, cudaStream_t stream, size_t limit)
    : ordinal_(ordinal), stream_(stream), name_(absl::StrCat("GPU:", ordinal)) {
  stats_.limit = static_cast<int64_t>(limit);
}

GpuAllocator::~GpuAllocator() {
  absl::MutexLock lock(&mu_);
  ReleaseCachedLocked();
}

size_t GpuAllocator::RoundUp(size_t bytes) {
  constexpr size_t kSmall = 512, kLarge = size_t{1} << 20;
  if (bytes == 0) return kSmall;
  if (bytes <= kLarge) return (bytes + kSmall - 1) / kSmall * kSmall;
  // Quarter powers of two: 1, 1.25, 1.5, 1.75 times the power of two below.
  size_t p = kLarge;
  while (p * 2 <= bytes) p *= 2;
  size_t quarter = p / 4;
  return (bytes + quarter - 1) / quarter * quarter;
}

void* GpuAllocator::Allocate(size_t bytes, size_t* capacity) {
  const size_t size = RoundUp(bytes);
  *capacity = size;
  absl::MutexLock lock(&mu_);
  auto it = free_.find(size);
  if (it != free_.end() && !it->second.empty()) {
    void* p = it->second.back();
    it->second.pop_back();
    stats_.cached -= static_cast<int64_t>(size);
    stats_.in_use += static_cast<int64_t>(size);
    stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
    return p;
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool fits = stats_.in_use + stats_.cached + static_cast<int64_t>(size) <= stats_.limit;
    void* p = nullptr;
    if (fits) {
      cudaError_t e = cudaSetDevice(ordinal_);
      if (e == cudaSuccess) e = cudaMalloc(&p, size);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();  // cudaMalloc's failure is not sticky; clear it.
        p = nullptr;
      }
    }
    if (p != nullptr) {
      ++stats_.mallocs;
      stats_.in_use += static_cast<int64_t>(size);
      stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
      return p;
    }
    if (stats_.cached == 0) break;
    ReleaseCachedLocked();
  }
  return nullptr;
}

void GpuAllocator::Deallocate(void* p, size_t capacity) {
  if (p == nullptr) return;
  absl::MutexLock lock(&mu_);
  free_[capacity].push_back(p);
  stats_.in_use -= static_cast<int64_t>(capacity);
  stats_.cached += static_cast<int64_t>(capacity);
}

void GpuAllocator::ReleaseCachedLocked() {
  if (stats_.cached == 0) return;
  // Blocks in the free lists may still be read by queued kernels of their last owner.
  cudaError_t e = cudaSetDevice(ordinal_);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream_);
  LOG_IF(ERROR, e != cudaSuccess) << "GPU:" << ordinal_ << ": " << cudaGetErrorString(e);
  for (auto& [size, blocks] : free_) {
    for (void* p : blocks) cudaFree(p);
  }
  free_.clear();
  stats_.cached = 0;
}

absl::Status GpuAllocator::CopyToHost(const void* device_src, void* host_dst, size_t bytes) {
  TANDEM_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ordinal_), "cudaSetDevice"));
  TANDEM_RETURN_IF_ERROR(
      CudaStatus(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, stream_),
                 absl::StrCat("copying ", bytes, " bytes from ", name_, " to the host")));
  return CudaStatus(cudaStreamSynchronize(stream_), absl::StrCat("waiting for ", name_));
}

absl::Status GpuAllocator::CopyFromHost(const void* host_src, void* device_dst, size_t bytes) {
  TANDEM_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ordinal_), "cudaSetDevice"));
  // From pageable memory the call returns once the source is staged, so the host
  // buffer may be reused at once; later kernels on the stream see the bytes.
  return CudaStatus(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, stream_),
                    absl::StrCat("copying ", bytes, " bytes from the host to ", name_));
}

absl::Status GpuAllocator::CopyOnDevice(const void* device_src, void* device_dst, size_t bytes) {
  TANDEM_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ordinal_), "cudaSetDevice"));
  return CudaStatus(
      cudaMemcpyAsync(device_dst, device_src, bytes, cudaMemcpyDeviceToDevice, stream_),
      absl::StrCat("copying ", bytes, " bytes on ", name_));
}

std::string GpuAllocator::UsageString() const {
  Stats s = GetStats();
  return absl::StrCat(s.in_use, " bytes in use and ", s.cached, " cached of a limit of ", s.limit,
                      " bytes");
}

GpuAllocator::Stats GpuAllocator::GetStats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace tandem::gpu

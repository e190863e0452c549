// framework/tensor/allocator.h
//
// The host allocator behind tensor buffers: 64-byte-aligned blocks, recycled through
// per-size-class free lists so that a steady-state training step allocates nothing
// from the system. Sizes round up to a class (multiples of 64 bytes up to 4 KiB,
// then quarter powers of two); at most kMaxCachedBytes are held in free lists.
//
// Blocks of kHugePagesFromBytes (32 MiB) or more are mapped afresh (mmap) on a 2 MiB
// boundary and ask the kernel for transparent huge pages before their first touch
// (madvise MADV_HUGEPAGE; what the system's
// /sys/kernel/mm/transparent_hugepage/enabled allows: "never" turns them off). Such a
// block is a data set or a model's largest tensors, beyond what the TLB reaches in
// 4 KiB pages (2,048 entries, 8 MiB, on Sapphire Rapids): a shuffled batch's rows, read
// from anywhere in Fashion-MNIST's 188 MB float32 training set, each miss it. On the
// AMX Xeon VM the gather took 69 us a batch in huge pages against 86 us in small ones
// (estimator_bench --only pipeline). Smaller blocks stay in small pages: they gain
// little, and where the system's defrag setting is "madvise" (the common default)
// advised memory may stall its first touch compacting memory.
//
// Thread safety: Allocate and Deallocate may be called from any thread.
#ifndef TANDEM_FRAMEWORK_TENSOR_ALLOCATOR_H_
#define TANDEM_FRAMEWORK_TENSOR_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "framework/tensor/dtype.h"

namespace tandem {

constexpr size_t kTensorAlignment = 64;
constexpr size_t kHugePageBytes = size_t{2} << 20;
constexpr size_t kHugePagesFromBytes = size_t{32} << 20;

class HostAllocator {
 public:
  static constexpr size_t kMaxCachedBytes = size_t{1} << 30;
  static HostAllocator* Get();

  // Returns a block of at least `bytes` bytes (its real size in *capacity), aligned to
  // kTensorAlignment; never null (aborts on out-of-memory like operator new).
  void* Allocate(size_t bytes, size_t* capacity);
  // `capacity` is the value Allocate returned.
  void Deallocate(void* p, size_t capacity);

  struct Stats {
    int64_t system_allocations = 0;  // Blocks obtained from the system so far.
    int64_t cached_bytes = 0;
  };
  Stats GetStats();

 private:
  HostAllocator() = default;
};

// Memory other than the host's (a GPU's) that tensor buffers can live in. A Tensor made
// with one (Tensor::OnDevice) returns its bytes to it when the last reference goes, and
// its bytes reach the host only through CopyToHost. The allocator orders its copies
// after the device work already queued, so a tensor's bytes are read only once the
// kernels that wrote them are done.
//
// Thread safety: every method may be called from any thread.
class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  // A block of at least `bytes` (its real size in *capacity), or null when the device
  // has no room for it within its limit.
  virtual void* Allocate(size_t bytes, size_t* capacity) = 0;
  // `capacity` is the value Allocate returned.
  virtual void Deallocate(void* p, size_t capacity) = 0;
  // Blocking copies; they return once `dst` holds the bytes.
  virtual absl::Status CopyToHost(const void* device_src, void* host_dst, size_t bytes) = 0;
  virtual absl::Status CopyFromHost(const void* host_src, void* device_dst, size_t bytes) = 0;
  // Ordered after the device work already queued; need not have finished on return.
  virtual absl::Status CopyOnDevice(const void* device_src, void* device_dst, size_t bytes) = 0;
  // The device's short name, "GPU:0", for messages.
  virtual const std::string& name() const = 0;
  // "N bytes in use of a limit of M" for out-of-memory messages.
  virtual std::string UsageString() const = 0;
};

// The dtypes a device allocator holds: float32 and bfloat16. Tensors of every other
// dtype (indices, shapes, counters, bools) stay in host memory on every device, as
// TensorFlow keeps int32 tensors of GPU kernels in host memory: kernels read shapes
// and axes on the host, and a step moves only the floating-point data.
bool KeptOnDevice(DType dtype);

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_TENSOR_ALLOCATOR_H_

// framework/tensor/tensor.h
//
// Tensor: a dtype, a shape and a reference-counted, 64-byte-aligned buffer in host
// memory or, made with OnDevice, in a device's memory (a GPU's; see DeviceAllocator).
// data() of a device tensor is a device pointer, for device kernels only; ToHost()
// copies it out.
// Copying a Tensor shares the buffer (cheap); Slice() views a range of the outer
// dimension without copying. A default-constructed Tensor is "uninitialized" (dtype
// kInvalid). Resource tensors are scalars holding a ResourceHandle instead of bytes.
// String tensors (kString) hold std::string objects that their buffer constructs
// (empty) and destroys; they live on the host only, and whatever copies elements
// between tensors goes through CopyElements, which copies strings as objects.
//
// Thread safety: a Tensor object is a value; concurrent reads are safe, and writes
// through data() must be coordinated by the caller (kernels write only outputs they
// allocated, or buffers they hold the only reference to).
#ifndef TANDEM_FRAMEWORK_TENSOR_TENSOR_H_
#define TANDEM_FRAMEWORK_TENSOR_TENSOR_H_

#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "framework/tensor/dtype.h"
#include "framework/tensor/tensor_shape.h"
#include "glog/logging.h"

namespace tandem {

// Names a resource (a variable, an accumulator) living in some device's ResourceMgr.
struct ResourceHandle {
  std::string device;     // "/job:ps/replica:0/task:0/device:CPU:0"
  std::string container;  // "" is the default container.
  std::string name;
  std::string DebugString() const;
  bool operator==(const ResourceHandle& o) const {
    return device == o.device && container == o.container && name == o.name;
  }
};

class DeviceAllocator;  // framework/tensor/allocator.h

// An owned, aligned byte block from HostAllocator, or from a DeviceAllocator.
class TensorBuffer {
 public:
  explicit TensorBuffer(size_t bytes);
  // A block of `num_strings` empty std::string objects, destroyed with the buffer.
  static std::shared_ptr<TensorBuffer> Strings(int64_t num_strings);
  // Takes a block that `device` allocated.
  TensorBuffer(DeviceAllocator* device, char* data, size_t size, size_t capacity);
  ~TensorBuffer();
  TensorBuffer(const TensorBuffer&) = delete;
  TensorBuffer& operator=(const TensorBuffer&) = delete;
  char* data() const { return data_; }
  size_t size() const { return size_; }
  DeviceAllocator* device() const { return device_; }

 private:
  char* data_;
  size_t size_;
  size_t capacity_;
  DeviceAllocator* device_ = nullptr;  // Null: host memory. Not owned; outlives buffers.
  int64_t num_strings_ = 0;            // std::string objects constructed in data_.
};

class Tensor {
 public:
  Tensor() = default;
  // Allocates an uninitialised buffer. REQUIRES: dtype has a byte size.
  Tensor(DType dtype, const TensorShape& shape);

  template <typename T>
  static Tensor Scalar(T value) {
    Tensor t(DTypeOf<T>(), TensorShape());
    *t.data<T>() = value;
    return t;
  }
  // REQUIRES: values.size() == shape.num_elements().
  template <typename T>
  static Tensor FromVector(absl::Span<const T> values, const TensorShape& shape) {
    CHECK_EQ(static_cast<int64_t>(values.size()), shape.num_elements());
    Tensor t(DTypeOf<T>(), shape);
    if constexpr (std::is_same_v<T, std::string>) {
      for (size_t i = 0; i < values.size(); ++i) t.data<std::string>()[i] = values[i];
    } else if (!values.empty()) {
      std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(T));
    }
    return t;
  }
  static Tensor Resource(ResourceHandle handle);
  // An uninitialised tensor in `device`'s memory; RESOURCE_EXHAUSTED naming the bytes
  // and the device's usage when it has no room. REQUIRES: KeptOnDevice(dtype).
  static absl::StatusOr<Tensor> OnDevice(DType dtype, const TensorShape& shape,
                                         DeviceAllocator* device);
  // `host` copied into `device`'s memory. REQUIRES: host.on_host().
  static absl::StatusOr<Tensor> CopyToDevice(const Tensor& host, DeviceAllocator* device);
  // A tensor of `shape` with every element `value` cast to `dtype`. REQUIRES: a numeric
  // or bool dtype.
  static Tensor Filled(DType dtype, const TensorShape& shape, double value);

  bool IsInitialized() const { return dtype_ != DType::kInvalid; }
  // False when the bytes are in a device's memory.
  bool on_host() const { return buffer_ == nullptr || buffer_->device() == nullptr; }
  // The allocator of a device tensor; null on the host.
  DeviceAllocator* device_allocator() const { return buffer_ ? buffer_->device() : nullptr; }
  // This tensor when on the host, else a host copy of it (waits for the device).
  absl::StatusOr<Tensor> ToHost() const;
  DType dtype() const { return dtype_; }
  const TensorShape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_.dim(i); }
  int64_t NumElements() const { return shape_.num_elements(); }
  size_t TotalBytes() const { return static_cast<size_t>(NumElements()) * DTypeSize(dtype_); }

  template <typename T>
  T* data() const {
    CHECK(dtype_ == DTypeOf<T>()) << "tensor is " << DTypeName(dtype_) << ", accessed as "
                                  << DTypeName(DTypeOf<T>());
    return reinterpret_cast<T*>(raw_data());
  }
  template <typename T>
  absl::Span<T> flat() const {
    return absl::Span<T>(data<T>(), static_cast<size_t>(NumElements()));
  }
  template <typename T>
  T scalar() const {
    CHECK_EQ(NumElements(), 1) << "scalar() of shape " << shape_.DebugString();
    return *data<T>();
  }
  char* raw_data() const { return buffer_ ? buffer_->data() + offset_ : nullptr; }

  // Rows [start, limit) of the outer dimension, sharing the buffer.
  // REQUIRES: rank >= 1 and 0 <= start <= limit <= dim(0).
  Tensor Slice(int64_t start, int64_t limit) const;
  // Same bytes viewed with another shape of equal element count.
  Tensor Reshaped(const TensorShape& shape) const;
  // Bytes [offset, offset + n) of the buffer viewed as a uint8 vector, shared.
  // REQUIRES: not a resource or string tensor, and offset + n <= TotalBytes().
  Tensor ByteRange(size_t offset, size_t n) const;
  // A copy in a new buffer in the same memory (host or device).
  Tensor DeepCopy() const;
  bool SharesBufferWith(const Tensor& other) const {
    return buffer_ != nullptr && buffer_ == other.buffer_;
  }
  // True when no other Tensor references this buffer, so it may be reused in place.
  bool BufferIsUnique() const { return buffer_ != nullptr && buffer_.use_count() == 1; }

  // REQUIRES: dtype() == kResource.
  const ResourceHandle& resource_handle() const;

  // "float32[2,3] {1, 2, 3, 4, 5, 6}" with at most `max_entries` values; a device
  // tensor shows its device instead of values.
  std::string DebugString(int max_entries = 8) const;
  // Element i converted to double (numeric dtypes only, host tensors only), for tests
  // and debugging.
  double ValueAsDouble(int64_t i) const;
  // Element i of a string tensor. REQUIRES: dtype() == kString.
  const std::string& StringAt(int64_t i) const { return data<std::string>()[i]; }

 private:
  DType dtype_ = DType::kInvalid;
  TensorShape shape_;
  std::shared_ptr<TensorBuffer> buffer_;
  size_t offset_ = 0;
  std::shared_ptr<const ResourceHandle> handle_;
};

// Copies elements [src_begin, src_begin + n) of `src` into elements [dst_begin, ...) of
// `dst`: raw bytes for numeric and bool dtypes, string assignments for kString.
// REQUIRES: equal dtypes, host tensors, ranges in bounds, `dst` not shared with a reader.
void CopyElements(const Tensor& src, int64_t src_begin, Tensor& dst, int64_t dst_begin,
                  int64_t n);

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_TENSOR_TENSOR_H_

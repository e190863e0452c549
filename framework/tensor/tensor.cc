#include "framework/tensor/tensor.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "framework/tensor/allocator.h"

namespace tandem {

std::string ResourceHandle::DebugString() const {
  return absl::StrCat(device, ":", container.empty() ? "localhost" : container, "/", name);
}

TensorBuffer::TensorBuffer(size_t bytes) : size_(bytes) {
  data_ = static_cast<char*>(HostAllocator::Get()->Allocate(bytes, &capacity_));
}
TensorBuffer::TensorBuffer(DeviceAllocator* device, char* data, size_t size, size_t capacity)
    : data_(data), size_(size), capacity_(capacity), device_(device) {}
std::shared_ptr<TensorBuffer> TensorBuffer::Strings(int64_t num_strings) {
  auto buffer =
      std::make_shared<TensorBuffer>(static_cast<size_t>(num_strings) * sizeof(std::string));
  auto* p = reinterpret_cast<std::string*>(buffer->data_);
  for (int64_t i = 0; i < num_strings; ++i) new (p + i) std::string();
  buffer->num_strings_ = num_strings;
  return buffer;
}

TensorBuffer::~TensorBuffer() {
  if (num_strings_ > 0) {
    auto* p = reinterpret_cast<std::string*>(data_);
    for (int64_t i = 0; i < num_strings_; ++i) p[i].~basic_string();
  }
  if (device_ != nullptr) {
    device_->Deallocate(data_, capacity_);
  } else {
    HostAllocator::Get()->Deallocate(data_, capacity_);
  }
}

Tensor::Tensor(DType dtype, const TensorShape& shape) : dtype_(dtype), shape_(shape) {
  CHECK(DTypeSize(dtype) > 0) << "cannot allocate a tensor of " << DTypeName(dtype);
  buffer_ = dtype == DType::kString ? TensorBuffer::Strings(NumElements())
                                    : std::make_shared<TensorBuffer>(TotalBytes());
}

Tensor Tensor::Resource(ResourceHandle handle) {
  Tensor t;
  t.dtype_ = DType::kResource;
  t.handle_ = std::make_shared<const ResourceHandle>(std::move(handle));
  return t;
}

absl::StatusOr<Tensor> Tensor::OnDevice(DType dtype, const TensorShape& shape,
                                        DeviceAllocator* device) {
  CHECK(KeptOnDevice(dtype)) << DTypeName(dtype) << " tensors live in host memory";
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  size_t bytes = t.TotalBytes();
  size_t capacity = 0;
  void* p = device->Allocate(bytes, &capacity);
  if (p == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "out of memory on ", device->name(), " allocating ", bytes, " bytes for a ",
        DTypeName(dtype), shape.DebugString(), " tensor (", device->UsageString(), ")"));
  }
  t.buffer_ = std::make_shared<TensorBuffer>(device, static_cast<char*>(p), bytes, capacity);
  return t;
}

absl::StatusOr<Tensor> Tensor::CopyToDevice(const Tensor& host, DeviceAllocator* device) {
  CHECK(host.on_host()) << "CopyToDevice of a device tensor";
  absl::StatusOr<Tensor> t = OnDevice(host.dtype(), host.shape(), device);
  if (!t.ok() || host.TotalBytes() == 0) return t;
  absl::Status s = device->CopyFromHost(host.raw_data(), t->raw_data(), host.TotalBytes());
  if (!s.ok()) return s;
  return t;
}

absl::StatusOr<Tensor> Tensor::ToHost() const {
  if (on_host()) return *this;
  Tensor t(dtype_, shape_);
  if (TotalBytes() > 0) {
    absl::Status s = buffer_->device()->CopyToHost(raw_data(), t.raw_data(), TotalBytes());
    if (!s.ok()) return s;
  }
  return t;
}

Tensor Tensor::Filled(DType dtype, const TensorShape& shape, double value) {
  Tensor t(dtype, shape);
  int64_t n = t.NumElements();
#define TANDEM_FILL_(T)                                           \
  {                                                               \
    T* p = t.data<T>();                                           \
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(value); \
  }
  switch (dtype) {
    case DType::kBool: {
      bool* p = t.data<bool>();
      for (int64_t i = 0; i < n; ++i) p[i] = value != 0;
      break;
    }
    case DType::kBFloat16: {
      bfloat16* p = t.data<bfloat16>();
      for (int64_t i = 0; i < n; ++i) p[i] = bfloat16(static_cast<float>(value));
      break;
    }
    default:
      TANDEM_SWITCH_NUMERIC(dtype, TANDEM_FILL_, LOG(FATAL) << "Filled: bad dtype");
  }
#undef TANDEM_FILL_
  return t;
}

Tensor Tensor::Slice(int64_t start, int64_t limit) const {
  CHECK_GE(rank(), 1);
  CHECK(0 <= start && start <= limit && limit <= dim(0))
      << "Slice [" << start << "," << limit << ") of " << shape_.DebugString();
  Tensor t = *this;
  int64_t row = dim(0) == 0 ? 0 : NumElements() / dim(0);
  t.shape_.set_dim(0, limit - start);
  t.offset_ = offset_ + static_cast<size_t>(start * row) * DTypeSize(dtype_);
  return t;
}

Tensor Tensor::ByteRange(size_t offset, size_t n) const {
  CHECK(dtype_ != DType::kResource && dtype_ != DType::kString)
      << "ByteRange of a " << DTypeName(dtype_) << " tensor";
  CHECK_LE(offset + n, TotalBytes())
      << "ByteRange [" << offset << ", " << offset + n << ") of " << TotalBytes() << " bytes";
  Tensor t = *this;
  t.dtype_ = DType::kUInt8;
  t.shape_ = TensorShape({static_cast<int64_t>(n)});
  t.offset_ = offset_ + offset;
  return t;
}

Tensor Tensor::Reshaped(const TensorShape& shape) const {
  CHECK_EQ(shape.num_elements(), NumElements())
      << "Reshaped " << shape_.DebugString() << " to " << shape.DebugString();
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::DeepCopy() const {
  if (dtype_ == DType::kResource || !IsInitialized()) return *this;
  if (!on_host()) {
    DeviceAllocator* device = buffer_->device();
    absl::StatusOr<Tensor> t = OnDevice(dtype_, shape_, device);
    CHECK(t.ok()) << "DeepCopy: " << t.status();
    if (TotalBytes() > 0) {
      absl::Status s = device->CopyOnDevice(raw_data(), t->raw_data(), TotalBytes());
      CHECK(s.ok()) << "DeepCopy: " << s;
    }
    return *std::move(t);
  }
  Tensor t(dtype_, shape_);
  CopyElements(*this, 0, t, 0, NumElements());
  return t;
}

void CopyElements(const Tensor& src, int64_t src_begin, Tensor& dst, int64_t dst_begin,
                  int64_t n) {
  DCHECK(src.dtype() == dst.dtype());
  DCHECK(src_begin >= 0 && src_begin + n <= src.NumElements());
  DCHECK(dst_begin >= 0 && dst_begin + n <= dst.NumElements());
  if (n <= 0) return;
  if (src.dtype() == DType::kString) {
    const std::string* from = src.data<std::string>() + src_begin;
    std::string* to = dst.data<std::string>() + dst_begin;
    for (int64_t i = 0; i < n; ++i) to[i] = from[i];
    return;
  }
  const size_t size = DTypeSize(src.dtype());
  std::memcpy(dst.raw_data() + static_cast<size_t>(dst_begin) * size,
              src.raw_data() + static_cast<size_t>(src_begin) * size, static_cast<size_t>(n) * size);
}

const ResourceHandle& Tensor::resource_handle() const {
  CHECK(dtype_ == DType::kResource && handle_) << "not a resource tensor";
  return *handle_;
}

double Tensor::ValueAsDouble(int64_t i) const {
  CHECK(on_host()) << "ValueAsDouble of a tensor on " << buffer_->device()->name();
  switch (dtype_) {
    case DType::kFloat:
      return data<float>()[i];
    case DType::kBFloat16:
      return static_cast<float>(data<bfloat16>()[i]);
    case DType::kInt32:
      return data<int32_t>()[i];
    case DType::kInt64:
      return static_cast<double>(data<int64_t>()[i]);
    case DType::kUInt8:
      return data<uint8_t>()[i];
    case DType::kBool:
      return data<bool>()[i] ? 1 : 0;
    default:
      LOG(FATAL) << "ValueAsDouble on " << DTypeName(dtype_);
  }
}

std::string Tensor::DebugString(int max_entries) const {
  if (!IsInitialized()) return "<uninitialized tensor>";
  if (dtype_ == DType::kResource) return absl::StrCat("resource ", handle_->DebugString());
  std::string s = absl::StrCat(DTypeName(dtype_), shape_.DebugString(), " {");
  if (!on_host()) return absl::StrCat(s, "on ", buffer_->device()->name(), "}");
  int64_t n = std::min<int64_t>(NumElements(), max_entries);
  for (int64_t i = 0; i < n; ++i) {
    if (dtype_ == DType::kString) {
      absl::StrAppend(&s, i ? ", " : "", "\"", absl::CHexEscape(StringAt(i)), "\"");
    } else {
      absl::StrAppend(&s, i ? ", " : "", ValueAsDouble(i));
    }
  }
  if (NumElements() > n) absl::StrAppend(&s, ", ...");
  return s + "}";
}

}  // namespace tandem

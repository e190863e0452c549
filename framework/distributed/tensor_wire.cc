#include "framework/distributed/tensor_wire.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/protos/wire.pb.h"

namespace tandem {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the wire format is little-endian; big-endian hosts need a byte swap here");

absl::Status WireError(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed RPC message: ", what));
}

// Reads bytes sequentially across chunks.
class ChunkReader {
 public:
  explicit ChunkReader(absl::Span<const absl::string_view> chunks) : chunks_(chunks) {
    for (absl::string_view c : chunks) remaining_ += c.size();
  }
  uint64_t remaining() const { return remaining_; }
  // Copies `n` bytes to `out`; REQUIRES n <= remaining().
  void Read(char* out, uint64_t n) {
    remaining_ -= n;
    while (n > 0) {
      absl::string_view c = chunks_[index_].substr(offset_);
      uint64_t take = std::min<uint64_t>(n, c.size());
      if (take > 0) std::memcpy(out, c.data(), take);
      out += take;
      n -= take;
      offset_ += take;
      if (offset_ == chunks_[index_].size()) {
        ++index_;
        offset_ = 0;
      }
    }
  }

 private:
  absl::Span<const absl::string_view> chunks_;
  size_t index_ = 0;
  size_t offset_ = 0;
  uint64_t remaining_ = 0;
};

// Validates one tensor description; returns the tensor to fill (allocated only once
// its byte count is known to be present).
absl::StatusOr<Tensor> AllocateFor(const proto::WireTensor& w, int i, uint64_t available) {
  if (!IsValidDType(w.dtype())) {
    return WireError(absl::StrCat("tensor ", i, " has unknown dtype ", w.dtype()));
  }
  DType dtype = static_cast<DType>(w.dtype());
  auto shape = TensorShape::Create(absl::MakeConstSpan(w.dim().data(), w.dim_size()));
  if (!shape.ok()) return WireError(absl::StrCat("tensor ", i, ": ", shape.status().message()));
  if (dtype == DType::kResource) {
    if (shape->num_elements() != 1 || w.num_bytes() != 0) {
      return WireError(absl::StrCat("resource tensor ", i, " must be one handle and no bytes"));
    }
    const auto& h = w.resource();
    return Tensor::Resource({h.device(), h.container(), h.name()});
  }
  if (dtype == DType::kString) {
    if (w.num_bytes() != 0 || w.string_val_size() != shape->num_elements()) {
      return WireError(absl::StrCat("string tensor ", i, " of shape ", shape->DebugString(),
                                    " must carry its ", shape->num_elements(),
                                    " strings in the envelope and no bytes; it has ",
                                    w.string_val_size(), " and ", w.num_bytes()));
    }
    Tensor t(dtype, *shape);
    for (int k = 0; k < w.string_val_size(); ++k) t.data<std::string>()[k] = w.string_val(k);
    return t;
  }
  if (w.string_val_size() > 0) {
    return WireError(absl::StrCat("tensor ", i, " of ", DTypeName(dtype), " carries strings"));
  }
  uint64_t want = static_cast<uint64_t>(shape->num_elements()) * DTypeSize(dtype);
  if (w.num_bytes() != want) {
    return WireError(absl::StrCat("tensor ", i, " of ", DTypeName(dtype), shape->DebugString(),
                                  " needs ", want, " bytes, the message says ", w.num_bytes()));
  }
  if (want > available) {
    return WireError(
        absl::StrCat("tensor ", i, " needs ", want, " bytes, only ", available, " remain"));
  }
  return Tensor(dtype, *shape);
}

}  // namespace

std::string EncodeWireHead(const google::protobuf::MessageLite& body,
                           absl::Span<const Tensor> tensors) {
  proto::WireEnvelope env;
  body.SerializeToString(env.mutable_body());
  for (const Tensor& t : tensors) {
    proto::WireTensor* w = env.add_tensors();
    w->set_dtype(static_cast<proto::DataType>(t.dtype()));
    for (int64_t d : t.shape().dims()) w->add_dim(d);
    if (t.dtype() == DType::kResource) {
      const ResourceHandle& h = t.resource_handle();
      w->mutable_resource()->set_device(h.device);
      w->mutable_resource()->set_container(h.container);
      w->mutable_resource()->set_name(h.name);
    } else if (t.dtype() == DType::kString) {
      for (int64_t k = 0; k < t.NumElements(); ++k) w->add_string_val(t.StringAt(k));
    } else {
      w->set_num_bytes(t.TotalBytes());
    }
  }
  std::string env_bytes = env.SerializeAsString();
  std::string head(4, '\0');
  uint32_t n = static_cast<uint32_t>(env_bytes.size());
  std::memcpy(head.data(), &n, 4);
  head += env_bytes;
  return head;
}

std::string EncodeWireFlat(const google::protobuf::MessageLite& body,
                           absl::Span<const Tensor> tensors) {
  std::string out = EncodeWireHead(body, tensors);
  for (const Tensor& t : tensors) {
    if (HasWireBytes(t.dtype())) out.append(t.raw_data(), t.TotalBytes());
  }
  return out;
}

absl::Status DecodeWire(absl::Span<const absl::string_view> chunks,
                        google::protobuf::MessageLite* body, std::vector<Tensor>* tensors) {
  ChunkReader in(chunks);
  if (in.remaining() < 4) return WireError("shorter than its 4-byte length prefix");
  uint32_t n = 0;
  in.Read(reinterpret_cast<char*>(&n), 4);
  if (n > in.remaining()) {
    return WireError(
        absl::StrCat("envelope of ", n, " bytes but only ", in.remaining(), " bytes follow"));
  }
  std::string env_bytes(n, '\0');
  in.Read(env_bytes.data(), n);
  proto::WireEnvelope env;
  if (!env.ParseFromString(env_bytes)) return WireError("envelope does not parse");
  if (!body->ParseFromString(env.body())) {
    return WireError(absl::StrCat("body does not parse as ", body->GetTypeName()));
  }
  tensors->clear();
  tensors->reserve(env.tensors_size());
  for (int i = 0; i < env.tensors_size(); ++i) {
    TANDEM_ASSIGN_OR_RETURN(Tensor t, AllocateFor(env.tensors(i), i, in.remaining()));
    if (HasWireBytes(t.dtype()) && t.TotalBytes() > 0) {
      in.Read(t.raw_data(), t.TotalBytes());
      if (t.dtype() == DType::kBool) {
        const unsigned char* b = reinterpret_cast<const unsigned char*>(t.raw_data());
        for (size_t k = 0; k < t.TotalBytes(); ++k) {
          if (b[k] > 1) return WireError(absl::StrCat("bool tensor ", i, " holds a byte > 1"));
        }
      }
    }
    tensors->push_back(std::move(t));
  }
  if (in.remaining() != 0) {
    return WireError(absl::StrCat(in.remaining(), " bytes after the last tensor"));
  }
  return absl::OkStatus();
}

}  // namespace tandem

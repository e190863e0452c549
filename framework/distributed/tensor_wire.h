// framework/distributed/tensor_wire.h
//
// The byte format of every tandem RPC message: a typed proto plus the tensors that
// travel beside it, with tensor data as raw little-endian bytes (no per-element
// encoding, no size cliff: nothing here is limited to protobuf's 2 GiB). String
// tensors (input features, a few per step) travel inside the envelope instead.
//
//   [uint32 LE n][n bytes: WireEnvelope {body, tensors[i] = dtype, dims, num_bytes}]
//   [tensor 0 bytes][tensor 1 bytes]...
//
// The encoder returns only the head (length + envelope) so a transport can send each
// tensor's buffer as its own zero-copy slice after it. The decoder reads the message
// from any sequence of chunks (gRPC slices), treats the bytes as untrusted and copies
// each tensor exactly once, into a fresh aligned buffer: a wrong length, an unknown
// dtype, a bad or oversize shape (checked before anything is allocated), a byte count
// that does not match, trailing or missing bytes and non-0/1 bools are
// INVALID_ARGUMENT naming what is wrong.
//
// Thread safety: pure functions.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_TENSOR_WIRE_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_TENSOR_WIRE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "framework/tensor/tensor.h"
#include "google/protobuf/message_lite.h"

namespace tandem {

// A message of an RPC: its proto and the tensors that go with it.
template <typename P>
struct WireMessage {
  P proto;
  std::vector<Tensor> tensors;
};

// Whether a tensor of `dtype` travels as raw bytes after the head. Resource handles
// and strings travel inside the envelope.
inline bool HasWireBytes(DType dtype) {
  return dtype != DType::kResource && dtype != DType::kString;
}

// The head of a message (length prefix and envelope). The raw bytes (Tensor::raw_data,
// TotalBytes) of the tensors with HasWireBytes must follow it in order.
std::string EncodeWireHead(const google::protobuf::MessageLite& body,
                           absl::Span<const Tensor> tensors);
// Head and tensor bytes in one string (in-process tests, fuzzing).
std::string EncodeWireFlat(const google::protobuf::MessageLite& body,
                           absl::Span<const Tensor> tensors);

// Parses a message spread over `chunks`, in order.
absl::Status DecodeWire(absl::Span<const absl::string_view> chunks,
                        google::protobuf::MessageLite* body, std::vector<Tensor>* tensors);

template <typename P>
std::string EncodeWireFlat(const WireMessage<P>& m) {
  return EncodeWireFlat(m.proto, m.tensors);
}
template <typename P>
absl::Status DecodeWireFlat(absl::string_view bytes, WireMessage<P>* m) {
  absl::string_view chunk = bytes;
  return DecodeWire(absl::MakeConstSpan(&chunk, 1), &m->proto, &m->tensors);
}

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_TENSOR_WIRE_H_

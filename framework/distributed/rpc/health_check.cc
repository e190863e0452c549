// framework/distributed/rpc/health_check.cc
#include "framework/distributed/rpc/health_check.h"

#include <chrono>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/distributed/rpc/grpc_clients.h"
#include "framework/distributed/rpc/grpc_util.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace tandem {
namespace {

// Reads a protobuf varint at bytes[*i].
bool ReadVarint(const std::string& bytes, size_t* i, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*i >= bytes.size()) return false;
    const uint8_t b = static_cast<uint8_t>(bytes[(*i)++]);
    *value |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

std::string BufferBytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (!buffer.Dump(&slices).ok()) return bytes;
  for (const grpc::Slice& s : slices)
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return bytes;
}

// HealthCheckResponse { ServingStatus status = 1; }: one varint field, or nothing (0).
absl::StatusOr<ServingStatus> DecodeResponse(const std::string& bytes) {
  uint64_t status = 0;
  for (size_t i = 0; i < bytes.size();) {
    uint64_t key = 0, value = 0;
    if (!ReadVarint(bytes, &i, &key) || (key & 7) != 0 || !ReadVarint(bytes, &i, &value)) {
      return absl::InternalError("the health check reply is not a HealthCheckResponse");
    }
    if ((key >> 3) == 1) status = value;
  }
  if (status > 3) return absl::InternalError(absl::StrCat("health check reply: status ", status));
  return static_cast<ServingStatus>(status);
}

// HealthCheckRequest bytes -> its service name; INVALID_ARGUMENT when malformed.
absl::StatusOr<std::string> DecodeHealthCheckRequest(const std::string& bytes) {
  // HealthCheckRequest { string service = 1; }
  std::string service;
  for (size_t i = 0; i < bytes.size();) {
    uint64_t key = 0, value = 0;
    if (!ReadVarint(bytes, &i, &key)) return absl::InvalidArgumentError("bad HealthCheckRequest");
    switch (key & 7) {
      case 0:
        if (!ReadVarint(bytes, &i, &value))
          return absl::InvalidArgumentError("bad HealthCheckRequest");
        break;
      case 2:
        if (!ReadVarint(bytes, &i, &value) || value > bytes.size() - i) {
          return absl::InvalidArgumentError("bad HealthCheckRequest");
        }
        if ((key >> 3) == 1) service = bytes.substr(i, value);
        i += value;
        break;
      default:
        return absl::InvalidArgumentError("bad HealthCheckRequest");
    }
  }
  return service;
}

}  // namespace

grpc::Status AnswerHealthCheck(const grpc::ByteBuffer& in, bool serving, grpc::ByteBuffer* out) {
  absl::StatusOr<std::string> service = DecodeHealthCheckRequest(BufferBytes(in));
  if (!service.ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        std::string(service.status().message()));
  }
  if (!service->empty() && *service != "tandem.WorkerService" &&
      *service != "tandem.MasterService") {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("unknown service ", *service));
  }
  // HealthCheckResponse { status: SERVING (1) or NOT_SERVING (2) }.
  const char bytes[2] = {
      '\x08', static_cast<char>(serving ? ServingStatus::kServing : ServingStatus::kNotServing)};
  grpc::Slice slice(bytes, sizeof(bytes));
  *out = grpc::ByteBuffer(&slice, 1);
  return grpc::Status::OK;
}

absl::StatusOr<ServingStatus> CheckHealth(const std::string& address,
                                          const TransportSecurity& security, int64_t timeout_ms) {
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                          NewGrpcChannel(address, security));
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  grpc::CompletionQueue cq;
  // HealthCheckRequest { service: "" }: a message of no bytes (a ByteBuffer without a
  // slice would send no message at all).
  grpc::Slice empty(std::string{});
  const grpc::ByteBuffer request(&empty, 1);
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
      stub.PrepareUnaryCall(&context, kHealthCheckMethod, request, &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  if (!cq.Next(&tag, &ok) || !ok) return absl::InternalError("health check: the call did not end");
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        absl::StrCat("health check of ", address, ": ", status.error_message()));
  }
  return DecodeResponse(BufferBytes(response));
}

}  // namespace tandem

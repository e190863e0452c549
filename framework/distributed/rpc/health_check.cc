// framework/distributed/rpc/health_check.cc
#include "framework/distributed/rpc/health_check.h"

#include <chrono>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/distributed/rpc/grpc_clients.h"
#include "framework/distributed/rpc/grpc_util.h"
#include "framework/protos/health.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace tandem {
namespace {

std::string BufferBytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (!buffer.Dump(&slices).ok()) return bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return bytes;
}

grpc::ByteBuffer MessageBuffer(const google::protobuf::MessageLite& message) {
  // Always one slice, so an empty message is still sent as a message.
  grpc::Slice slice(message.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace

grpc::Status AnswerHealthCheck(const grpc::ByteBuffer& in, bool serving, grpc::ByteBuffer* out) {
  proto::HealthCheckRequest request;
  if (!request.ParseFromString(BufferBytes(in))) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad HealthCheckRequest");
  }
  const std::string& service = request.service();
  if (!service.empty() && service != "tandem.WorkerService" && service != "tandem.MasterService") {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("unknown service ", service));
  }
  proto::HealthCheckResponse response;
  response.set_status(serving ? proto::HealthCheckResponse::SERVING
                              : proto::HealthCheckResponse::NOT_SERVING);
  *out = MessageBuffer(response);
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
  const grpc::ByteBuffer request = MessageBuffer(proto::HealthCheckRequest());
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
  proto::HealthCheckResponse reply;
  if (!reply.ParseFromString(BufferBytes(response)) ||
      !proto::HealthCheckResponse::ServingStatus_IsValid(reply.status())) {
    return absl::InternalError(
        absl::StrCat("health check of ", address, ": the reply is not a HealthCheckResponse"));
  }
  return static_cast<ServingStatus>(reply.status());
}

}  // namespace tandem

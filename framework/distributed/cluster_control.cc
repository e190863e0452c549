// framework/distributed/cluster_control.cc
#include "framework/distributed/cluster_control.h"

#include <memory>

#include "framework/core/status.h"
#include "framework/distributed/rpc/grpc_clients.h"

namespace tandem {
namespace {

template <typename Req, typename Resp>
absl::Status CallTask(const std::string& address, const TransportSecurity& security,
                      int64_t timeout_ms,
                      void (WorkerInterface::*method)(CallOptions*, const WireMessage<Req>*,
                                                      WireMessage<Resp>*, StatusCallback),
                      const WireMessage<Req>& request) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<GrpcWorkerClient> client,
                          NewGrpcWorkerClient(address, security, /*channels=*/1));
  WireMessage<Resp> response;
  CallOptions options;
  options.set_timeout_ms(timeout_ms);
  return CallAndWait<WorkerInterface>(client.get(), method, request, &response, &options);
}

}  // namespace

absl::Status ProbeTask(const std::string& address, const TransportSecurity& security,
                       int64_t timeout_ms) {
  WireMessage<proto::GetStatusRequest> request;
  return CallTask(address, security, timeout_ms, &WorkerInterface::GetStatusAsync, request);
}

absl::Status ShutdownTask(const std::string& address, const TransportSecurity& security,
                          const std::string& reason, int64_t timeout_ms) {
  WireMessage<proto::ShutdownRequest> request;
  request.proto.set_reason(reason);
  return CallTask(address, security, timeout_ms, &WorkerInterface::ShutdownAsync, request);
}

}  // namespace tandem

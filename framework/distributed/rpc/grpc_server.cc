// framework/distributed/rpc/grpc_server.cc: RpcServer (grpc_server.h).
#include "framework/distributed/rpc/grpc_server.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/distributed/rpc/grpc_util.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"

namespace tandem {

absl::StatusOr<std::unique_ptr<RpcServer>> RpcServer::Start(const std::string& address, Kind kind,
                                                            const TransportSecurity& security,
                                                            grpc::CallbackGenericService* service,
                                                            const std::string& purpose) {
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (kind == Kind::kTask) {
    TANDEM_ASSIGN_OR_RETURN(creds, MakeServerCredentials(security));
  }
  std::unique_ptr<RpcServer> s(new RpcServer);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, creds, &s->port_);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  if (kind == Kind::kTask) {
    builder.SetMaxReceiveMessageSize(-1);
    builder.SetMaxSendMessageSize(-1);
    ForEachTransportArgument(
        [&](const char* key, int value) { builder.AddChannelArgument(key, value); });
  }
  builder.RegisterCallbackGenericService(service);
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address, " for ", purpose));
  }
  return s;
}

RpcServer::~RpcServer() = default;

void RpcServer::Shutdown(absl::Duration grace) {
  server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(grace));
}

}  // namespace tandem

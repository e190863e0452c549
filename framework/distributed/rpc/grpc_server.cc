// framework/distributed/rpc/grpc_server.cc: RpcServer (grpc_server.h).
#include "framework/distributed/rpc/grpc_server.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/distributed/rpc/grpc_util.h"
#include "framework/distributed/rpc/rpc_queue.h"
#include "framework/distributed/rpc/server_call.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"

namespace tandem {
namespace {
constexpr int kWaitingCalls = 8;
}  // namespace

absl::StatusOr<std::unique_ptr<RpcServer>> RpcServer::Start(const std::string& address, Kind kind,
                                                            const TransportSecurity& security,
                                                            ReactorFactory* service,
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
  builder.RegisterAsyncGenericService(s->service_.get());
  std::unique_ptr<grpc::ServerCompletionQueue> cq = builder.AddCompletionQueue();
  s->calls_ = std::make_shared<ServerCalls>(s->service_.get(), cq.get(), service);
  s->server_ = builder.BuildAndStart();
  s->queue_ = std::make_shared<RpcQueue>(std::move(cq));  // ~RpcServer drains it on failure.
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address, " for ", purpose));
  }
  if (kind == Kind::kTask) OfferClientQueue(s->queue_);
  // Calls waiting for calls: each that gets one puts another in its place, so this
  // many can arrive at once without waiting for the queue's thread.
  for (int i = 0; i < kWaitingCalls; ++i) s->calls_->Await();
  return s;
}

RpcServer::RpcServer() : service_(std::make_unique<grpc::AsyncGenericService>()) {}

RpcServer::~RpcServer() {
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now());  // Unless Shutdown did.
    calls_->WaitUntilNoneLive();
    server_.reset();
  }
  queue_.reset();  // Ends now, or when the last client call on it has.
}

void RpcServer::Shutdown(absl::Duration grace) {
  server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(grace));
}

}  // namespace tandem

// framework/distributed/health_port.cc
#include "framework/distributed/health_port.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "framework/distributed/rpc/health_check.h"
#include "grpcpp/grpcpp.h"

namespace tandem {

absl::StatusOr<std::unique_ptr<HealthPort>> HealthPort::Start(const std::string& address,
                                                              HealthService* health) {
  std::unique_ptr<HealthPort> p(new HealthPort);
  if (health == nullptr) {
    p->own_ = std::make_unique<HealthService>();
    health = p->own_.get();
  }
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // The port must be this one's.
  builder.RegisterCallbackGenericService(health);
  p->server_ = builder.BuildAndStart();
  if (p->server_ == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", address, " for health checks (address in use?)"));
  }
  p->address_ = address;
  return p;
}

HealthPort::~HealthPort() {
  if (server_ != nullptr) {
    // Watch streams end when their server stops: give them a moment, then cancel.
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
}

}  // namespace tandem

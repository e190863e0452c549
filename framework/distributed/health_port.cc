// framework/distributed/health_port.cc
#include "framework/distributed/health_port.h"

#include "framework/core/status.h"
#include "framework/distributed/rpc/grpc_server.h"
#include "framework/distributed/rpc/health_check.h"

namespace tandem {

absl::StatusOr<std::unique_ptr<HealthPort>> HealthPort::Start(const std::string& address,
                                                              HealthService* health) {
  std::unique_ptr<HealthPort> p(new HealthPort);
  if (health == nullptr) {
    p->own_ = std::make_unique<HealthService>();
    health = p->own_.get();
  }
  TANDEM_ASSIGN_OR_RETURN(
      p->server_, RpcServer::Start(address, RpcServer::Kind::kHealth, TransportSecurity(), health,
                                   "health checks (address in use?)"));
  p->address_ = address;
  return p;
}

HealthPort::~HealthPort() {
  if (server_ != nullptr) {
    // Watch streams end when their server stops: give them a moment, then cancel.
    server_->Shutdown(absl::Seconds(1));
  }
}

}  // namespace tandem

// framework/distributed/health_port.h
//
// HealthPort: a plaintext gRPC port that answers gRPC's health checks
// (grpc.health.v1.Health Check and Watch, rpc/health_check.h) and nothing else.
// A Server opens one beside its own port when asked (TransportSecurity::health_port:
// Kubernetes' gRPC probes speak neither TLS nor tokens), sharing its status, so the
// port says NOT_SERVING once the server stops; a process without a Server that must
// still be probed (the evaluator) opens one of its own, which says SERVING for as long
// as the process runs.
//
// CheckHealth is the client side of the protocol, for any task's port or health port.
//
// Thread safety: thread-safe; the destructor closes the port.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_HEALTH_PORT_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_HEALTH_PORT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "framework/distributed/transport_security.h"

namespace tandem {

class HealthService;
class RpcServer;

// grpc.health.v1.HealthCheckResponse.ServingStatus (framework/protos/health.proto).
enum class ServingStatus { kUnknown = 0, kServing = 1, kNotServing = 2, kServiceUnknown = 3 };

// The overall health ("" service) of the server at `address` ("host:port"), within
// `timeout_ms`. A call that cannot connect (UNAVAILABLE) is tried again, each time on a
// new connection, until the timeout (RetryWithBackoff, rpc_policy.h); the last failure
// (UNAVAILABLE, DEADLINE_EXCEEDED, ...) is returned as the status, with the number of
// attempts. A reply that is not a HealthCheckResponse is INTERNAL.
absl::StatusOr<ServingStatus> CheckHealth(const std::string& address,
                                          const TransportSecurity& security, int64_t timeout_ms);

class HealthPort {
 public:
  // Listens on `address` ("host:port"; host "0.0.0.0" for every interface) and answers
  // for `health` (not owned, must outlive the port), or for a status of its own,
  // SERVING, when null. UNAVAILABLE when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<HealthPort>> Start(const std::string& address,
                                                           HealthService* health = nullptr);
  ~HealthPort();
  HealthPort(const HealthPort&) = delete;
  HealthPort& operator=(const HealthPort&) = delete;

  const std::string& address() const { return address_; }

 private:
  HealthPort() = default;
  std::unique_ptr<HealthService> own_;
  std::unique_ptr<RpcServer> server_;
  std::string address_;
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_HEALTH_PORT_H_

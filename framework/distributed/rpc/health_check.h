// framework/distributed/rpc/health_check.h
//
// gRPC's standard health checking protocol (grpc.health.v1.Health), the one
// Kubernetes' gRPC probes and grpc_health_probe speak. Every tandem Server answers its
// Check method on its own port (GrpcService, before the cluster token check: probes
// carry no token), revealing nothing but SERVING, or NOT_SERVING once the server is
// stopping. The service names "" (the server), "tandem.WorkerService" and
// "tandem.MasterService" are known; any other is NOT_FOUND, as the protocol says.
// Watch (a stream) is UNIMPLEMENTED: probes use Check. gRPC's own default health
// service cannot be used: gRPC 1.51 turns it off on a server with only a callback
// generic service, as tandem's is. CheckHealth is the client side.
//
// Thread safety: thread-safe.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_RPC_HEALTH_CHECK_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_RPC_HEALTH_CHECK_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "framework/distributed/transport_security.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"

namespace tandem {

// grpc.health.v1.HealthCheckResponse.ServingStatus (framework/protos/health.proto).
enum class ServingStatus { kUnknown = 0, kServing = 1, kNotServing = 2, kServiceUnknown = 3 };

inline constexpr char kHealthCheckMethod[] = "/grpc.health.v1.Health/Check";
inline constexpr char kHealthWatchMethod[] = "/grpc.health.v1.Health/Watch";

// The server side of Check: decodes the HealthCheckRequest `in` and writes the
// HealthCheckResponse (SERVING when `serving`, else NOT_SERVING) to `out`.
grpc::Status AnswerHealthCheck(const grpc::ByteBuffer& in, bool serving, grpc::ByteBuffer* out);

// The overall health ("" service) of the server at `address` ("host:port"), within
// `timeout_ms`. The RPC's own failure (UNAVAILABLE, DEADLINE_EXCEEDED, ...) is returned
// as the status; a reply that is not a HealthCheckResponse is INTERNAL.
absl::StatusOr<ServingStatus> CheckHealth(const std::string& address,
                                          const TransportSecurity& security, int64_t timeout_ms);

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_RPC_HEALTH_CHECK_H_

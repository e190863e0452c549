// framework/distributed/rpc/health_check.h
//
// gRPC's standard health checking protocol (grpc.health.v1.Health), the one
// Kubernetes' gRPC probes and grpc_health_probe speak. HealthService holds a server's
// status (SERVING until SetServing(false), when the server starts stopping) and
// answers both methods, revealing nothing else:
//   Check: one reply with the status;
//   Watch: a stream that sends the status at once and again when it changes; a
//     NOT_SERVING server ends the stream after sending it (it is shutting down).
// The service names "" (the server), "tandem.WorkerService" and
// "tandem.MasterService" are known; Check of any other is NOT_FOUND and Watch of it
// sends SERVICE_UNKNOWN, as the protocol says.
//
// Every tandem Server's GrpcService hands health calls to its HealthService before
// the cluster token check (probes carry no token); a Server with a health port also
// serves the HealthService alone there, in plaintext (ServerOptions' security). A
// tandem server's only service is generic (server_call.h), so gRPC's own health
// service is not used: this one answers on the same calls, its status set by the
// Server. CheckHealth (health_port.h) is the client side.
//
// Thread safety: thread-safe. A HealthService must outlive the gRPC servers it serves.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_RPC_HEALTH_CHECK_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_RPC_HEALTH_CHECK_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "framework/distributed/health_port.h"
#include "framework/distributed/rpc/server_call.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"

namespace tandem {

inline constexpr char kHealthCheckMethod[] = "/grpc.health.v1.Health/Check";
inline constexpr char kHealthWatchMethod[] = "/grpc.health.v1.Health/Watch";

class HealthService : public ReactorFactory {
 public:
  HealthService() = default;
  // SERVING (the default) or NOT_SERVING; Watch streams are told.
  void SetServing(bool serving);
  bool serving() const { return serving_.load(); }

  // A reactor answering `call` when it calls a health method, else null.
  ServerReactor* MaybeCreateReactor(ServerCall* call);
  // Health methods; any other is UNIMPLEMENTED (the health-only port).
  ServerReactor* CreateReactor(ServerCall* call) override;

  class Watcher;  // One Watch stream (health_check.cc).

 private:
  friend class Watcher;
  void Add(Watcher* w);
  void Remove(Watcher* w);

  std::atomic<bool> serving_{true};
  absl::Mutex mu_;
  absl::flat_hash_set<Watcher*> watchers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_RPC_HEALTH_CHECK_H_

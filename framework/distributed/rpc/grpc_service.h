// framework/distributed/rpc/grpc_service.h
//
// GrpcService: serves a WorkerInterface and a MasterInterface on one gRPC server as
// "/tandem.WorkerService/<Method>" and "/tandem.MasterService/<Method>", through
// gRPC's asynchronous generic API (server_call.h; no generated stubs; messages are
// tensor_wire bytes). Handlers run on the server's queue thread and do not block.
// Each call decodes its request (a malformed one is INVALID_ARGUMENT), checks the
// cluster token when one is set (a missing or wrong token is UNAUTHENTICATED and
// logged with the caller's address), and hands the request to the interface, whose
// callback sends the reply. The interface gets a CallOptions per call, which is
// cancelled (StartCancel) when gRPC cancels the call: the client cancelled, its
// deadline passed, its connection dropped or this server is shutting down. Nothing
// a caller sends can crash the process. Health
// checks (grpc.health.v1.Health Check and Watch) go to the HealthService given,
// without the token (rpc/health_check.h).
//
// Thread safety: thread-safe; the interfaces must outlive the gRPC server.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_RPC_GRPC_SERVICE_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_RPC_GRPC_SERVICE_H_

#include <functional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "framework/distributed/master_interface.h"
#include "framework/distributed/rpc/health_check.h"
#include "framework/distributed/rpc/server_call.h"
#include "framework/distributed/worker_interface.h"
#include "grpcpp/generic/async_generic_service.h"

namespace tandem {

class GrpcService : public ReactorFactory {
 public:
  // Not owned; `master` may be null (a task that serves only the worker service).
  GrpcService(WorkerInterface* worker, MasterInterface* master, HealthService* health,
              std::string token);

  using Reply = std::function<void(const grpc::Status&)>;
  using Handler = std::function<void(CallOptions* options, const grpc::ByteBuffer& in,
                                     grpc::ByteBuffer* out, Reply)>;
  // Decodes, authorises and dispatches one call. `options` (the call's; not owned)
  // must stay alive until `reply` has run and until no one may cancel it any more.
  void Handle(const grpc::GenericServerContext& context, CallOptions* options,
              const grpc::ByteBuffer& in, grpc::ByteBuffer* out, Reply reply);

  ServerReactor* CreateReactor(ServerCall* call) override;

 private:
  template <typename Service, typename Req, typename Resp>
  void Add(const std::string& name, Service* service,
           void (Service::*method)(CallOptions*, const WireMessage<Req>*, WireMessage<Resp>*,
                                   StatusCallback));

  const std::string token_;
  HealthService* const health_;
  absl::flat_hash_map<std::string, Handler> handlers_;  // Filled by the constructor only.
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_RPC_GRPC_SERVICE_H_

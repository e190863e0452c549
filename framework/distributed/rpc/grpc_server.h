// framework/distributed/rpc/grpc_server.h
//
// RpcServer: one listening gRPC port serving one ReactorFactory (a task's GrpcService,
// or a HealthService alone) on gRPC's asynchronous generic API, its calls handled on
// the server's own RpcQueue thread (server_call.h); a task server's queue also carries
// the process's client calls (ClientQueue). Built as every tandem port is: the port is
// its own (no SO_REUSEPORT, which would let a second server bind a port another
// process serves), and a task's port has no message size limit and the transport
// arguments of grpc_util.h. This is the only place a gRPC server is built; the Server
// and HealthPort above hold an RpcServer and see no gRPC type.
//
// Thread safety: Shutdown may be called from any thread but the queue's; the destructor
// waits for the calls still running.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_RPC_GRPC_SERVER_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_RPC_GRPC_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "framework/distributed/transport_security.h"

namespace grpc {
class AsyncGenericService;
class Server;
}  // namespace grpc

namespace tandem {

class ReactorFactory;
class RpcQueue;
class ServerCalls;

class RpcServer {
 public:
  enum class Kind {
    kTask,    // A task's port: `security`'s TLS, no size limit, transport arguments.
    kHealth,  // A health port: plaintext, gRPC's defaults.
  };
  // Listens on `address` ("host:port"; port 0: one the kernel picks) and serves
  // `service` (not owned; must outlive the server). A credentials error is returned as
  // is; an address that cannot be bound is UNAVAILABLE "cannot listen on <address> for
  // <purpose>".
  static absl::StatusOr<std::unique_ptr<RpcServer>> Start(const std::string& address, Kind kind,
                                                          const TransportSecurity& security,
                                                          ReactorFactory* service,
                                                          const std::string& purpose);
  ~RpcServer();
  RpcServer(const RpcServer&) = delete;
  RpcServer& operator=(const RpcServer&) = delete;

  // The port bound.
  int port() const { return port_; }
  // Stops accepting calls; the calls still running after `grace` are cancelled.
  void Shutdown(absl::Duration grace);

 private:
  RpcServer();
  // Destroyed in this order's reverse: the server before the queue it uses.
  std::unique_ptr<grpc::AsyncGenericService> service_;
  std::shared_ptr<RpcQueue> queue_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<ServerCalls> calls_;
  int port_ = 0;
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_RPC_GRPC_SERVER_H_

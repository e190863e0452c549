// framework/distributed/master_interface.h
//
// MasterInterface: the master service of a task, free of any transport. A client
// session (GrpcSession) creates a master session with its graph, extends it, and runs
// steps; the master places, partitions and registers the graph with the workers and
// drives every step. Master (master.h) implements it in process; rpc/ serves it over
// gRPC and rpc/grpc_master_client.h calls it remotely. Same calling rules as
// WorkerInterface (worker_interface.h).
//
// Thread safety: implementations are thread-safe.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_MASTER_INTERFACE_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_MASTER_INTERFACE_H_

#include "framework/distributed/worker_interface.h"
#include "framework/protos/master.pb.h"

namespace tandem {

// The master service's methods, listed once (see TANDEM_WORKER_RPCS).
// clang-format off
#define TANDEM_MASTER_RPCS(X) \
  X(CreateSession)        \
  X(ExtendSession)        \
  X(RunStep)              \
  X(CloseSession)         \
  X(ListDevices)          \
  X(Reset)
// clang-format on

class MasterInterface {
 public:
  virtual ~MasterInterface() = default;

  TANDEM_MASTER_RPCS(TANDEM_DECLARE_RPC)
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_MASTER_INTERFACE_H_

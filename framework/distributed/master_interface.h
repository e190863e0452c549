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

// The master service's methods, listed for the code that handles each alike (see
// TANDEM_WORKER_RPCS); MasterInterface declares and documents each.
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

  // Creates a master session for a graph (placed at once); returns its handle and
  // graph version.
  virtual void CreateSessionAsync(CallOptions* options,
                                  const WireMessage<proto::CreateSessionRequest>* request,
                                  WireMessage<proto::CreateSessionResponse>* response,
                                  StatusCallback done) = 0;

  // Adds nodes to a session's graph at its current version.
  virtual void ExtendSessionAsync(CallOptions* options,
                                  const WireMessage<proto::ExtendSessionRequest>* request,
                                  WireMessage<proto::ExtendSessionResponse>* response,
                                  StatusCallback done) = 0;

  // Runs one step: feeds, fetches and targets by name; the master builds (once per
  // signature) and runs the partitioned plan.
  virtual void RunStepAsync(CallOptions* options, const WireMessage<proto::RunStepRequest>* request,
                            WireMessage<proto::RunStepResponse>* response, StatusCallback done) = 0;

  // Closes a session and deregisters its partitions.
  virtual void CloseSessionAsync(CallOptions* options,
                                 const WireMessage<proto::CloseSessionRequest>* request,
                                 WireMessage<proto::CloseSessionResponse>* response,
                                 StatusCallback done) = 0;

  // The devices of the cluster's tasks that the filters admit.
  virtual void ListDevicesAsync(CallOptions* options,
                                const WireMessage<proto::ListDevicesRequest>* request,
                                WireMessage<proto::ListDevicesResponse>* response,
                                StatusCallback done) = 0;

  // Closes every session and drops the named containers on every task.
  virtual void ResetAsync(CallOptions* options, const WireMessage<proto::ResetRequest>* request,
                          WireMessage<proto::ResetResponse>* response, StatusCallback done) = 0;
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_MASTER_INTERFACE_H_

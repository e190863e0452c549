// framework/distributed/rpc/grpc_clients.h
//
// The client side of tandem's RPC services over gRPC: GrpcWorkerClient and
// GrpcMasterClient implement WorkerInterface and MasterInterface by sending each call
// to a remote GrpcService; GrpcWorkerCache reaches every task of a ClusterSpec,
// with one channel per remote task (created on first use) and the in-process Worker
// for the local task, so a task never calls itself over the network.
//
// Thread safety: all classes are thread-safe.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_RPC_GRPC_CLIENTS_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_RPC_GRPC_CLIENTS_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "framework/distributed/cluster_spec.h"
#include "framework/distributed/master_interface.h"
#include "framework/distributed/rpc/grpc_util.h"

namespace tandem {

// A channel to "host:port" with tandem's arguments and the given security.
absl::StatusOr<std::shared_ptr<grpc::Channel>> NewGrpcChannel(const std::string& address,
                                                              const TransportSecurity& security);

class GrpcWorkerClient : public WorkerInterface {
 public:
  GrpcWorkerClient(std::shared_ptr<grpc::Channel> channel, std::string token);
  TANDEM_WORKER_RPCS(TANDEM_OVERRIDE_RPC)

 private:
  grpc::GenericStub stub_;
  const std::string token_;
};

class GrpcMasterClient : public MasterInterface {
 public:
  GrpcMasterClient(std::shared_ptr<grpc::Channel> channel, std::string token);
  TANDEM_MASTER_RPCS(TANDEM_OVERRIDE_RPC)

 private:
  grpc::GenericStub stub_;
  const std::string token_;
};

class GrpcWorkerCache : public WorkerCacheInterface {
 public:
  // `local_task` is always listed, even when `cluster` is empty.
  GrpcWorkerCache(ClusterSpec cluster, std::string local_task, TransportSecurity security);
  // The in-process worker of local_task (not owned). Set before any call is served.
  void SetLocalWorker(WorkerInterface* local) { local_ = local; }
  absl::StatusOr<WorkerInterface*> GetWorker(const std::string& task) override;
  std::vector<std::string> ListTasks() const override;

 private:
  const ClusterSpec cluster_;
  const std::string local_task_;
  WorkerInterface* local_ = nullptr;
  const TransportSecurity security_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<GrpcWorkerClient>> clients_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_RPC_GRPC_CLIENTS_H_

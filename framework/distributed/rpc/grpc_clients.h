// framework/distributed/rpc/grpc_clients.h
//
// The client side of tandem's RPC services over gRPC: GrpcWorkerClient and
// GrpcMasterClient implement WorkerInterface and MasterInterface by sending each call
// to a remote GrpcService; GrpcWorkerCache reaches every task of a ClusterSpec,
// with a few channels per remote task (created on first use) and the in-process
// Worker for the local task, so a task never calls itself over the network.
//
// Thread safety: all classes are thread-safe.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_RPC_GRPC_CLIENTS_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_RPC_GRPC_CLIENTS_H_

#include <atomic>
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
  // Every call but RecvTensor goes over channels[0]. A RecvTensor call, which carries
  // a tensor, takes the channel with the fewest RecvTensor calls in flight (the lowest
  // index among equals), so that concurrent transfers travel on TCP connections of
  // their own while one at a time stays on one warm connection. On loopback, one HTTP/2
  // connection carrying four 4 MiB responses at once moved them at about half the rate
  // of four connections (tests/bench/distributed_bench, "4_in_flight").
  // REQUIRES: !channels.empty().
  GrpcWorkerClient(const std::vector<std::shared_ptr<grpc::Channel>>& channels, std::string token);
  GrpcWorkerClient(std::shared_ptr<grpc::Channel> channel, std::string token);
  TANDEM_WORKER_RPCS(TANDEM_OVERRIDE_RPC)

 private:
  // The stub for a call; wraps `done` to count a RecvTensor call while in flight.
  grpc::GenericStub* Pick(bool carries_tensors, StatusCallback* done);
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs_;
  // RecvTensor calls in flight per channel; shared with callbacks that may run after
  // this client is gone.
  std::shared_ptr<std::vector<std::atomic<int>>> in_flight_;
  const std::string token_;
};

// A worker client of "host:port" over `channels` (>= 1) new channels.
absl::StatusOr<std::unique_ptr<GrpcWorkerClient>> NewGrpcWorkerClient(
    const std::string& address, const TransportSecurity& security, int channels);

class GrpcMasterClient : public MasterInterface {
 public:
  GrpcMasterClient(std::shared_ptr<grpc::Channel> channel, std::string token);
  TANDEM_MASTER_RPCS(TANDEM_OVERRIDE_RPC)

 private:
  grpc::GenericStub* Pick(bool /*carries_tensors*/, StatusCallback* /*done*/) { return &stub_; }
  grpc::GenericStub stub_;
  const std::string token_;
};

class GrpcWorkerCache : public WorkerCacheInterface {
 public:
  static constexpr int kDefaultChannelsPerTask = tandem::kDefaultChannelsPerTask;
  // `local_task` is always listed, even when `cluster` is empty. Each remote task is
  // reached over `channels_per_task` (>= 1) connections (see GrpcWorkerClient).
  GrpcWorkerCache(ClusterSpec cluster, std::string local_task, TransportSecurity security,
                  int channels_per_task = kDefaultChannelsPerTask);
  // The in-process worker of local_task (not owned). Set before any call is served.
  void SetLocalWorker(WorkerInterface* local) { local_ = local; }
  absl::StatusOr<WorkerInterface*> GetWorker(const std::string& task) override;
  std::vector<std::string> ListTasks() const override;

 private:
  const ClusterSpec cluster_;
  const std::string local_task_;
  WorkerInterface* local_ = nullptr;
  const TransportSecurity security_;
  const int channels_per_task_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<GrpcWorkerClient>> clients_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_RPC_GRPC_CLIENTS_H_

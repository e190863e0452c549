// framework/distributed/server.h
//
// Server: one task of a cluster, as tf.train.Server: one gRPC port serving the
// worker service (this task's devices and the partitions run on them) and the
// master service (client sessions, placement, partitioning, steps). A client of this
// task opens a GrpcSession to target() ("grpc://host:port").
//
//   - The server binds the address the cluster names for its task, not every
//     interface; CreateLocal binds 127.0.0.1 on an ephemeral port.
//   - Each device gets a random incarnation at Create, so peers tell a restarted
//     task apart (its old registrations fail with ABORTED).
//   - With a cluster token every RPC must carry it (UNAUTHENTICATED otherwise); with
//     TLS files the port speaks TLS, mutual when a CA file is given.
//   - The port answers gRPC's health check (grpc.health.v1) without the token:
//     SERVING, NOT_SERVING from Stop on. With security.health_port the server also
//     answers it, and nothing else, in plaintext on that port of every interface (the
//     kubelet probes the pod's IP, whatever name the cluster gives the task).
//   - A CollectiveExecutor answers the worker service's collective calls; it has no
//     group until its owner configures one (collective()).
//   - Stop ends serving; Join waits until Stop, or until a client's Shutdown RPC.
//
// Unlike tf.train.Server there is no Start: Create returns a server that already
// serves, since a task's peers may call it as soon as its port is bound.
//
// Thread safety: Stop and Join may be called from any thread; Stop is idempotent.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_SERVER_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "framework/core/thread_pool.h"
#include "framework/distributed/cluster_spec.h"
#include "framework/distributed/master.h"
#include "framework/distributed/transport_security.h"
#include "framework/distributed/worker.h"
#include "framework/runtime/device.h"

namespace tandem {

class CollectiveExecutor;
class GrpcService;
class HealthPort;
class HealthService;
class RpcServer;
class GrpcWorkerCache;

struct ServerOptions {
  ClusterSpec cluster;
  TaskId task;  // This server's task; must be in `cluster`.
  TransportSecurity security;
  int inter_op_threads = 0;                            // 0: one per core.
  int intra_op_threads = 0;                            // 0: one per core.
  uint64_t recv_chunk_bytes = kDefaultRecvChunkBytes;  // WorkerEnv::recv_chunk_bytes.
  // gRPC connections to each other task (GrpcWorkerCache).
  int channels_per_task = kDefaultChannelsPerTask;
};

class Server {
 public:
  // Validates the options (the task must be in the cluster), binds the port and serves.
  static absl::StatusOr<std::unique_ptr<Server>> Create(const ServerOptions& options);
  // A one-task cluster {"localhost": ["127.0.0.1:<ephemeral>"]}.
  static absl::StatusOr<std::unique_ptr<Server>> CreateLocal(TransportSecurity security = {});
  ~Server();

  // Ends serving; `reason` is what Join returns (unless a Shutdown RPC came first).
  void Stop(const std::string& reason = "stopped");
  // Blocks until Stop or a Shutdown RPC; returns the shutdown reason.
  std::string Join();

  std::string target() const { return "grpc://" + address_; }
  const std::string& address() const { return address_; }
  const std::string& task_name() const { return task_name_; }
  const ClusterSpec& cluster() const { return options_.cluster; }
  DeviceMgr* devices() { return devices_.get(); }
  Worker* worker() { return worker_.get(); }
  Master* master() { return master_.get(); }
  // This task's member of a collective group (configured by whoever trains with one).
  CollectiveExecutor* collective() { return collective_.get(); }

 private:
  explicit Server(ServerOptions options);
  absl::Status Init(const std::string& bind_address);

  ServerOptions options_;
  std::string task_name_;
  std::string address_;
  std::unique_ptr<DeviceMgr> devices_;
  std::unique_ptr<ThreadPool> inter_op_pool_;
  std::unique_ptr<ThreadPool> intra_op_pool_;  // Null with one intra-op thread.
  std::unique_ptr<GrpcWorkerCache> worker_cache_;
  std::unique_ptr<CollectiveExecutor> collective_;  // Outlives worker_, which uses it.
  std::unique_ptr<Worker> worker_;
  std::shared_ptr<Master> master_;         // Shared with local sessions (local_master.h).
  std::unique_ptr<HealthService> health_;  // Outlives both gRPC servers.
  std::unique_ptr<GrpcService> service_;
  std::unique_ptr<RpcServer> server_;
  std::unique_ptr<HealthPort> health_port_;  // security.health_port; may be null.
  // Held by Stop throughout, so that one Stop runs at a time; never by an RPC handler,
  // which runs on the server's one polling thread, which Stop waits for.
  absl::Mutex stop_mu_;
  absl::Mutex mu_;  // Held only briefly (the Shutdown handler takes it).
  std::string shutdown_reason_ ABSL_GUARDED_BY(mu_);
  absl::Notification stopped_;
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_SERVER_H_

#include "framework/distributed/server.h"

#include <algorithm>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/distributed/collective/collective_executor.h"
#include "framework/distributed/health_port.h"
#include "framework/distributed/local_master.h"
#include "framework/distributed/rpc/grpc_clients.h"
#include "framework/distributed/rpc/grpc_server.h"
#include "framework/distributed/rpc/grpc_service.h"
#include "framework/distributed/rpc/health_check.h"
#include "glog/logging.h"

namespace tandem {
Server::Server(ServerOptions options) : options_(std::move(options)) {}

Server::~Server() {
  if (master_ != nullptr) {
    UnregisterLocalMaster(address_);
    master_->Stop();  // A local session that outlives the server gets UNAVAILABLE.
  }
  Stop();
  // Nothing may call into the worker or master once the gRPC server is gone.
  service_.reset();
  health_.reset();
  master_.reset();
  worker_.reset();
  collective_.reset();
}

absl::StatusOr<std::unique_ptr<Server>> Server::Create(const ServerOptions& options) {
  TANDEM_ASSIGN_OR_RETURN(std::string address, options.cluster.TaskAddress(options.task));
  std::unique_ptr<Server> s(new Server(options));
  TANDEM_RETURN_IF_ERROR(s->Init(address));
  return s;
}

absl::StatusOr<std::unique_ptr<Server>> Server::CreateLocal(TransportSecurity security) {
  ServerOptions options;
  options.task = {"localhost", 0};
  options.security = std::move(security);
  std::unique_ptr<Server> s(new Server(options));
  TANDEM_RETURN_IF_ERROR(s->Init("127.0.0.1:0"));
  return s;
}

absl::Status Server::Init(const std::string& bind_address) {
  task_name_ = options_.task.DeviceName();
  // Cluster tasks compute on their CPU: a GPU worker is not built yet.
  TANDEM_ASSIGN_OR_RETURN(devices_,
                          DeviceMgr::CreateLocal(options_.task.job, 0, options_.task.index));
  inter_op_pool_ =
      std::make_unique<ThreadPool>("inter_op", ThreadPool::DefaultSize(options_.inter_op_threads));
  int intra = ThreadPool::DefaultSize(options_.intra_op_threads);
  // The caller computes too: intra - 1 pool threads, and none for one thread.
  if (intra > 1) intra_op_pool_ = std::make_unique<ThreadPool>("intra_op", intra - 1);

  // The cache reaches the other tasks; this task's own calls go to worker_ directly.
  worker_cache_ = std::make_unique<GrpcWorkerCache>(options_.cluster, task_name_, options_.security,
                                                    options_.channels_per_task);
  collective_ = std::make_unique<CollectiveExecutor>(
      task_name_, devices_->devices()[0]->incarnation(), worker_cache_.get());
  WorkerEnv wenv;
  wenv.task_name = task_name_;
  wenv.collective = collective_.get();
  wenv.devices = devices_.get();
  wenv.worker_cache = worker_cache_.get();
  wenv.inter_op_pool = inter_op_pool_.get();
  wenv.intra_op_pool = intra_op_pool_.get();
  wenv.intra_op_threads = intra;
  wenv.recv_chunk_bytes = std::max<uint64_t>(1, options_.recv_chunk_bytes);
  wenv.on_shutdown = [this](const std::string& reason) {
    {
      absl::MutexLock lock(&mu_);
      shutdown_reason_ = reason.empty() ? "shut down by a client" : reason;
    }
    // Stop from another thread: this one is inside a gRPC handler.
    std::thread([this] { Stop(); }).detach();
  };
  worker_ = std::make_unique<Worker>(std::move(wenv));
  worker_cache_->SetLocalWorker(worker_.get());
  MasterEnv menv;
  menv.task_name = task_name_;
  menv.worker_cache = worker_cache_.get();
  master_ = std::make_shared<Master>(menv);
  health_ = std::make_unique<HealthService>();
  service_ = std::make_unique<GrpcService>(worker_.get(), master_.get(), health_.get(),
                                           options_.security.token);

  TANDEM_ASSIGN_OR_RETURN(
      server_,
      RpcServer::Start(bind_address, RpcServer::Kind::kTask, options_.security, service_.get(),
                       absl::StrCat(task_name_, " (address in use or not local?)")));
  const int port = server_->port();
  if (options_.cluster.empty()) {  // CreateLocal: the cluster is this task.
    std::string host = bind_address.substr(0, bind_address.rfind(':'));
    TANDEM_RETURN_IF_ERROR(options_.cluster.AddTask(options_.task.job, options_.task.index,
                                                    absl::StrCat(host, ":", port)));
  }
  address_ = *options_.cluster.TaskAddress(options_.task);
  if (options_.security.health_port > 0) {
    // Every interface: the kubelet probes the pod's IP, whatever name the task has.
    TANDEM_ASSIGN_OR_RETURN(
        health_port_,
        HealthPort::Start(absl::StrCat("0.0.0.0:", options_.security.health_port), health_.get()));
    LOG(INFO) << "tandem server " << task_name_ << " answers health checks on "
              << health_port_->address() << " (plaintext, grpc.health.v1 only)";
  }
  RegisterLocalMaster(address_, master_, options_.security.token);
  LOG(INFO) << "tandem server " << task_name_ << " listening on " << address_
            << (options_.security.tls() ? " (TLS)" : "")
            << (options_.security.token.empty() ? "" : " (token required)");
  return absl::OkStatus();
}

void Server::Stop(const std::string& reason) {
  if (stopped_.HasBeenNotified()) return;
  absl::MutexLock stopping(&stop_mu_);
  if (stopped_.HasBeenNotified()) return;
  std::string why;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_reason_.empty()) shutdown_reason_ = reason;
    why = shutdown_reason_;
  }
  // gRPC's shutdown waits for every handler to finish; none may wait on a tensor.
  if (collective_ != nullptr) {
    collective_->Leave(absl::StrCat("server ", task_name_, " is stopping (", why, ")"));
  }
  if (worker_ != nullptr) {
    worker_->AbortAllSteps(
        absl::UnavailableError(absl::StrCat("server ", task_name_, " is stopping (", why, ")")));
  }
  if (health_ != nullptr) health_->SetServing(false);  // NOT_SERVING until the ports close.
  if (server_ != nullptr) {
    server_->Shutdown(absl::Seconds(2));
  }
  health_port_.reset();
  stopped_.Notify();
}

std::string Server::Join() {
  stopped_.WaitForNotification();
  absl::MutexLock lock(&mu_);
  return shutdown_reason_;
}

}  // namespace tandem

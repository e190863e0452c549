#include "framework/distributed/rpc/grpc_clients.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"

namespace tandem {

absl::StatusOr<std::shared_ptr<grpc::Channel>> NewGrpcChannel(const std::string& address,
                                                              const TransportSecurity& security) {
  TANDEM_ASSIGN_OR_RETURN(auto creds, MakeChannelCredentials(security));
  return grpc::CreateCustomChannel(address, creds, DefaultChannelArguments());
}

#define TANDEM_GRPC_CALL(Class, Prefix, Name)                                                     \
  void Class::Name##Async(CallOptions* options, const WireMessage<proto::Name##Request>* request, \
                          WireMessage<proto::Name##Response>* response, StatusCallback done) {    \
    static const std::string* const kMethod = new std::string(std::string(Prefix) + #Name);       \
    GrpcCall(&stub_, *kMethod, token_, options, request, response, std::move(done));              \
  }

GrpcWorkerClient::GrpcWorkerClient(std::shared_ptr<grpc::Channel> channel, std::string token)
    : stub_(std::move(channel)), token_(std::move(token)) {}
#define TANDEM_WORKER_CALL(Name) TANDEM_GRPC_CALL(GrpcWorkerClient, kWorkerServicePrefix, Name)
TANDEM_WORKER_RPCS(TANDEM_WORKER_CALL)
#undef TANDEM_WORKER_CALL

GrpcMasterClient::GrpcMasterClient(std::shared_ptr<grpc::Channel> channel, std::string token)
    : stub_(std::move(channel)), token_(std::move(token)) {}
#define TANDEM_MASTER_CALL(Name) TANDEM_GRPC_CALL(GrpcMasterClient, kMasterServicePrefix, Name)
TANDEM_MASTER_RPCS(TANDEM_MASTER_CALL)
#undef TANDEM_MASTER_CALL

#undef TANDEM_GRPC_CALL

GrpcWorkerCache::GrpcWorkerCache(ClusterSpec cluster, std::string local_task,
                                 TransportSecurity security)
    : cluster_(std::move(cluster)),
      local_task_(std::move(local_task)),
      security_(std::move(security)) {}

absl::StatusOr<WorkerInterface*> GrpcWorkerCache::GetWorker(const std::string& task) {
  if (task == local_task_ && local_ != nullptr) return local_;
  absl::MutexLock lock(&mu_);
  auto it = clients_.find(task);
  if (it != clients_.end()) return it->second.get();
  auto spec = DeviceSpec::Parse(task);
  if (!spec.ok() || !spec->job || !spec->task) {
    return absl::InvalidArgumentError(absl::StrCat("'", task, "' is not a task name"));
  }
  absl::StatusOr<std::string> address = cluster_.TaskAddress(*spec->job, *spec->task);
  if (!address.ok()) {
    return absl::NotFoundError(
        absl::StrCat("the cluster ", cluster_.DebugString(), " has no task ", task));
  }
  TANDEM_ASSIGN_OR_RETURN(auto channel, NewGrpcChannel(*address, security_));
  auto client = std::make_unique<GrpcWorkerClient>(std::move(channel), security_.token);
  WorkerInterface* w = client.get();
  clients_[task] = std::move(client);
  return w;
}

std::vector<std::string> GrpcWorkerCache::ListTasks() const {
  std::vector<std::string> tasks = cluster_.AllTaskDeviceNames();
  if (std::find(tasks.begin(), tasks.end(), local_task_) == tasks.end()) {
    tasks.push_back(local_task_);
  }
  std::sort(tasks.begin(), tasks.end());
  return tasks;
}

}  // namespace tandem

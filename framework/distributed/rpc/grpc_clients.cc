#include "framework/distributed/rpc/grpc_clients.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "glog/logging.h"

namespace tandem {

absl::StatusOr<std::shared_ptr<grpc::Channel>> NewGrpcChannel(const std::string& address,
                                                              const TransportSecurity& security) {
  TANDEM_ASSIGN_OR_RETURN(auto creds, MakeChannelCredentials(security));
  grpc::ChannelArguments args = DefaultChannelArguments();
  SetServerNameOverride(security, &args);
  return grpc::CreateCustomChannel(address, creds, args);
}

#define TANDEM_GRPC_CALL(Class, Prefix, Name)                                                     \
  void Class::Name##Async(CallOptions* options, const WireMessage<proto::Name##Request>* request, \
                          WireMessage<proto::Name##Response>* response, StatusCallback done) {    \
    static const std::string* const kMethod = new std::string(std::string(Prefix) + #Name);       \
    grpc::GenericStub* stub = Pick(                                                               \
        absl::string_view(#Name) == "RecvTensor" || absl::string_view(#Name) == "CollectiveData", \
        &done);                                                                                   \
    GrpcCall(stub, *kMethod, token_, options, request, response, std::move(done));                \
  }

GrpcWorkerClient::GrpcWorkerClient(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                                   std::string token)
    : in_flight_(std::make_shared<std::vector<std::atomic<int>>>(channels.size())),
      token_(std::move(token)) {
  CHECK(!channels.empty());
  for (const auto& channel : channels)
    stubs_.push_back(std::make_unique<grpc::GenericStub>(channel));
}
GrpcWorkerClient::GrpcWorkerClient(std::shared_ptr<grpc::Channel> channel, std::string token)
    : GrpcWorkerClient(std::vector<std::shared_ptr<grpc::Channel>>{std::move(channel)},
                       std::move(token)) {}

absl::StatusOr<std::unique_ptr<GrpcWorkerClient>> NewGrpcWorkerClient(
    const std::string& address, const TransportSecurity& security, int channels) {
  std::vector<std::shared_ptr<grpc::Channel>> made;
  for (int i = 0; i < std::max(1, channels); ++i) {
    TANDEM_ASSIGN_OR_RETURN(auto channel, NewGrpcChannel(address, security));
    made.push_back(std::move(channel));
  }
  return std::make_unique<GrpcWorkerClient>(made, security.token);
}

grpc::GenericStub* GrpcWorkerClient::Pick(bool carries_tensors, StatusCallback* done) {
  if (!carries_tensors || stubs_.size() == 1) return stubs_[0].get();
  std::vector<std::atomic<int>>& loads = *in_flight_;
  size_t best = 0;
  int best_load = loads[0].load(std::memory_order_relaxed);
  for (size_t i = 1; i < loads.size() && best_load > 0; ++i) {
    int load = loads[i].load(std::memory_order_relaxed);
    if (load < best_load) {
      best = i;
      best_load = load;
    }
  }
  loads[best].fetch_add(1, std::memory_order_relaxed);
  *done = [counts = in_flight_, best, inner = std::move(*done)](const absl::Status& s) {
    (*counts)[best].fetch_sub(1, std::memory_order_relaxed);
    inner(s);
  };
  return stubs_[best].get();
}
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
                                 TransportSecurity security, int channels_per_task)
    : cluster_(std::move(cluster)),
      local_task_(std::move(local_task)),
      security_(std::move(security)),
      channels_per_task_(std::max(1, channels_per_task)) {}

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
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<GrpcWorkerClient> client,
                          NewGrpcWorkerClient(*address, security_, channels_per_task_));
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

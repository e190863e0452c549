#include "framework/distributed/master.h"

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/random.h"
#include "framework/core/status.h"
#include "framework/distributed/rpc_policy.h"
#include "framework/distributed/worker_rendezvous.h"

namespace tandem {
namespace {

constexpr int kMasterThreads = 16;

std::string NewSessionHandle() {
  return absl::StrCat("session_", absl::Hex(RandomId(), absl::kZeroPad16));
}

}  // namespace

Master::Master(MasterEnv env) : env_(std::move(env)), pool_("master", kMasterThreads) {}

Master::~Master() {
  absl::flat_hash_map<std::string, std::shared_ptr<MasterSession>> sessions;
  {
    absl::MutexLock lock(&mu_);
    sessions.swap(sessions_);
  }
  for (auto& [h, s] : sessions) s->Close().IgnoreError();
}

bool Master::Refused(StatusCallback& done) {
  if (!stopped_) return false;
  done(absl::UnavailableError("the master's server has stopped"));
  return true;
}

absl::StatusOr<std::shared_ptr<MasterSession>> Master::Find(const std::string& handle) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(handle);
  if (it == sessions_.end()) {
    return absl::AbortedError(absl::StrCat("master session '", handle,
                                           "' is not known (closed, or the master restarted)"));
  }
  return it->second;
}

void Master::CreateSessionAsync(CallOptions*,
                                const WireMessage<proto::CreateSessionRequest>* request,
                                WireMessage<proto::CreateSessionResponse>* response,
                                StatusCallback done) {
  if (Refused(done)) return;
  pool_.Schedule([this, request, response, done = std::move(done)] {
    auto session = MasterSession::Create(env_, NewSessionHandle(), request->proto.graph(),
                                         request->proto.config());
    if (!session.ok()) {
      done(session.status());
      return;
    }
    std::shared_ptr<MasterSession> s = std::move(*session);
    response->proto.set_session_handle(s->handle());
    response->proto.set_graph_version(s->graph_version());
    {
      absl::MutexLock lock(&mu_);
      sessions_[s->handle()] = s;
    }
    done(absl::OkStatus());
  });
}

void Master::ExtendSessionAsync(CallOptions*,
                                const WireMessage<proto::ExtendSessionRequest>* request,
                                WireMessage<proto::ExtendSessionResponse>* response,
                                StatusCallback done) {
  if (Refused(done)) return;
  auto s = Find(request->proto.session_handle());
  if (!s.ok()) {
    done(s.status());
    return;
  }
  auto version = (*s)->Extend(request->proto.graph(), request->proto.current_graph_version());
  if (version.ok()) response->proto.set_new_graph_version(*version);
  done(version.status());
}

void Master::RunStepAsync(CallOptions*, const WireMessage<proto::RunStepRequest>* request,
                          WireMessage<proto::RunStepResponse>* response, StatusCallback done) {
  if (Refused(done)) return;
  auto s = Find(request->proto.session_handle());
  if (!s.ok()) {
    done(s.status());
    return;
  }
  pool_.Schedule([session = *s, request, response, done = std::move(done)] {
    done(session->Run(*request, response));
  });
}

void Master::CloseSessionAsync(CallOptions*, const WireMessage<proto::CloseSessionRequest>* request,
                               WireMessage<proto::CloseSessionResponse>*, StatusCallback done) {
  if (Refused(done)) return;
  std::shared_ptr<MasterSession> s;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(request->proto.session_handle());
    if (it != sessions_.end()) {
      s = std::move(it->second);
      sessions_.erase(it);
    }
  }
  if (s == nullptr) {
    done(absl::OkStatus());  // Closing twice is fine.
    return;
  }
  pool_.Schedule([s, done = std::move(done)] { done(s->Close()); });
}

void Master::ListDevicesAsync(CallOptions*, const WireMessage<proto::ListDevicesRequest>* request,
                              WireMessage<proto::ListDevicesResponse>* response,
                              StatusCallback done) {
  if (Refused(done)) return;
  if (!request->proto.session_handle().empty()) {
    auto s = Find(request->proto.session_handle());
    if (!s.ok()) {
      done(s.status());
      return;
    }
    for (const auto& d : (*s)->devices()) *response->proto.add_device() = d;
    done(absl::OkStatus());
    return;
  }
  pool_.Schedule([this, response, done = std::move(done)] {
    auto devices = ListClusterDevices(env_.worker_cache, {}, kListDevicesWaitMs);
    if (devices.ok()) {
      for (auto& d : *devices) *response->proto.add_device() = std::move(d);
    }
    done(devices.status());
  });
}

void Master::ResetAsync(CallOptions*, const WireMessage<proto::ResetRequest>* request,
                        WireMessage<proto::ResetResponse>*, StatusCallback done) {
  if (Refused(done)) return;
  pool_.Schedule([this, request, done = std::move(done)] {
    std::vector<std::string> filters(request->proto.device_filters().begin(),
                                     request->proto.device_filters().end());
    auto devices = ListClusterDevices(env_.worker_cache, filters, kListDevicesWaitMs);
    if (!devices.ok()) {
      done(devices.status());
      return;
    }
    absl::StatusOr<std::vector<std::string>> tasks = TasksOfDevices(*devices);
    if (!tasks.ok()) {
      done(tasks.status());
      return;
    }
    for (const std::string& t : *tasks) {
      auto w = env_.worker_cache->GetWorker(t);
      if (!w.ok()) continue;
      WireMessage<proto::CleanupAllRequest> req;
      WireMessage<proto::CleanupAllResponse> resp;
      for (const auto& c : request->proto.container()) req.proto.add_container(c);
      absl::Status s = CallAndWait(*w, &WorkerInterface::CleanupAllAsync, req, &resp);
      if (!s.ok()) {
        done(absl::Status(s.code(), absl::StrCat("resetting ", t, ": ", s.message())));
        return;
      }
    }
    done(absl::OkStatus());
  });
}

}  // namespace tandem

// framework/distributed/rpc/health_check.cc
#include "framework/distributed/rpc/health_check.h"

#include <chrono>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/distributed/rpc/grpc_clients.h"
#include "framework/distributed/rpc/grpc_util.h"
#include "framework/distributed/rpc_policy.h"
#include "framework/protos/health.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace tandem {
namespace {

std::string BufferBytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (!buffer.Dump(&slices).ok()) return bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return bytes;
}

grpc::ByteBuffer MessageBuffer(const google::protobuf::MessageLite& message) {
  // Always one slice, so an empty message is still sent as a message.
  grpc::Slice slice(message.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

grpc::ByteBuffer StatusBuffer(ServingStatus status) {
  proto::HealthCheckResponse response;
  response.set_status(static_cast<proto::HealthCheckResponse::ServingStatus>(status));
  return MessageBuffer(response);
}

// Parses a HealthCheckRequest (else INVALID_ARGUMENT) and says whether its service is
// known (else NOT_FOUND).
grpc::Status ParseRequest(const grpc::ByteBuffer& in, bool* known) {
  *known = false;
  proto::HealthCheckRequest request;
  if (!request.ParseFromString(BufferBytes(in))) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad HealthCheckRequest");
  }
  const std::string& service = request.service();
  *known =
      service.empty() || service == "tandem.WorkerService" || service == "tandem.MasterService";
  if (!*known) return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service " + service);
  return grpc::Status::OK;
}

ServingStatus StatusOf(bool serving) {
  return serving ? ServingStatus::kServing : ServingStatus::kNotServing;
}

// Check: one request, one reply.
class CheckReactor : public ServerReactor {
 public:
  CheckReactor(ServerCall* call, const HealthService* health)
      : ServerReactor(call), health_(health) {
    StartRead(&request_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the call carried no request"));
      return;
    }
    bool known = false;
    grpc::Status s = ParseRequest(request_, &known);
    if (!s.ok()) {
      Finish(s);
      return;
    }
    response_ = StatusBuffer(StatusOf(health_->serving()));
    StartWriteAndFinish(&response_, grpc::Status::OK);
  }
  void OnDone() override { delete this; }

 private:
  const HealthService* health_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
};

// Any other method on the health-only port.
class RefuseReactor : public ServerReactor {
 public:
  RefuseReactor(ServerCall* call, const std::string& method) : ServerReactor(call) {
    Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        absl::StrCat(method, ": this port serves only grpc.health.v1.Health")));
  }
  void OnDone() override { delete this; }
};

}  // namespace

// Watch: one request, then the status whenever it differs from the last one sent.
// At most one write is in flight; the stream ends after NOT_SERVING or when cancelled.
class HealthService::Watcher : public ServerReactor {
 public:
  Watcher(ServerCall* call, HealthService* health) : ServerReactor(call), health_(health) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the call carried no request"));
      return;
    }
    grpc::Status s = ParseRequest(request_, &known_);
    if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      Finish(s);  // Not a HealthCheckRequest; an unknown service is watched as such.
      return;
    }
    health_->Add(this);
    Update();
  }
  // Sends the current status unless it was sent last or a write is in flight.
  void Update() {
    {
      absl::MutexLock lock(&mu_);
      if (writing_ || done_) return;
      const ServingStatus now =
          known_ ? StatusOf(health_->serving()) : ServingStatus::kServiceUnknown;
      if (sent_ == now) return;
      sent_ = now;
      writing_ = true;
      response_ = StatusBuffer(now);
    }
    StartWrite(&response_);
  }
  void OnWriteDone(bool ok) override {
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      finish = !done_ && (!ok || cancelled_ || sent_ == ServingStatus::kNotServing);
      if (finish) done_ = true;
    }
    if (finish) {
      Finish(grpc::Status::OK);
      return;
    }
    Update();
  }
  void OnCancel() override {
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      finish = !writing_ && !done_;
      if (finish) done_ = true;
    }
    if (finish) Finish(grpc::Status::CANCELLED);
  }
  void OnDone() override {
    health_->Remove(this);
    delete this;
  }

 private:
  HealthService* const health_;
  grpc::ByteBuffer request_;
  bool known_ = false;  // Set before Add; read only after.
  absl::Mutex mu_;
  grpc::ByteBuffer response_ ABSL_GUARDED_BY(mu_);
  ServingStatus sent_ ABSL_GUARDED_BY(mu_) = ServingStatus::kUnknown;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;  // Finish called or about to be.
};

void HealthService::SetServing(bool serving) {
  serving_.store(serving);
  absl::MutexLock lock(&mu_);
  for (Watcher* w : watchers_) w->Update();
}

void HealthService::Add(Watcher* w) {
  absl::MutexLock lock(&mu_);
  watchers_.insert(w);
}

void HealthService::Remove(Watcher* w) {
  absl::MutexLock lock(&mu_);
  watchers_.erase(w);
}

ServerReactor* HealthService::MaybeCreateReactor(ServerCall* call) {
  const std::string& method = call->context().method();
  if (method == kHealthCheckMethod) return new CheckReactor(call, this);
  if (method == kHealthWatchMethod) return new Watcher(call, this);
  return nullptr;
}

ServerReactor* HealthService::CreateReactor(ServerCall* call) {
  ServerReactor* r = MaybeCreateReactor(call);
  return r != nullptr ? r : new RefuseReactor(call, call->context().method());
}

namespace {

// One Check call on a new channel (so a failed connection leaves no backoff behind),
// failing fast, by `deadline`.
absl::StatusOr<ServingStatus> CheckHealthOnce(const std::string& address,
                                              const TransportSecurity& security,
                                              std::chrono::system_clock::time_point deadline) {
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                          NewGrpcChannel(address, security));
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(deadline);
  grpc::CompletionQueue cq;
  const grpc::ByteBuffer request = MessageBuffer(proto::HealthCheckRequest());
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
      stub.PrepareUnaryCall(&context, kHealthCheckMethod, request, &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  if (!cq.Next(&tag, &ok) || !ok) return absl::InternalError("health check: the call did not end");
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        absl::StrCat("health check of ", address, ": ", status.error_message()));
  }
  proto::HealthCheckResponse reply;
  if (!reply.ParseFromString(BufferBytes(response)) ||
      !proto::HealthCheckResponse::ServingStatus_IsValid(reply.status())) {
    return absl::InternalError(
        absl::StrCat("health check of ", address, ": the reply is not a HealthCheckResponse"));
  }
  return static_cast<ServingStatus>(reply.status());
}

}  // namespace

absl::StatusOr<ServingStatus> CheckHealth(const std::string& address,
                                          const TransportSecurity& security, int64_t timeout_ms) {
  const auto start = std::chrono::system_clock::now();
  const auto deadline = start + std::chrono::milliseconds(timeout_ms);
  // A connection that fails (refused, or a TLS handshake cut short on a loaded host) is
  // tried again until the deadline, as grpc-health-probe waits for its connection; the
  // last failure is the answer.
  absl::StatusOr<ServingStatus> result = absl::UnknownError("health check: not attempted");
  int attempts = 0;
  absl::Status last = RetryWithBackoff(timeout_ms, /*retry_deadline_exceeded=*/false, [&] {
    ++attempts;
    result = CheckHealthOnce(address, security, deadline);
    return result.status();
  });
  if (last.ok() || attempts == 1) return result;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now() - start)
                      .count();
  return absl::Status(last.code(),
                      absl::StrCat(last.message(), " (", attempts, " attempts in ", ms, " ms)"));
}

}  // namespace tandem

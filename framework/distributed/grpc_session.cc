#include "framework/distributed/grpc_session.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/distributed/local_master.h"
#include "framework/distributed/rpc/grpc_clients.h"
#include "framework/distributed/rpc_policy.h"
#include "framework/runtime/prepare_graph.h"

namespace tandem {

absl::StatusOr<std::string> ParseGrpcTarget(const std::string& target) {
  constexpr absl::string_view kScheme = "grpc://";
  if (!absl::StartsWith(target, kScheme) || target.size() == kScheme.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("session target '", target, "' is not grpc://host:port"));
  }
  return target.substr(kScheme.size());
}

absl::StatusOr<std::unique_ptr<GrpcSession>> GrpcSession::Create(
    const proto::GraphDef& graph, const SessionOptions& options,
    const TransportSecurity& security) {
  TANDEM_ASSIGN_OR_RETURN(std::string address, ParseGrpcTarget(options.target));
  std::unique_ptr<GrpcSession> s(new GrpcSession());
  s->local_master_ = FindLocalMaster(address, security.token);
  if (s->local_master_ != nullptr) {
    s->master_ = s->local_master_.get();
  } else {
    TANDEM_ASSIGN_OR_RETURN(auto channel, NewGrpcChannel(address, security));
    s->owned_master_ = std::make_unique<GrpcMasterClient>(std::move(channel), security.token);
    s->master_ = s->owned_master_.get();
  }
  TANDEM_RETURN_IF_ERROR(s->Init(graph, options));
  return s;
}

absl::Status GrpcSession::Init(const proto::GraphDef& graph, const SessionOptions& options) {
  WireMessage<proto::CreateSessionRequest> req;
  WireMessage<proto::CreateSessionResponse> resp;
  // The precision rewrite and the fusions run here, on the client, so the master
  // partitions the graph they made.
  auto prepared = std::make_unique<PreparedGraph>(options.precision);
  TANDEM_ASSIGN_OR_RETURN(*req.proto.mutable_graph(), prepared->Prepare(graph));
  for (const std::string& f : options.device_filters)
    req.proto.mutable_config()->add_device_filters(f);
  req.proto.mutable_config()->set_allow_soft_placement(options.allow_soft_placement);
  req.proto.mutable_config()->set_wait_for_workers_ms(options.wait_for_workers_ms);
  // A master that is not up yet (or a connection still being set up) is retried
  // within the wait the options allow.
  const int64_t wait_ms =
      options.wait_for_workers_ms > 0 ? options.wait_for_workers_ms : kWaitForTasksMs;
  TANDEM_RETURN_IF_ERROR(RetryWithBackoff(wait_ms, /*retry_deadline_exceeded=*/false, [&] {
    resp = {};
    return CallAndWait(master_, &MasterInterface::CreateSessionAsync, req, &resp);
  }));
  handle_ = resp.proto.session_handle();
  operation_timeout_ms_ = options.operation_timeout_ms;
  absl::MutexLock lock(&mu_);
  prepared->Commit(graph, req.proto.graph());
  prepared_ = std::move(prepared);
  graph_version_ = resp.proto.graph_version();
  return absl::OkStatus();
}

GrpcSession::~GrpcSession() { Close().IgnoreError(); }

absl::Status GrpcSession::Extend(const proto::GraphDef& graph) {
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::FailedPreconditionError("session is closed");
  WireMessage<proto::ExtendSessionRequest> req;
  WireMessage<proto::ExtendSessionResponse> resp;
  req.proto.set_session_handle(handle_);
  TANDEM_ASSIGN_OR_RETURN(*req.proto.mutable_graph(), prepared_->Prepare(graph));
  req.proto.set_current_graph_version(graph_version_);
  TANDEM_RETURN_IF_ERROR(CallAndWait(master_, &MasterInterface::ExtendSessionAsync, req, &resp));
  prepared_->Commit(graph, req.proto.graph());
  graph_version_ = resp.proto.new_graph_version();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> GrpcSession::Run(const FeedMap& feeds,
                                                     absl::Span<const std::string> fetches,
                                                     absl::Span<const std::string> targets,
                                                     const RunOptions& options,
                                                     RunMetadata* metadata) {
  WireMessage<proto::RunStepRequest> req;
  WireMessage<proto::RunStepResponse> resp;
  req.proto.set_session_handle(handle_);
  for (const auto& [name, value] : feeds) {
    req.proto.add_feed(name);
    req.tensors.push_back(value);
  }
  for (const std::string& f : fetches) req.proto.add_fetch(f);
  for (const std::string& t : targets) req.proto.add_target(t);
  const int64_t timeout_ms = options.timeout_ms > 0 ? options.timeout_ms : operation_timeout_ms_;
  req.proto.set_timeout_ms(timeout_ms);
  req.proto.set_trace(options.trace && metadata != nullptr);
  CallOptions call;
  if (timeout_ms > 0) call.set_timeout_ms(timeout_ms + 2000);
  TANDEM_RETURN_IF_ERROR(CallAndWait(master_, &MasterInterface::RunStepAsync, req, &resp, &call));
  if (resp.tensors.size() != fetches.size()) {
    return absl::InternalError(absl::StrCat("the master returned ", resp.tensors.size(),
                                            " values for ", fetches.size(), " fetches"));
  }
  if (metadata != nullptr) {
    for (const auto& n : resp.proto.node_stats()) {
      metadata->step_stats.nodes.push_back(
          {n.node_name(), n.op(), n.device(), n.start_micros(), n.end_micros(), n.thread_id()});
    }
  }
  return std::move(resp.tensors);
}

absl::Status GrpcSession::Close() {
  {
    absl::MutexLock lock(&mu_);
    if (closed_ || handle_.empty()) return absl::OkStatus();
    closed_ = true;
  }
  WireMessage<proto::CloseSessionRequest> req;
  WireMessage<proto::CloseSessionResponse> resp;
  req.proto.set_session_handle(handle_);
  CallOptions call;
  call.set_timeout_ms(kCloseRpcMs);
  return CallAndWait(master_, &MasterInterface::CloseSessionAsync, req, &resp, &call);
}

absl::StatusOr<std::vector<proto::DeviceAttributes>> GrpcSession::ListDevices() {
  WireMessage<proto::ListDevicesRequest> req;
  WireMessage<proto::ListDevicesResponse> resp;
  req.proto.set_session_handle(handle_);
  TANDEM_RETURN_IF_ERROR(CallAndWait(master_, &MasterInterface::ListDevicesAsync, req, &resp));
  return std::vector<proto::DeviceAttributes>(resp.proto.device().begin(),
                                              resp.proto.device().end());
}

}  // namespace tandem

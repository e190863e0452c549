// framework/distributed/grpc_session.h
//
// GrpcSession: the Session interface over a master, usually the master service of
// this task's own Server ("grpc://host:port"). When that Server is in this process
// (and the token matches), the session calls its Master directly (local_master.h).
// Creating it creates a master session with the graph (waiting for the cluster's tasks
// to answer); Extend sends the new nodes, prepared in the context of the whole graph
// (prepare_graph.h); Run sends feeds and gets fetches as raw tensor bytes. Everything a
// DirectSession can run, a GrpcSession runs the same, placed across the cluster.
// ABORTED and UNAVAILABLE from Run mean the session must be re-created (a task
// restarted or died).
//
// NewSession picks DirectSession for an empty target and GrpcSession for
// "grpc://...".
//
// Thread safety: as Session.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_GRPC_SESSION_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_GRPC_SESSION_H_

#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "framework/distributed/master_interface.h"
#include "framework/distributed/transport_security.h"
#include "framework/runtime/prepare_graph.h"
#include "framework/runtime/session.h"

namespace tandem {

class GrpcSession : public Session {
 public:
  // `options.target` is "grpc://host:port".
  static absl::StatusOr<std::unique_ptr<GrpcSession>> Create(
      const proto::GraphDef& graph, const SessionOptions& options,
      const TransportSecurity& security = {});
  ~GrpcSession() override;

  absl::Status Extend(const proto::GraphDef& graph) override;
  using Session::Run;
  absl::StatusOr<std::vector<Tensor>> Run(const FeedMap& feeds,
                                          absl::Span<const std::string> fetches,
                                          absl::Span<const std::string> targets,
                                          const RunOptions& options,
                                          RunMetadata* metadata) override;
  absl::Status Close() override;
  // The devices the session may use (after filters), from the master.
  absl::StatusOr<std::vector<proto::DeviceAttributes>> ListDevices();

 private:
  GrpcSession() = default;
  absl::Status Init(const proto::GraphDef& graph, const SessionOptions& options);

  std::unique_ptr<MasterInterface> owned_master_;
  std::shared_ptr<MasterInterface> local_master_;  // An in-process server's master.
  MasterInterface* master_ = nullptr;
  std::string handle_;
  int64_t operation_timeout_ms_ = 0;  // SessionOptions::operation_timeout_ms.
  absl::Mutex mu_;
  int64_t graph_version_ ABSL_GUARDED_BY(mu_) = 0;
  // What the master holds, so Extend sends prepared nodes (prepare_graph.h).
  std::unique_ptr<PreparedGraph> prepared_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

// "grpc://host:port" -> "host:port"; INVALID_ARGUMENT for any other scheme.
absl::StatusOr<std::string> ParseGrpcTarget(const std::string& target);

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_GRPC_SESSION_H_

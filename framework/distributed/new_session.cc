#include "framework/distributed/new_session.h"

#include <utility>

#include "framework/core/status.h"
#include "framework/distributed/grpc_session.h"

namespace tandem {

absl::StatusOr<std::unique_ptr<Session>> NewSession(const proto::GraphDef& graph,
                                                    const SessionOptions& options,
                                                    const TransportSecurity& security) {
  if (options.target.empty()) return NewDirectSession(graph, options);
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<GrpcSession> s,
                          GrpcSession::Create(graph, options, security));
  return std::unique_ptr<Session>(std::move(s));
}

}  // namespace tandem

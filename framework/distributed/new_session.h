// framework/distributed/new_session.h
//
// NewSession: the session for SessionOptions::target, as tf.Session(target) chooses
// one: the in-process DirectSession when the target is empty, a GrpcSession to the
// master at "grpc://host:port" otherwise.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_NEW_SESSION_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_NEW_SESSION_H_

#include <memory>

#include "absl/status/statusor.h"
#include "framework/distributed/transport_security.h"
#include "framework/protos/graph.pb.h"
#include "framework/runtime/session.h"

namespace tandem {

absl::StatusOr<std::unique_ptr<Session>> NewSession(const proto::GraphDef& graph,
                                                    const SessionOptions& options,
                                                    const TransportSecurity& security = {});

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_NEW_SESSION_H_

// framework/distributed/cluster_control.h
//
// What one task asks of another task of its cluster outside of a step, over the
// worker service: whether it is up (GetStatus) and that it stop serving (Shutdown,
// which makes that task's Server::Join return). The chief of a training cluster uses
// them to wait until the workers are done and then to end the parameter servers.
//
// Thread safety: functions are thread-safe.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_CLUSTER_CONTROL_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_CLUSTER_CONTROL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "framework/distributed/transport_security.h"

namespace tandem {

// OK when the task at `address` ("host:port") answers GetStatus within timeout_ms;
// otherwise the RPC's error (UNAVAILABLE when nothing listens there,
// DEADLINE_EXCEEDED when it does not answer in time).
absl::Status ProbeTask(const std::string& address, const TransportSecurity& security,
                       int64_t timeout_ms);

// Sends Shutdown with `reason` to the task at `address`; its error when the call
// fails or gets no answer within timeout_ms.
absl::Status ShutdownTask(const std::string& address, const TransportSecurity& security,
                          const std::string& reason, int64_t timeout_ms);

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_CLUSTER_CONTROL_H_

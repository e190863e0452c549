// framework/distributed/rpc_policy.h
//
// The distributed runtime's RPC deadlines and its one retry loop, in one place:
//
//   kWaitForTasksMs     creating a session waits this long, by default, for the
//                       master and the cluster's tasks to answer
//                       (SessionOptions::wait_for_workers_ms overrides it);
//   kListDevicesWaitMs  a master listing the devices of tasks it already knows;
//   kCloseRpcMs         closing a session (the client's CloseSession, the master's
//                       DeleteWorkerSession on each task): never blocks a shutdown long;
//   kKeepaliveTimeMs,   every connection, client and server side, pings its peer after
//   kKeepaliveTimeoutMs this long without traffic and closes when a ping is not
//                       answered within the timeout: the calls in flight to a frozen or
//                       partitioned task fail UNAVAILABLE within about 30 s.
//
// RetryWithBackoff retries an attempt whose error is transient (UNAVAILABLE, or
// DEADLINE_EXCEEDED where the caller says so), sleeping 50 ms, doubling up to 1 s,
// until `wait_ms` is spent; then it returns the last error.
//
// Collective RPCs have their own bounds ([distribute] collective_timeout_secs;
// framework/distributed/collective/collective_executor.h).
//
// Thread safety: RetryWithBackoff blocks the calling thread; it may run on any.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_RPC_POLICY_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_RPC_POLICY_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>

#include "absl/status/status.h"
#include "framework/core/env.h"

namespace tandem {

inline constexpr int64_t kWaitForTasksMs = 60000;
inline constexpr int64_t kListDevicesWaitMs = 5000;
inline constexpr int64_t kCloseRpcMs = 5000;
inline constexpr int kKeepaliveTimeMs = 10000;
inline constexpr int kKeepaliveTimeoutMs = 20000;

// Calls `attempt` until it succeeds, fails with a non-transient error, or the next
// retry would end past `wait_ms`. `on_retry` (may be empty) sees each transient error.
inline absl::Status RetryWithBackoff(
    int64_t wait_ms, bool retry_deadline_exceeded, const std::function<absl::Status()>& attempt,
    const std::function<void(const absl::Status&)>& on_retry = {}) {
  const int64_t deadline = env::NowMicros() + wait_ms * 1000;
  for (int64_t backoff_ms = 50;; backoff_ms = std::min<int64_t>(2 * backoff_ms, 1000)) {
    absl::Status s = attempt();
    const bool transient =
        s.code() == absl::StatusCode::kUnavailable ||
        (retry_deadline_exceeded && s.code() == absl::StatusCode::kDeadlineExceeded);
    if (s.ok() || !transient || env::NowMicros() + backoff_ms * 1000 > deadline) return s;
    if (on_retry) on_retry(s);
    std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
  }
}

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_RPC_POLICY_H_

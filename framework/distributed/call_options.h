// framework/distributed/call_options.h
//
// CallOptions: per-call controls shared by a caller and a transport. The transport
// registers how to cancel an outstanding call (SetCancelCallback); the caller may
// StartCancel at any time, before, during or after the call. A timeout, when set,
// bounds the call's duration; the transport enforces it, as it does wait_for_ready.
//
// Thread safety: every method may be called concurrently.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_CALL_OPTIONS_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_CALL_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tandem {

class CallOptions {
 public:
  // Runs `cancel` now if the call is already cancelled, else on StartCancel.
  void SetCancelCallback(std::function<void()> cancel) {
    {
      absl::MutexLock lock(&mu_);
      if (!cancelled_) {
        cancel_ = std::move(cancel);
        return;
      }
    }
    cancel();
  }
  void ClearCancelCallback() {
    absl::MutexLock lock(&mu_);
    cancel_ = nullptr;
  }
  void StartCancel() {
    std::function<void()> cancel;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      cancel = std::move(cancel_);
      cancel_ = nullptr;
    }
    if (cancel) cancel();
  }
  void set_timeout_ms(int64_t ms) { timeout_ms_ = ms; }
  int64_t timeout_ms() const { return timeout_ms_; }
  // Wait for an unreachable peer to become reachable (until the timeout) instead of
  // failing at once. Set before the call starts.
  void set_wait_for_ready(bool wait) { wait_for_ready_ = wait; }
  bool wait_for_ready() const { return wait_for_ready_; }

 private:
  absl::Mutex mu_;
  std::function<void()> cancel_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  int64_t timeout_ms_ = 0;  // Set before the call starts.
  bool wait_for_ready_ = false;
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_CALL_OPTIONS_H_

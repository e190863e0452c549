// framework/runtime/rendezvous.h
//
// LocalRendezvous: the in-process Rendezvous (framework/kernels/rendezvous.h), one
// table per step (create one per step id and drop it when the step ends). Sending one
// key twice is an error.
//
// Thread safety: every method may be called concurrently from any thread. Callbacks
// are never called with an internal lock held; a RecvAsync callback may run on the
// thread calling Send or StartAbort, or inline inside RecvAsync.
#ifndef TANDEM_FRAMEWORK_RUNTIME_RENDEZVOUS_H_
#define TANDEM_FRAMEWORK_RUNTIME_RENDEZVOUS_H_

#include <cstdint>
#include <deque>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "framework/kernels/rendezvous.h"
#include "framework/tensor/tensor.h"

namespace tandem {

class LocalRendezvous : public Rendezvous {
 public:
  LocalRendezvous() = default;
  // Pending receivers are called with CANCELLED.
  ~LocalRendezvous() override;

  absl::Status Send(const ParsedKey& key, const Tensor& value, bool is_dead) override;
  void RecvAsync(const ParsedKey& key, DoneCallback done) override;
  absl::Status Recv(const ParsedKey& key, const RecvOptions& options, Tensor* value,
                    bool* is_dead) override;
  void StartAbort(const absl::Status& status) override;

  // OK, or the status it was aborted with.
  absl::Status status() const;

  // RecvAsync that returns the waiter's id for Withdraw (0 when `done` already ran).
  uint64_t Enqueue(const ParsedKey& key, DoneCallback done);
  // Removes a pending waiter of `key` (its full key); false when it was already
  // called, or is being called.
  bool Withdraw(const std::string& key, uint64_t id);

 private:
  struct Waiter {
    uint64_t id;
    DoneCallback done;
  };
  struct Value {
    Tensor tensor;
    bool is_dead = false;
  };
  // Per key: a sent value not yet received, or receivers waiting in arrival order.
  struct Item {
    bool has_value = false;
    bool sent = false;  // A value was sent (received or not): a second Send fails.
    Value value;
    std::deque<Waiter> waiters;
  };

  mutable absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  uint64_t next_waiter_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<std::string, Item> table_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_RUNTIME_RENDEZVOUS_H_

// framework/runtime/rendezvous.cc: LocalRendezvous (rendezvous.h).
#include "framework/runtime/rendezvous.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "framework/core/status.h"

namespace tandem {

LocalRendezvous::~LocalRendezvous() {
  StartAbort(absl::CancelledError("rendezvous destroyed before the value was sent"));
}

absl::Status LocalRendezvous::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

absl::Status LocalRendezvous::Send(const ParsedKey& key, const Tensor& value, bool is_dead) {
  DoneCallback done;
  {
    absl::MutexLock lock(&mu_);
    if (!status_.ok()) return status_;
    Item& item = table_[key.full_key];
    if (item.sent) {
      return absl::InvalidArgumentError(
          absl::StrCat("edge '", key.edge_name, "' was sent twice in one step (rendezvous key '",
                       key.full_key, "')"));
    }
    item.sent = true;
    if (item.waiters.empty()) {
      item.has_value = true;
      item.value = Value{value, is_dead};
      return absl::OkStatus();
    }
    done = std::move(item.waiters.front().done);
    item.waiters.pop_front();
  }
  done(absl::OkStatus(), value, is_dead);
  return absl::OkStatus();
}

uint64_t LocalRendezvous::Enqueue(const ParsedKey& key, DoneCallback done) {
  Value value;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    status = status_;
    if (status.ok()) {
      Item& item = table_[key.full_key];
      if (!item.has_value) {
        uint64_t id = next_waiter_id_++;
        item.waiters.push_back(Waiter{id, std::move(done)});
        return id;
      }
      value = std::move(item.value);
      item.has_value = false;
    }
  }
  done(status, value.tensor, value.is_dead);
  return 0;
}

void LocalRendezvous::RecvAsync(const ParsedKey& key, DoneCallback done) {
  Enqueue(key, std::move(done));
}

bool LocalRendezvous::Withdraw(const std::string& key, uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = table_.find(key);
  if (it == table_.end()) return false;
  auto& waiters = it->second.waiters;
  for (auto w = waiters.begin(); w != waiters.end(); ++w) {
    if (w->id == id) {
      waiters.erase(w);
      return true;
    }
  }
  return false;
}

absl::Status LocalRendezvous::Recv(const ParsedKey& key, const RecvOptions& options, Tensor* value,
                                   bool* is_dead) {
  // Shared with the callback, which may outlive this frame after a withdrawal race.
  struct Result {
    absl::Notification ready;
    absl::Status status;
    Tensor value;
    bool is_dead = false;
  };
  auto result = std::make_shared<Result>();
  uint64_t id = Enqueue(key, [result](const absl::Status& s, const Tensor& v, bool dead) {
    result->status = s;
    result->value = v;
    result->is_dead = dead;
    result->ready.Notify();
  });
  if (id != 0 && options.timeout_micros > 0 &&
      !result->ready.WaitForNotificationWithTimeout(absl::Microseconds(options.timeout_micros))) {
    if (Withdraw(key.full_key, id)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "timed out after ", options.timeout_micros / 1000, " ms waiting to receive '",
          key.edge_name, "' from ", key.src_device, " on ", key.dst_device));
    }
  }
  result->ready.WaitForNotification();
  if (!result->status.ok()) return result->status;
  *value = std::move(result->value);
  if (is_dead != nullptr) *is_dead = result->is_dead;
  return absl::OkStatus();
}

void LocalRendezvous::StartAbort(const absl::Status& status) {
  std::vector<DoneCallback> waiting;
  absl::Status s = status.ok() ? absl::InternalError("rendezvous aborted with OK status") : status;
  {
    absl::MutexLock lock(&mu_);
    if (status_.ok()) status_ = s;
    s = status_;
    for (auto& [key, item] : table_) {
      for (Waiter& w : item.waiters) waiting.push_back(std::move(w.done));
    }
    table_.clear();
  }
  for (DoneCallback& done : waiting) done(s, Tensor(), false);
}

}  // namespace tandem

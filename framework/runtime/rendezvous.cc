#include "framework/runtime/rendezvous.h"

#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "framework/core/status.h"

namespace tandem {
namespace {

absl::Status BadKey(absl::string_view key, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("malformed rendezvous key '", key, "': ", why,
                   " (expected <src_device>;<src_incarnation hex>;<dst_device>;<tensor_name>;"
                   "<frame_id>:<iter_id>)"));
}

absl::Status ParseFullDevice(absl::string_view key, absl::string_view what, absl::string_view name,
                             DeviceSpec* out) {
  auto spec = DeviceSpec::Parse(name);
  if (!spec.ok()) return BadKey(key, absl::StrCat(what, ": ", spec.status().message()));
  if (!spec->job || !spec->replica || !spec->task || !spec->type || !spec->id) {
    return BadKey(key, absl::StrCat(what, " '", name, "' is not a full device name"));
  }
  *out = *spec;
  return absl::OkStatus();
}

}  // namespace

std::string CreateRendezvousKey(absl::string_view src_device, uint64_t src_incarnation,
                                absl::string_view dst_device, absl::string_view tensor_name,
                                int64_t frame_id, int64_t iter_id) {
  return absl::StrCat(src_device, ";", absl::StrFormat("%016x", src_incarnation), ";", dst_device,
                      ";", tensor_name, ";", frame_id, ":", iter_id);
}

absl::StatusOr<ParsedKey> ParseRendezvousKey(absl::string_view key) {
  std::vector<absl::string_view> parts = absl::StrSplit(key, ';');
  if (parts.size() != 5) {
    return BadKey(key, absl::StrCat("has ", parts.size(), " ';'-separated parts, not 5"));
  }
  ParsedKey out;
  out.full_key = std::string(key);
  TANDEM_RETURN_IF_ERROR(ParseFullDevice(key, "source device", parts[0], &out.src));
  out.src_device = std::string(parts[0]);
  absl::string_view inc = parts[1];
  if (inc.empty() || inc.size() > 16 || !absl::SimpleHexAtoi(inc, &out.src_incarnation) ||
      inc.find_first_not_of("0123456789abcdefABCDEF") != absl::string_view::npos) {
    return BadKey(key, absl::StrCat("incarnation '", inc, "' is not 1-16 hex digits"));
  }
  TANDEM_RETURN_IF_ERROR(ParseFullDevice(key, "destination device", parts[2], &out.dst));
  out.dst_device = std::string(parts[2]);
  if (parts[3].empty()) return BadKey(key, "empty tensor name");
  out.edge_name = std::string(parts[3]);
  std::vector<absl::string_view> fi = absl::StrSplit(parts[4], ':');
  if (fi.size() != 2 || !absl::SimpleAtoi(fi[0], &out.frame_id) ||
      !absl::SimpleAtoi(fi[1], &out.iter_id) || out.frame_id < 0 || out.iter_id < 0) {
    return BadKey(key, absl::StrCat("frame and iteration '", parts[4], "' are not <int>:<int>"));
  }
  return out;
}

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

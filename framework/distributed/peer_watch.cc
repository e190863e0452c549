// framework/distributed/peer_watch.cc
#include "framework/distributed/peer_watch.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "framework/core/env.h"
#include "framework/distributed/cluster_control.h"
#include "glog/logging.h"

namespace tandem {
namespace {

int64_t NowMs() { return env::NowMicros() / 1000; }

}  // namespace

std::vector<WatchedTask> TasksOf(const ClusterSpec& cluster,
                                 std::initializer_list<absl::string_view> jobs,
                                 const TaskId* self) {
  std::vector<WatchedTask> tasks;
  for (absl::string_view job : jobs) {
    for (int index : cluster.TaskIndices(job)) {
      if (self != nullptr && self->job == job && self->index == index) continue;
      absl::StatusOr<std::string> address = cluster.TaskAddress(job, index);
      if (address.ok()) tasks.push_back({absl::StrCat(job, ":", index), *address});
    }
  }
  return tasks;
}

PeerWatch::PeerWatch(std::vector<WatchedTask> tasks, TransportSecurity security,
                     PeerWatchOptions options)
    : tasks_(std::move(tasks)),
      security_(std::move(security)),
      options_(std::move(options)),
      states_(tasks_.size()) {
  if (!tasks_.empty()) thread_ = std::thread([this] { Loop(); });
}

PeerWatch::~PeerWatch() {
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

void PeerWatch::Loop() {
  while (!stop_.HasBeenNotified()) {
    for (size_t i = 0; i < tasks_.size() && !stop_.HasBeenNotified(); ++i) Probe(i);
    stop_.WaitForNotificationWithTimeout(absl::Milliseconds(options_.probe_interval_ms));
  }
}

void PeerWatch::Probe(size_t i) {
  const absl::Status s = ProbeTask(tasks_[i].address, security_, options_.probe_timeout_ms);
  const int64_t now = NowMs();
  const std::string who = options_.waiter.empty() ? "" : options_.waiter + ": ";
  absl::MutexLock lock(&mu_);
  State& st = states_[i];
  if (s.ok()) {
    if (st.last_report_ms >= 0) {
      LOG(INFO) << who << tasks_[i].Describe() << " answers again after "
                << (now - st.silent_since_ms) / 1000 << " s";
      LOG(INFO) << "event=peer_answers peer=" << tasks_[i].name
                << " silent_s=" << (now - st.silent_since_ms) / 1000;
    }
    st = State();
    return;
  }
  if (st.silent_since_ms < 0) st.silent_since_ms = now;
  st.last_error = s;
  const int64_t silent = now - st.silent_since_ms;
  const bool first = st.last_report_ms < 0 && silent >= options_.report_after_ms;
  const bool again =
      st.last_report_ms >= 0 && now - st.last_report_ms >= options_.report_interval_ms;
  if (first || again) {
    LOG(WARNING) << who << tasks_[i].Describe() << " has not answered for " << silent / 1000
                 << " s (" << absl::StatusCodeToString(s.code()) << ": " << s.message()
                 << "); waiting for it";
    LOG(WARNING) << "event=peer_silent peer=" << tasks_[i].name << " silent_s=" << silent / 1000;
    st.last_report_ms = now;
  }
}

std::vector<std::string> PeerWatch::Silent() const {
  const int64_t now = NowMs();
  std::vector<std::string> silent;
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < tasks_.size(); ++i) {
    const State& st = states_[i];
    if (st.silent_since_ms >= 0 && now - st.silent_since_ms >= options_.report_after_ms) {
      silent.push_back(absl::StrCat(tasks_[i].Describe(), " silent for ",
                                    (now - st.silent_since_ms) / 1000, " s"));
    }
  }
  return silent;
}

}  // namespace tandem

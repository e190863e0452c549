// framework/distributed/peer_watch.h
//
// PeerWatch: names the tasks of a cluster that this task waits on and that stop
// answering. A thread probes each watched task (GetStatus, ProbeTask) every
// probe_interval_ms with a probe_timeout_ms deadline; a task that has not answered
// for report_after_ms is logged at once as
//   "ps:0 (127.0.0.1:2222) has not answered for 12 s (Deadline Exceeded: ...)"
// and again every report_interval_ms while it lasts, and once more when it answers
// again ("ps:0 (127.0.0.1:2222) answers again after 104 s"). A frozen task (SIGSTOP,
// a hung VM, a partition without a reset) gives DEADLINE_EXCEEDED; a dead one
// UNAVAILABLE: both are silence. The watch only reports: the caller's own waits are
// bounded elsewhere (keepalive, step deadlines, rpc_policy.h) and go on by themselves.
//
// TasksOf lists a cluster's tasks by job as "job:index" and address, for the watch
// and for anyone else probing tasks.
//
// Thread safety: Silent may be called from any thread; the destructor stops and joins
// the probing thread (at most one probe_timeout_ms late).
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_PEER_WATCH_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_PEER_WATCH_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "framework/distributed/cluster_spec.h"
#include "framework/distributed/transport_security.h"

namespace tandem {

struct WatchedTask {
  std::string name;     // "ps:0"
  std::string address;  // "127.0.0.1:2222"
  std::string Describe() const { return name + " (" + address + ")"; }
};

// The tasks of `jobs` in `cluster`, in job order then index order, leaving out `self`
// when given.
std::vector<WatchedTask> TasksOf(const ClusterSpec& cluster,
                                 std::initializer_list<absl::string_view> jobs,
                                 const TaskId* self = nullptr);

struct PeerWatchOptions {
  int64_t probe_interval_ms = 5000;
  int64_t probe_timeout_ms = 2000;
  int64_t report_after_ms = 10000;     // Silent this long: named in the log.
  int64_t report_interval_ms = 30000;  // Named again this often while silent.
  std::string waiter;                  // Who waits, for the log: "worker:1".
};

class PeerWatch {
 public:
  // Starts probing `tasks` at once; an empty list starts no thread.
  PeerWatch(std::vector<WatchedTask> tasks, TransportSecurity security,
            PeerWatchOptions options = {});
  ~PeerWatch();
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  // The tasks silent for at least report_after_ms, described with how long.
  std::vector<std::string> Silent() const;

 private:
  struct State {
    int64_t silent_since_ms = -1;  // -1: answered at the last probe.
    int64_t last_report_ms = -1;   // -1: not reported in this silence.
    absl::Status last_error;
  };
  void Loop();
  void Probe(size_t i);

  const std::vector<WatchedTask> tasks_;
  const TransportSecurity security_;
  const PeerWatchOptions options_;
  mutable absl::Mutex mu_;
  std::vector<State> states_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_PEER_WATCH_H_

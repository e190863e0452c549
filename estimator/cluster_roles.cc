// estimator/cluster_roles.cc
//
// The roles of train_and_evaluate that do not train (estimator/training.h): the
// parameter server, the evaluator, and the chief's end of the cluster.
#include <string.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "checkpoint/checkpoint_index.h"
#include "estimator/internal/task_server.h"
#include "estimator/training.h"
#include "framework/core/status.h"
#include "framework/core/termination.h"
#include "framework/distributed/cluster_control.h"
#include "framework/distributed/peer_watch.h"
#include "framework/distributed/server.h"
#include "glog/logging.h"
#include "hooks/summary_writer.h"

namespace tandem::internal {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void SleepSeconds(double secs) { std::this_thread::sleep_for(std::chrono::duration<double>(secs)); }

// How often the evaluator looks for a new checkpoint, and says it is waiting.
constexpr double kPollSecs = 1.0;
constexpr double kWaitingLogSecs = 30;
// Consecutive failed evaluations of checkpoints that vanished (retention) or were
// unreadable, tolerated before the evaluator gives up.
constexpr int kMaxEvaluationFailures = 10;
// How long the chief waits for the worker tasks to exit, and how often it says so.
constexpr double kWorkerExitWaitSecs = 600;
constexpr double kWorkerExitLogSecs = 30;
constexpr int64_t kProbeTimeoutMs = 2000;
constexpr int64_t kShutdownTimeoutMs = 10000;
// How often a ps looks whether training is over without it being told.
constexpr double kPsIdleCheckSecs = 10;

// The workers other than this task that still answer GetStatus (`up`) and those that
// keep their port open but do not answer in time (`silent`: frozen or partitioned).
struct WorkersState {
  std::vector<std::string> up, silent;
};
WorkersState ProbeWorkers(const RunConfig& config, const TransportSecurity& security) {
  const TaskId self = config.task();
  WorkersState state;
  for (const WatchedTask& t : TasksOf(config.cluster_spec(), {kJobWorker}, &self)) {
    const absl::Status s = ProbeTask(t.address, security, kProbeTimeoutMs);
    if (s.ok()) state.up.push_back(t.Describe());
    if (absl::IsDeadlineExceeded(s)) state.silent.push_back(t.Describe());
  }
  return state;
}

// The task that ends a ps's service: the chief (or master), else worker 0 (a
// chief-less cluster's chief).
std::vector<WatchedTask> ChiefTask(const ClusterSpec& cluster) {
  std::vector<WatchedTask> chief = TasksOf(cluster, {kJobChief, kJobMaster});
  if (chief.empty()) chief = TasksOf(cluster, {kJobWorker});
  if (chief.size() > 1) chief.resize(1);
  return chief;
}

}  // namespace

absl::StatusOr<TaskResult> RunParameterServer(const Estimator& estimator,
                                              std::optional<int64_t> max_steps) {
  const RunConfig& config = estimator.config();
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Server> server,
                          StartTaskServer(config, estimator.security()));
  LOG(INFO) << "Parameter server " << server->task_name() << " serving on " << server->address()
            << " until the chief ends training";
  Server* s = server.get();
  const std::vector<WatchedTask> chief = ChiefTask(config.cluster_spec());
  PeerWatchOptions watch_options;
  watch_options.waiter = absl::StrCat("ps:", config.task_id());
  PeerWatch watch(chief, estimator.security(), watch_options);  // Names a silent chief.
  const int on_signal = termination::OnRequest(
      [s] { s->Stop(absl::StrCat("stopped by ", strsignal(termination::Signal()))); });
  // A ps started (or restarted) after the chief finished would wait for a Shutdown
  // that never comes: it ends when the final checkpoint exists and no chief answers.
  absl::Notification joined;
  std::thread watcher([&] {
    if (!max_steps) return;
    int chief_gone = 0;
    while (!joined.WaitForNotificationWithTimeout(absl::Seconds(kPsIdleCheckSecs))) {
      const std::string latest = estimator.LatestCheckpoint();
      if (latest.empty() || checkpoint::CheckpointGlobalStep(latest) < *max_steps) continue;
      const bool gone =
          chief.empty() || !ProbeTask(chief[0].address, estimator.security(), kProbeTimeoutMs).ok();
      chief_gone = gone ? chief_gone + 1 : 0;
      if (chief_gone >= 2) {
        s->Stop(absl::StrCat("training is over (", latest, " is at max_steps ", *max_steps,
                             ") and the chief is gone"));
        return;
      }
    }
  });
  const std::string reason = server->Join();
  joined.Notify();
  watcher.join();
  termination::Unregister(on_signal);
  LOG(INFO) << "Parameter server " << server->task_name() << " stopped: " << reason;
  if (termination::Requested()) return absl::CancelledError(absl::StrCat("ps ", reason));
  TaskResult result{config.task_type()};
  result.stop_reason = reason;
  return result;
}

absl::StatusOr<TaskResult> RunEvaluator(Estimator& estimator, const TrainSpec& train_spec,
                                        const EvalSpec& eval_spec) {
  if (!train_spec.max_steps) {
    return ConfigError(
        "the evaluator needs [train] max_steps: it ends after evaluating the checkpoint at "
        "max_steps, and without it would never know that training is over");
  }
  const int64_t max_steps = *train_spec.max_steps;
  if (eval_spec.start_delay_secs > 0) {
    LOG(INFO) << "Evaluator: waiting " << eval_spec.start_delay_secs
              << " secs (start_delay_secs) before the first evaluation";
    SleepSeconds(static_cast<double>(eval_spec.start_delay_secs));
  }
  TaskResult result{std::string(kJobEvaluator)};
  // A restarted evaluator (or one started after the chief evaluated) does not evaluate
  // again what model_dir/eval_<name> already holds.
  int64_t evaluated_step = LatestSummaryStep(estimator.EvalDir(eval_spec.name), "loss");
  if (evaluated_step >= 0) {
    LOG(INFO) << "Evaluator: " << estimator.EvalDir(eval_spec.name)
              << " already holds an evaluation at global step " << evaluated_step
              << "; checkpoints up to it are not evaluated again";
  }
  if (evaluated_step >= max_steps) {
    LOG(INFO) << "Evaluator: the checkpoint at max_steps " << max_steps
              << " was already evaluated; done";
    return result;
  }
  std::string last_evaluated;
  std::optional<Clock::time_point> last_start;
  Clock::time_point waiting_since = Clock::now(), last_waiting_log = Clock::now();
  int failures = 0;
  while (true) {
    if (termination::Requested()) {
      return absl::CancelledError(
          absl::StrCat("evaluator stopped by ", strsignal(termination::Signal())));
    }
    std::string latest = estimator.LatestCheckpoint();
    if (!latest.empty() && latest != last_evaluated &&
        checkpoint::CheckpointGlobalStep(latest) <= evaluated_step) {
      last_evaluated = latest;  // Evaluated before a restart.
    }
    if (latest.empty() || latest == last_evaluated) {
      if (SecondsSince(last_waiting_log) >= kWaitingLogSecs) {
        LOG(INFO) << "Evaluator: waiting for a checkpoint in " << estimator.model_dir()
                  << (last_evaluated.empty() ? "" : " newer than " + last_evaluated)
                  << " (training ends at max_steps " << max_steps << "); none for "
                  << static_cast<int64_t>(SecondsSince(waiting_since)) << " secs";
        last_waiting_log = Clock::now();
      }
      SleepSeconds(kPollSecs);
      continue;
    }
    if (last_start) {
      const double wait = static_cast<double>(eval_spec.throttle_secs) - SecondsSince(*last_start);
      if (wait > 0) {
        SleepSeconds(wait);
        latest = estimator.LatestCheckpoint();  // A newer one may have come meanwhile.
      }
    }
    last_start = Clock::now();
    absl::StatusOr<EvalResult> r = EvaluateCheckpoint(estimator, eval_spec, latest, max_steps);
    if (!r.ok()) {
      // Retention may delete a checkpoint while it is read; a newer one replaces it.
      if (IsConfigError(r.status()) || ++failures > kMaxEvaluationFailures) return r.status();
      LOG(WARNING) << "Evaluator: evaluating " << latest << " failed (" << failures << " of "
                   << kMaxEvaluationFailures << " in a row allowed): " << r.status();
      continue;
    }
    failures = 0;
    last_evaluated = latest;
    evaluated_step = std::max(evaluated_step, r->global_step);
    waiting_since = last_waiting_log = Clock::now();
    result.evaluation = *r;
    if (r->global_step >= max_steps) {
      LOG(INFO) << "Evaluator: evaluated the checkpoint at global step " << r->global_step
                << " (max_steps " << max_steps << "); done";
      return result;
    }
  }
}

absl::Status EndCluster(const RunConfig& config, const TransportSecurity& security) {
  const ClusterSpec& cluster = config.cluster_spec();
  const Clock::time_point start = Clock::now();
  Clock::time_point last_log = start;
  while (true) {
    if (termination::Requested()) {
      // The ps tasks end on their own once they see the final checkpoint and no chief.
      return absl::CancelledError(absl::StrCat("stopped by ", strsignal(termination::Signal()),
                                               " while waiting for the workers to exit"));
    }
    // Without a chief job, worker 0 is the chief: it does not wait for itself. A
    // worker that does not answer is not waited for (a frozen one may never come back;
    // thawed, it finds training over), but named.
    const auto [up, silent] = ProbeWorkers(config, security);
    if (!silent.empty() && (up.empty() || SecondsSince(last_log) >= kWorkerExitLogSecs)) {
      LOG(WARNING) << "Chief: not waiting for workers that do not answer (frozen or "
                   << "partitioned?): " << absl::StrJoin(silent, ", ");
    }
    if (up.empty()) break;
    if (SecondsSince(start) >= kWorkerExitWaitSecs) {
      LOG(WARNING) << "Chief: workers still up after " << kWorkerExitWaitSecs
                   << " secs, shutting the ps tasks down anyway: " << absl::StrJoin(up, ", ");
      break;
    }
    if (SecondsSince(last_log) >= kWorkerExitLogSecs) {
      LOG(INFO) << "Chief: waiting for workers to finish: " << absl::StrJoin(up, ", ");
      last_log = Clock::now();
    }
    SleepSeconds(kPollSecs);
  }
  absl::Status first_error;
  for (int index : cluster.TaskIndices(kJobPs)) {
    TANDEM_ASSIGN_OR_RETURN(std::string address, cluster.TaskAddress(kJobPs, index));
    absl::Status s = ShutdownTask(address, security, "training finished", kShutdownTimeoutMs);
    if (s.ok()) {
      LOG(INFO) << "Chief: shut down ps:" << index << " (" << address << ")";
    } else if (absl::IsUnavailable(s)) {
      LOG(WARNING) << "Chief: ps:" << index << " (" << address << ") is already gone: " << s;
    } else {
      LOG(WARNING) << "Chief: could not shut down ps:" << index << " (" << address << "): " << s;
      if (first_error.ok())
        first_error = AnnotateStatus(s, absl::StrCat("shutting down ps:", index));
    }
  }
  return first_error;
}

}  // namespace tandem::internal

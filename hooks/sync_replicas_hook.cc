// hooks/sync_replicas_hook.cc
#include "hooks/sync_replicas_hook.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/status.h"
#include "glog/logging.h"
#include "hooks/internal/hook_util.h"
#include "hooks/summary_writer.h"

namespace tandem {
namespace {

constexpr double kMissingLogSecs = 30;
constexpr double kRetrySecs = 1;
constexpr int64_t kSummaryEveryUpdates = 100;

// The chief also logs its facts as "event=NAME key=value ..." lines, whose form stays
// when the prose around them changes (tests and log scrapers read them):
//   event=sync_replicas_waiting aggregated_updates=U wanted=W live=L missing=a,b
//     when it starts waiting for missing replicas (U: updates so far);
//   event=sync_replicas_resumed aggregated_updates=U replicas=R waited_secs=S
//     when they are back (U: updates before the one that found them back, so equal
//     to the waiting event's when nothing was aggregated meanwhile; R: the gradients
//     each update aggregates from then on);
//   event=sync_replicas_end aggregated_updates=U stale_gradients=S duplicate_gradients=D
//     at End.
void LogResumed(int64_t updates, int replicas, double waited_secs) {
  LOG(INFO) << "event=sync_replicas_resumed aggregated_updates=" << updates
            << " replicas=" << replicas << " waited_secs=" << static_cast<int64_t>(waited_secs);
}

double NowSecs() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

SyncReplicasHook::SyncReplicasHook(SyncReplicasHookOptions options)
    : options_(std::move(options)) {}

SyncReplicasHook::~SyncReplicasHook() { StopRunner(); }

absl::Status SyncReplicasHook::Begin(Graph* graph) {
  graph_ = graph;
  TANDEM_ASSIGN_OR_RETURN(names_, ops::GetSyncReplicasGraph(*graph));
  TANDEM_ASSIGN_OR_RETURN(global_step_tensor_,
                          hooks_internal::GlobalStepTensorName(graph, "SyncReplicasHook"));
  if (options_.replicas_to_aggregate < 1 || options_.total_num_replicas < 1) {
    return absl::InvalidArgumentError(
        "SyncReplicasHook: replicas_to_aggregate and total_num_replicas must be >= 1");
  }
  if (options_.is_chief && !options_.factory) {
    return absl::InvalidArgumentError("SyncReplicasHook: the chief needs a session factory");
  }
  return absl::OkStatus();
}

absl::Status SyncReplicasHook::AfterCreateSession(Session* session) {
  TANDEM_ASSIGN_OR_RETURN(local_step_, hooks_internal::ReadInt64(session, global_step_tensor_));
  if (!options_.is_chief) return absl::OkStatus();
  absl::StatusOr<std::vector<Tensor>> init = session->Run({}, {}, {names_.chief_init});
  if (!init.ok()) return AnnotateStatus(init.status(), "initialising synchronous replicas");
  if (!runner_.joinable()) StartRunner();
  return absl::OkStatus();
}

absl::StatusOr<SessionRunArgs> SyncReplicasHook::BeforeRun(SessionRunContext& context) {
  {
    absl::MutexLock lock(&mu_);
    TANDEM_RETURN_IF_ERROR(runner_error_);
  }
  SessionRunArgs args;
  args.feeds = {{names_.local_step, Tensor::Scalar<int64_t>(local_step_)},
                {names_.replica, Tensor::Scalar<int64_t>(options_.replica_id)}};
  args.fetches = {names_.next_step};
  return args;
}

absl::Status SyncReplicasHook::AfterRun(SessionRunContext& context,
                                        const SessionRunValues& values) {
  if (values.results.size() != 1 || values.results[0].NumElements() != 1) {
    return absl::InternalError("SyncReplicasHook: the next step was not fetched");
  }
  local_step_ = values.results[0].scalar<int64_t>();
  return absl::OkStatus();
}

absl::Status SyncReplicasHook::End(Session* session) {
  if (!options_.is_chief) return absl::OkStatus();
  StopRunner();
  LOG(INFO) << "Synchronous replicas: " << updates_.load() << " aggregated updates by this chief; "
            << stale_.load() << " stale gradients dropped, " << duplicates_.load()
            << " duplicates ignored";
  LOG(INFO) << "event=sync_replicas_end aggregated_updates=" << updates_.load()
            << " stale_gradients=" << stale_.load()
            << " duplicate_gradients=" << duplicates_.load();
  WriteDropped();
  absl::MutexLock lock(&mu_);
  return runner_error_;
}

void SyncReplicasHook::StartRunner() {
  graph_->ToGraphDef(&graph_def_);
  stop_ = false;
  runner_ = std::thread([this] { RunnerLoop(); });
}

void SyncReplicasHook::StopRunner() {
  stop_ = true;
  if (runner_.joinable()) runner_.join();
}

void SyncReplicasHook::RunnerLoop() {
  std::unique_ptr<Session> session;
  int required = options_.replicas_to_aggregate;
  const auto retry = [&](const absl::Status& s) {
    if (stop_) return;
    LOG(WARNING) << "Synchronous replicas: the chief's aggregation failed, retrying in "
                 << kRetrySecs << " s: " << s;
    if (session != nullptr) session->Close().IgnoreError();
    session.reset();
    std::this_thread::sleep_for(std::chrono::duration<double>(kRetrySecs));
  };
  while (!stop_) {
    if (session == nullptr) {
      absl::StatusOr<std::unique_ptr<Session>> s =
          options_.factory(graph_def_, options_.session_options);
      if (!s.ok()) {
        retry(s.status());
        continue;
      }
      session = std::move(*s);
    }
    const FeedMap feeds = {{names_.num_required, Tensor::Scalar<int32_t>(required)}};
    absl::StatusOr<std::vector<Tensor>> counts = session->Run(feeds, names_.waits, {});
    if (!counts.ok()) {
      retry(counts.status());
      continue;
    }
    int64_t fewest = INT64_MAX;
    for (const Tensor& c : *counts) fewest = std::min(fewest, c.scalar<int64_t>());
    if (fewest >= required) {
      absl::StatusOr<std::vector<Tensor>> r = session->Run(feeds, names_.stats, {names_.update});
      if (!r.ok()) {
        retry(r.status());
        continue;
      }
      const int64_t n = ++updates_;
      if (waiting_since_ >= 0) {
        LOG(INFO) << "Synchronous replicas: the missing replicas are back after "
                  << static_cast<int64_t>(NowSecs() - waiting_since_) << " s; aggregating "
                  << required << " gradients per step";
        LogResumed(n - 1, required, NowSecs() - waiting_since_);
        waiting_since_ = -1;
      }
      // Each accumulator's {step, accumulated, stale, duplicates} after the take.
      int64_t step = 0, stale = 0, duplicates = 0;
      for (const Tensor& t : *r) {
        step = std::max(step, t.data<int64_t>()[0]);
        stale = std::max(stale, t.data<int64_t>()[2]);
        duplicates = std::max(duplicates, t.data<int64_t>()[3]);
      }
      step_ = step;
      stale_ = stale;
      duplicates_ = duplicates;
      if (n % kSummaryEveryUpdates == 0) WriteDropped();
      // Aggregating fewer than asked: see now and then whether the missing returned.
      if (required < options_.replicas_to_aggregate && n % 50 == 0) CheckReplicas(&required);
      continue;
    }
    if (!CheckReplicas(&required)) break;
  }
  if (session != nullptr) session->Close().IgnoreError();
}

bool SyncReplicasHook::CheckReplicas(int* required) {
  const int wanted = options_.replicas_to_aggregate;
  std::vector<std::string> missing;
  if (options_.missing_replicas) missing = options_.missing_replicas();
  const int live = options_.total_num_replicas - static_cast<int>(missing.size());
  if (live >= wanted) {
    // One message for a return, whichever notices it first: this check or an update
    // that gathered every gradient.
    if (waiting_since_ >= 0) {
      LOG(INFO) << "Synchronous replicas: the missing replicas are back after "
                << static_cast<int64_t>(NowSecs() - waiting_since_) << " s; " << live
                << " replicas up, aggregating " << wanted << " gradients per step";
      LogResumed(updates_.load(), wanted, NowSecs() - waiting_since_);
    } else if (*required != wanted) {
      LOG(INFO) << "Synchronous replicas: " << live << " replicas are up again; aggregating "
                << wanted << " gradients per step";
    }
    *required = wanted;
    waiting_since_ = -1;
    return true;
  }
  const std::string names = absl::StrJoin(missing, ", ");
  if (options_.on_missing == SyncReplicasHookOptions::OnMissing::kContinue) {
    const int fewer = std::max(1, live);
    if (fewer != *required) {
      LOG(WARNING) << "Synchronous replicas: missing " << names << "; aggregating " << fewer
                   << " gradients per step instead of " << wanted << " until they return";
      *required = fewer;
    }
    return true;
  }
  const double now = NowSecs();
  if (waiting_since_ < 0) {
    waiting_since_ = now;
    last_missing_log_ = -1;
    LOG(WARNING) << "event=sync_replicas_waiting aggregated_updates=" << updates_.load()
                 << " wanted=" << wanted << " live=" << live
                 << " missing=" << absl::StrJoin(missing, ",");
  }
  const double waited = now - waiting_since_;
  if (last_missing_log_ < 0 || now - last_missing_log_ >= kMissingLogSecs) {
    LOG(WARNING) << "Synchronous replicas: waiting for " << wanted << " replicas' gradients, "
                 << live << " up; missing " << names << " for " << static_cast<int64_t>(waited)
                 << " s"
                 << (options_.patience_secs > 0
                         ? absl::StrCat(" (giving up after ", options_.patience_secs, " s)")
                         : std::string());
    last_missing_log_ = now;
  }
  if (options_.patience_secs > 0 && waited > options_.patience_secs) {
    absl::MutexLock lock(&mu_);
    runner_error_ = absl::DeadlineExceededError(absl::StrCat(
        "synchronous replicas: ", names, " missing for more than ", options_.patience_secs,
        " s (missing_replicas_patience_secs); replicas_to_aggregate = ", wanted, " but ", live,
        " up"));
    return false;
  }
  return true;
}

void SyncReplicasHook::WriteDropped() {
  if (options_.summary_dir.empty() || updates_.load() == 0) return;
  absl::StatusOr<std::shared_ptr<SummaryWriter>> writer = SummaryWriterForDir(options_.summary_dir);
  if (!writer.ok()) return;
  absl::Status s = (*writer)->AddScalars(
      {{"sync_replicas/stale_gradients", static_cast<float>(stale_.load())},
       {"sync_replicas/duplicate_gradients", static_cast<float>(duplicates_.load())}},
      step_.load());
  if (s.ok()) s = (*writer)->Flush();
  if (!s.ok()) LOG(WARNING) << "Synchronous replicas: writing the summaries: " << s;
}

}  // namespace tandem

// hooks/stop_hooks.cc: StopAtStepHook, GlobalStepWaiterHook and EarlyStoppingHook.
#include "hooks/stop_hooks.h"

#include <charconv>
#include <chrono>
#include <cmath>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "framework/core/status.h"
#include "glog/logging.h"
#include "hooks/internal/hook_util.h"
#include "hooks/summary.h"

namespace tandem {

using hooks_internal::FetchOf;
using hooks_internal::GlobalStepTensorName;
using hooks_internal::ReadInt64;
using hooks_internal::ScalarToInt64;

// ---------------------------------------------------------------------------------------
// StopAtStepHook

StopAtStepHook::StopAtStepHook(std::optional<int64_t> num_steps, std::optional<int64_t> last_step)
    : num_steps_(num_steps), last_step_(last_step) {}

absl::Status StopAtStepHook::Begin(Graph* graph) {
  if (num_steps_.has_value() == last_step_.has_value()) {
    return absl::InvalidArgumentError(
        "StopAtStepHook: exactly one of num_steps and last_step must be set");
  }
  if (num_steps_.has_value() && *num_steps_ < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("StopAtStepHook: num_steps must be >= 0, got ", *num_steps_));
  }
  TANDEM_ASSIGN_OR_RETURN(global_step_tensor_, GlobalStepTensorName(graph, "StopAtStepHook"));
  return absl::OkStatus();
}

absl::Status StopAtStepHook::AfterCreateSession(Session* session) {
  // After a recovery the target step stays the one computed the first time.
  if (last_step_.has_value()) return absl::OkStatus();
  TANDEM_ASSIGN_OR_RETURN(int64_t global_step, ReadInt64(session, global_step_tensor_));
  last_step_ = global_step + *num_steps_;
  return absl::OkStatus();
}

absl::StatusOr<SessionRunArgs> StopAtStepHook::BeforeRun(SessionRunContext& context) {
  return FetchOf(global_step_tensor_);
}

absl::Status StopAtStepHook::AfterRun(SessionRunContext& context, const SessionRunValues& values) {
  TANDEM_ASSIGN_OR_RETURN(int64_t stale, ScalarToInt64(values.results.at(0), global_step_tensor_));
  if (stale + 1 >= *last_step_) {
    // The fetched value may predate this step's increment: read it again.
    TANDEM_ASSIGN_OR_RETURN(int64_t step, ReadInt64(context.session(), global_step_tensor_));
    if (step >= *last_step_) context.RequestStop();
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------
// GlobalStepWaiterHook

GlobalStepWaiterHook::GlobalStepWaiterHook(int64_t wait_until_step, double poll_secs)
    : wait_until_step_(wait_until_step), poll_secs_(poll_secs) {}

absl::Status GlobalStepWaiterHook::Begin(Graph* graph) {
  waited_ = false;
  TANDEM_ASSIGN_OR_RETURN(global_step_tensor_, GlobalStepTensorName(graph, "GlobalStepWaiterHook"));
  return absl::OkStatus();
}

absl::StatusOr<SessionRunArgs> GlobalStepWaiterHook::BeforeRun(SessionRunContext& context) {
  if (waited_) return SessionRunArgs();
  if (wait_until_step_ <= 0) {
    waited_ = true;
    return SessionRunArgs();
  }
  LOG(INFO) << "Waiting for global step " << wait_until_step_ << " before starting training.";
  int64_t last_logged = 0;
  const auto poll = std::chrono::duration<double>(std::max(poll_secs_, 0.001));
  while (true) {
    TANDEM_ASSIGN_OR_RETURN(int64_t step, ReadInt64(context.session(), global_step_tensor_));
    if (step >= wait_until_step_) break;
    if (step - last_logged > 1000) {
      LOG(INFO) << "Waiting for global step " << wait_until_step_
                << " before starting training. Current step is " << step << ".";
      last_logged = step;
    }
    std::this_thread::sleep_for(poll);
  }
  waited_ = true;
  return SessionRunArgs();
}

// ---------------------------------------------------------------------------------------
// EarlyStoppingHook

EarlyStoppingHook::EarlyStoppingHook(std::string eval_dir, std::string metric_name,
                                     bool higher_is_better, int64_t max_steps_without_improvement,
                                     int64_t min_steps, Every every)
    : eval_dir_(std::move(eval_dir)),
      metric_name_(std::move(metric_name)),
      higher_is_better_(higher_is_better),
      max_steps_without_improvement_(max_steps_without_improvement),
      min_steps_(min_steps),
      timer_(every.secs, every.steps) {}

absl::Status EarlyStoppingHook::Begin(Graph* graph) {
  TANDEM_ASSIGN_OR_RETURN(global_step_tensor_, GlobalStepTensorName(graph, "EarlyStoppingHook"));
  return absl::OkStatus();
}

absl::StatusOr<SessionRunArgs> EarlyStoppingHook::BeforeRun(SessionRunContext& context) {
  return FetchOf(global_step_tensor_);
}

absl::Status EarlyStoppingHook::AfterRun(SessionRunContext& context,
                                         const SessionRunValues& values) {
  TANDEM_ASSIGN_OR_RETURN(int64_t global_step,
                          ScalarToInt64(values.results.at(0), global_step_tensor_));
  if (!timer_.ShouldTrigger(global_step)) return absl::OkStatus();
  timer_.UpdateLastTriggered(global_step);
  if (global_step < min_steps_) return absl::OkStatus();

  absl::StatusOr<std::map<std::string, std::vector<ScalarPoint>>> scalars = ReadScalars(eval_dir_);
  if (!scalars.ok()) {
    // No evaluation yet (or a file being written): try again next time.
    if (!absl::IsNotFound(scalars.status())) {
      LOG(WARNING) << "EarlyStoppingHook: cannot read evaluations in " << eval_dir_ << ": "
                   << scalars.status();
    }
    return absl::OkStatus();
  }
  auto it = scalars->find(metric_name_);
  if (it == scalars->end()) return absl::OkStatus();
  // One value per evaluated step (the last written wins), in step order, as TensorFlow's
  // read_eval_metrics.
  std::map<int64_t, float> by_step;
  for (const ScalarPoint& p : it->second) by_step[p.step] = p.value;

  std::optional<float> best;
  int64_t best_step = 0;
  for (const auto& [step, value] : by_step) {
    if (step < min_steps_) continue;
    if (!best.has_value() || (higher_is_better_ ? value > *best : value < *best)) {
      best = value;
      best_step = step;
    }
    if (step - best_step >= max_steps_without_improvement_) {
      LOG(INFO) << "No " << (higher_is_better_ ? "increase" : "decrease") << " in metric \""
                << metric_name_ << "\" for " << step - best_step
                << " steps, which is greater than or equal to max steps ("
                << max_steps_without_improvement_ << ") configured for early stopping.";
      LOG(INFO) << "Requesting early stopping at global step " << global_step;
      context.RequestStop();
      break;
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem

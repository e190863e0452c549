// hooks/session_run_hook.cc: SecondOrStepTimer (TensorFlow's SecondOrStepTimer).
#include "hooks/session_run_hook.h"

#include <chrono>

namespace tandem {
namespace {

double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

SecondOrStepTimer::SecondOrStepTimer(std::optional<double> every_secs,
                                     std::optional<int64_t> every_steps)
    : every_secs_(every_secs), every_steps_(every_steps) {}

bool SecondOrStepTimer::ShouldTrigger(int64_t step) const {
  // Neither or both set: never fires (TensorFlow rejects these; hooks validate earlier).
  if (every_secs_.has_value() == every_steps_.has_value()) return false;
  if (!last_step_.has_value()) return true;
  if (*last_step_ == step) return false;
  if (every_secs_.has_value()) return MonotonicSeconds() >= last_time_ + *every_secs_;
  return step >= *last_step_ + *every_steps_;
}

std::optional<std::pair<double, int64_t>> SecondOrStepTimer::UpdateLastTriggered(int64_t step) {
  const double now = MonotonicSeconds();
  std::optional<std::pair<double, int64_t>> elapsed;
  if (last_step_.has_value()) elapsed = std::make_pair(now - last_time_, step - *last_step_);
  last_time_ = now;
  last_step_ = step;
  return elapsed;
}

}  // namespace tandem

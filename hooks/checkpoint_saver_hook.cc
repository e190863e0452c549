// hooks/checkpoint_saver_hook.cc: CheckpointSaverHook (tf.train.CheckpointSaverHook).
//
// As TensorFlow: a checkpoint is saved right after the session is created (so a new
// model directory always has one), then whenever the timer fires for the (re-read)
// global step, and at End unless the last save was at the final step. The scaffold's
// saver is used; Scaffold::Finalize always creates one (also for a graph without
// variables, where a checkpoint holds only the step), so a missing saver means the
// scaffold was not finalised: FAILED_PRECONDITION.
#include "hooks/checkpoint_saver_hook.h"

#include "absl/strings/str_cat.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "glog/logging.h"
#include "hooks/internal/hook_util.h"

namespace tandem {

using hooks_internal::FetchOf;
using hooks_internal::GlobalStepTensorName;
using hooks_internal::ReadInt64;
using hooks_internal::ScalarToInt64;

CheckpointSaverHook::CheckpointSaverHook(
    std::string checkpoint_dir, Every every, Scaffold* scaffold,
    std::vector<std::shared_ptr<CheckpointSaverListener>> listeners)
    : checkpoint_dir_(std::move(checkpoint_dir)),
      timer_(every.secs, every.steps),
      scaffold_(scaffold),
      listeners_(std::move(listeners)) {}

absl::Status CheckpointSaverHook::Begin(Graph* graph) {
  if (checkpoint_dir_.empty()) {
    return absl::InvalidArgumentError("CheckpointSaverHook: checkpoint_dir is empty");
  }
  if (scaffold_ == nullptr) {
    return absl::InvalidArgumentError("CheckpointSaverHook: scaffold is null");
  }
  TANDEM_ASSIGN_OR_RETURN(global_step_tensor_, GlobalStepTensorName(graph, "CheckpointSaverHook"));
  for (const auto& listener : listeners_) TANDEM_RETURN_IF_ERROR(listener->Begin());
  return absl::OkStatus();
}

absl::Status CheckpointSaverHook::AfterCreateSession(Session* session) {
  TANDEM_ASSIGN_OR_RETURN(int64_t global_step, ReadInt64(session, global_step_tensor_));
  // A stop asked for by a listener here is ignored, as in TensorFlow.
  bool stop = false;
  TANDEM_RETURN_IF_ERROR(Save(session, global_step, &stop));
  timer_.UpdateLastTriggered(global_step);
  return absl::OkStatus();
}

absl::StatusOr<SessionRunArgs> CheckpointSaverHook::BeforeRun(SessionRunContext& context) {
  return FetchOf(global_step_tensor_);
}

absl::Status CheckpointSaverHook::AfterRun(SessionRunContext& context,
                                           const SessionRunValues& values) {
  TANDEM_ASSIGN_OR_RETURN(int64_t stale, ScalarToInt64(values.results.at(0), global_step_tensor_));
  if (!timer_.ShouldTrigger(stale + steps_per_run_)) return absl::OkStatus();
  // The fetched value may predate this step's increment: save at the real one.
  TANDEM_ASSIGN_OR_RETURN(int64_t global_step, ReadInt64(context.session(), global_step_tensor_));
  if (!timer_.ShouldTrigger(global_step)) return absl::OkStatus();
  timer_.UpdateLastTriggered(global_step);
  bool stop = false;
  TANDEM_RETURN_IF_ERROR(Save(context.session(), global_step, &stop));
  if (stop) context.RequestStop();
  return absl::OkStatus();
}

absl::Status CheckpointSaverHook::End(Session* session) {
  TANDEM_ASSIGN_OR_RETURN(int64_t last_step, ReadInt64(session, global_step_tensor_));
  if (timer_.last_triggered_step() != last_step) {
    bool stop = false;
    TANDEM_RETURN_IF_ERROR(Save(session, last_step, &stop));
  }
  for (const auto& listener : listeners_) {
    TANDEM_RETURN_IF_ERROR(listener->End(session, last_step));
  }
  return absl::OkStatus();
}

absl::Status CheckpointSaverHook::Save(Session* session, int64_t step, bool* stop) {
  checkpoint::Saver* saver = scaffold_->saver();
  if (saver == nullptr) {
    return absl::FailedPreconditionError(
        "CheckpointSaverHook: the scaffold has no saver (was it finalized for this graph?)");
  }
  VLOG(1) << "Calling checkpoint listeners before saving checkpoint " << step << "...";
  for (const auto& listener : listeners_) {
    TANDEM_RETURN_IF_ERROR(listener->BeforeSave(session, step));
  }
  LOG(INFO) << "Saving checkpoints for " << step << " into "
            << env::JoinPath(checkpoint_dir_, "model.ckpt") << ".";
  absl::StatusOr<std::string> prefix = saver->Save(session, checkpoint_dir_, step);
  if (!prefix.ok()) {
    return AnnotateStatus(prefix.status(), absl::StrCat("CheckpointSaverHook: saving step ", step,
                                                        " into ", checkpoint_dir_));
  }
  VLOG(1) << "Calling checkpoint listeners after saving checkpoint " << step << "...";
  for (const auto& listener : listeners_) {
    TANDEM_ASSIGN_OR_RETURN(bool listener_stop, listener->AfterSave(session, step, *prefix));
    if (listener_stop) *stop = true;
  }
  return absl::OkStatus();
}

}  // namespace tandem

// hooks/checkpoint_saver_hook.h
//
// CheckpointSaverHook (tf.train.CheckpointSaverHook): saves with the scaffold's saver
// every N secs/steps, after session creation and at the end, with
// CheckpointSaverListeners called around each save.
//
// Thread safety: see session_run_hook.h.
#ifndef TANDEM_HOOKS_CHECKPOINT_SAVER_HOOK_H_
#define TANDEM_HOOKS_CHECKPOINT_SAVER_HOOK_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hooks/scaffold.h"
#include "hooks/session_run_hook.h"

namespace tandem {

// Called around checkpoint saves (tf.train.CheckpointSaverListener).
class CheckpointSaverListener {
 public:
  virtual ~CheckpointSaverListener() = default;
  virtual absl::Status Begin() { return absl::OkStatus(); }
  virtual absl::Status BeforeSave(Session* session, int64_t global_step) {
    return absl::OkStatus();
  }
  // Returning true asks the training loop to stop.
  virtual absl::StatusOr<bool> AfterSave(Session* session, int64_t global_step,
                                         const std::string& checkpoint_prefix) {
    return false;
  }
  virtual absl::Status End(Session* session, int64_t global_step) { return absl::OkStatus(); }
};

class CheckpointSaverHook : public SessionRunHook {
 public:
  // Saves with `scaffold`'s saver (not owned; finalised before AfterCreateSession).
  CheckpointSaverHook(std::string checkpoint_dir, Every every, Scaffold* scaffold,
                      std::vector<std::shared_ptr<CheckpointSaverListener>> listeners = {});
  absl::Status Begin(Graph* graph) override;
  absl::Status AfterCreateSession(Session* session) override;
  absl::StatusOr<SessionRunArgs> BeforeRun(SessionRunContext& context) override;
  absl::Status AfterRun(SessionRunContext& context, const SessionRunValues& values) override;
  absl::Status End(Session* session) override;

 private:
  // Saves at `step`; sets *stop when a listener asks to stop.
  absl::Status Save(Session* session, int64_t step, bool* stop);

  std::string checkpoint_dir_;
  SecondOrStepTimer timer_;
  Scaffold* scaffold_;  // Not owned.
  std::vector<std::shared_ptr<CheckpointSaverListener>> listeners_;
  std::string global_step_tensor_;
  int64_t steps_per_run_ = 1;
};

}  // namespace tandem

#endif  // TANDEM_HOOKS_CHECKPOINT_SAVER_HOOK_H_

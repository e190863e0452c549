// hooks/summary_saver_hook.h
//
// SummarySaverHook (tf.train.SummarySaverHook): writes the graph's scalar summaries
// every N steps/secs to the directory's shared SummaryWriter (SummaryWriterForDir).
//
// Thread safety: see session_run_hook.h.
#ifndef TANDEM_HOOKS_SUMMARY_SAVER_HOOK_H_
#define TANDEM_HOOKS_SUMMARY_SAVER_HOOK_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hooks/session_run_hook.h"
#include "hooks/summary_writer.h"

namespace tandem {

class SummarySaverHook : public SessionRunHook {
 public:
  // Writes the graph's scalar summaries (ops::summary, collection kSummaries, found in
  // Begin) to the summary writer of `output_dir` when the timer fires.
  // Every session created also writes SessionLog START at the global step it starts
  // from.
  SummarySaverHook(Every every, std::string output_dir);
  absl::Status Begin(Graph* graph) override;
  absl::Status AfterCreateSession(Session* session) override;
  absl::StatusOr<SessionRunArgs> BeforeRun(SessionRunContext& context) override;
  absl::Status AfterRun(SessionRunContext& context, const SessionRunValues& values) override;
  absl::Status End(Session* session) override;

 private:
  SecondOrStepTimer timer_;
  std::string output_dir_;
  std::shared_ptr<SummaryWriter> writer_;
  std::vector<std::pair<std::string, std::string>> summaries_;  // tag -> tensor
  std::string global_step_tensor_;
  bool request_summary_ = false;
  int64_t next_step_ = -1;
};

}  // namespace tandem

#endif  // TANDEM_HOOKS_SUMMARY_SAVER_HOOK_H_

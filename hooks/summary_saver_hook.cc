// hooks/summary_saver_hook.cc: SummarySaverHook (tf.train.SummarySaverHook).
//
// TensorFlow's scheduling: the first step always writes; afterwards BeforeRun asks for
// the summaries when the timer would fire at the step this run is expected to produce
// (next_step_ = the last seen global step + 1). The values are written at the global
// step re-read after the run. Records are flushed after each write (they are rare) and
// at End. Each session (a start, a restart, a recovery) begins with SessionLog START
// at the global step it starts from (read when it is created; TensorFlow's hook
// writes it at the first step), so TensorBoard drops the events a previous run wrote
// past that step.
#include "hooks/summary_saver_hook.h"

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/ops/summary_ops.h"
#include "hooks/internal/hook_util.h"

namespace tandem {

using hooks_internal::GlobalStepTensorName;
using hooks_internal::ReadInt64;
using hooks_internal::ScalarToInt64;

SummarySaverHook::SummarySaverHook(Every every, std::string output_dir)
    : timer_(every.secs, every.steps), output_dir_(std::move(output_dir)) {}

absl::Status SummarySaverHook::Begin(Graph* graph) {
  if (!output_dir_.empty() && writer_ == nullptr) {
    TANDEM_ASSIGN_OR_RETURN(writer_, SummaryWriterForDir(output_dir_));
  }
  next_step_ = -1;
  TANDEM_ASSIGN_OR_RETURN(global_step_tensor_, GlobalStepTensorName(graph, "SummarySaverHook"));
  summaries_.clear();
  for (const ops::summary::ScalarSummaryTensor& s : ops::summary::ScalarSummaries(*graph)) {
    summaries_.emplace_back(s.tag, s.tensor);
  }
  return absl::OkStatus();
}

absl::Status SummarySaverHook::AfterCreateSession(Session* session) {
  next_step_ = -1;  // The session may have restored an older step.
  if (writer_ == nullptr) return absl::OkStatus();
  TANDEM_ASSIGN_OR_RETURN(int64_t step, ReadInt64(session, global_step_tensor_));
  proto::Event start;
  start.set_step(step);
  start.mutable_session_log()->set_status(proto::SessionLog::START);
  return writer_->AddEvent(std::move(start));
}

absl::StatusOr<SessionRunArgs> SummarySaverHook::BeforeRun(SessionRunContext& context) {
  request_summary_ = next_step_ < 0 || timer_.ShouldTrigger(next_step_);
  SessionRunArgs args;
  args.fetches.push_back(global_step_tensor_);
  if (request_summary_) {
    for (const auto& [tag, tensor] : summaries_) args.fetches.push_back(tensor);
  }
  return args;
}

absl::Status SummarySaverHook::AfterRun(SessionRunContext& context,
                                        const SessionRunValues& values) {
  if (writer_ == nullptr) return absl::OkStatus();
  TANDEM_ASSIGN_OR_RETURN(int64_t stale, ScalarToInt64(values.results.at(0), global_step_tensor_));
  int64_t global_step = stale + 1;
  if (next_step_ < 0 || request_summary_) {
    TANDEM_ASSIGN_OR_RETURN(global_step, ReadInt64(context.session(), global_step_tensor_));
  }
  if (request_summary_) {
    timer_.UpdateLastTriggered(global_step);
    if (!summaries_.empty()) {
      if (values.results.size() != summaries_.size() + 1) {
        return absl::InternalError("SummarySaverHook: wrong number of fetched values");
      }
      std::vector<std::pair<std::string, float>> scalars;
      for (size_t i = 0; i < summaries_.size(); ++i) {
        const Tensor& t = values.results[i + 1];
        if (!t.IsInitialized() || t.dtype() == DType::kResource || t.NumElements() != 1) {
          return absl::InvalidArgumentError(absl::StrCat(
              "SummarySaverHook: summary '", summaries_[i].first, "' (", summaries_[i].second,
              ") is not a scalar: shape ", t.shape().DebugString()));
        }
        scalars.emplace_back(summaries_[i].first, static_cast<float>(t.ValueAsDouble(0)));
      }
      TANDEM_RETURN_IF_ERROR(writer_->AddScalars(scalars, global_step));
      TANDEM_RETURN_IF_ERROR(writer_->Flush());
    }
  }
  next_step_ = global_step + 1;
  return absl::OkStatus();
}

absl::Status SummarySaverHook::End(Session* session) {
  if (writer_ != nullptr) TANDEM_RETURN_IF_ERROR(writer_->Flush());
  return absl::OkStatus();
}

}  // namespace tandem

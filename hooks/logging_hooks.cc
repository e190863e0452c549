// hooks/logging_hooks.cc: StepCounterHook, LoggingTensorHook, NanTensorHook and
// FinalOpsHook.
#include "hooks/logging_hooks.h"

#include <chrono>
#include <cmath>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "framework/core/status.h"
#include "framework/tensor/tensor_format.h"
#include "glog/logging.h"
#include "hooks/internal/hook_util.h"
#include "hooks/summary.h"

namespace tandem {

using hooks_internal::FetchOf;
using hooks_internal::GlobalStepTensorName;
using hooks_internal::ReadInt64;
using hooks_internal::ScalarToInt64;

// ---------------------------------------------------------------------------------------
// StepCounterHook

StepCounterHook::StepCounterHook(Every every, std::string output_dir)
    : timer_(every.secs, every.steps), output_dir_(std::move(output_dir)) {}

absl::Status StepCounterHook::Begin(Graph* graph) {
  TANDEM_ASSIGN_OR_RETURN(global_step_tensor_, GlobalStepTensorName(graph, "StepCounterHook"));
  if (!output_dir_.empty() && writer_ == nullptr) {
    TANDEM_ASSIGN_OR_RETURN(writer_, SummaryWriterForDir(output_dir_));
  }
  return absl::OkStatus();
}

absl::StatusOr<SessionRunArgs> StepCounterHook::BeforeRun(SessionRunContext& context) {
  return FetchOf(global_step_tensor_);
}

absl::Status StepCounterHook::AfterRun(SessionRunContext& context, const SessionRunValues& values) {
  TANDEM_ASSIGN_OR_RETURN(int64_t stale, ScalarToInt64(values.results.at(0), global_step_tensor_));
  if (!timer_.ShouldTrigger(stale + 1)) return absl::OkStatus();
  TANDEM_ASSIGN_OR_RETURN(int64_t global_step, ReadInt64(context.session(), global_step_tensor_));
  if (!timer_.ShouldTrigger(global_step)) return absl::OkStatus();
  std::optional<std::pair<double, int64_t>> elapsed = timer_.UpdateLastTriggered(global_step);
  if (!elapsed.has_value() || elapsed->first <= 0) return absl::OkStatus();
  const double steps_per_sec = static_cast<double>(elapsed->second) / elapsed->first;
  LOG(INFO) << absl::StrFormat("global_step/sec: %g", steps_per_sec);
  if (writer_ != nullptr) {
    TANDEM_RETURN_IF_ERROR(
        writer_->AddScalar("global_step/sec", static_cast<float>(steps_per_sec), global_step));
    // Rare records: hand them to the OS at once so TensorBoard sees them live.
    TANDEM_RETURN_IF_ERROR(writer_->Flush());
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------
// LoggingTensorHook

namespace {

// Appends dimension `dim` of `t` from flat element `offset` as a nested list, printing
// at most *budget numbers.
void AppendNested(const Tensor& t, int dim, int64_t offset, int64_t* budget, std::string* out) {
  if (dim == t.rank()) {
    absl::StrAppend(out, FormatElement(t, offset));
    --*budget;
    return;
  }
  int64_t stride = 1;
  for (int d = dim + 1; d < t.rank(); ++d) stride *= t.dim(d);
  absl::StrAppend(out, "[");
  for (int64_t i = 0; i < t.dim(dim); ++i) {
    if (i > 0) absl::StrAppend(out, ", ");
    if (*budget <= 0) {
      absl::StrAppend(out, "...");
      break;
    }
    AppendNested(t, dim + 1, offset + i * stride, budget, out);
  }
  absl::StrAppend(out, "]");
}

// Scalars as numbers; other tensors as nested lists ("[[1, 2], [3, 4]]") of at most 20
// numbers, then "...".
std::string FormatTensor(const Tensor& t) {
  if (!t.IsInitialized()) return "<uninitialized>";
  if (t.dtype() == DType::kResource) return t.DebugString();
  std::string out;
  int64_t budget = 20;
  AppendNested(t, 0, 0, &budget, &out);
  return out;
}

}  // namespace

LoggingTensorHook::LoggingTensorHook(std::vector<std::pair<std::string, std::string>> tensors,
                                     Every every, bool at_end)
    : tensors_(std::move(tensors)), timer_(every.secs, every.steps), at_end_(at_end) {}

absl::StatusOr<SessionRunArgs> LoggingTensorHook::BeforeRun(SessionRunContext& context) {
  // As TensorFlow: the timer counts this hook's iterations, not global steps.
  should_trigger_ = timer_.ShouldTrigger(iter_);
  SessionRunArgs args;
  if (should_trigger_) {
    for (const auto& [display, tensor] : tensors_) args.fetches.push_back(tensor);
  }
  return args;
}

absl::Status LoggingTensorHook::AfterRun(SessionRunContext& context,
                                         const SessionRunValues& values) {
  if (should_trigger_) {
    if (values.results.size() != tensors_.size()) {
      return absl::InternalError("LoggingTensorHook: wrong number of fetched values");
    }
    std::vector<std::string> stats;
    for (size_t i = 0; i < tensors_.size(); ++i) {
      stats.push_back(absl::StrCat(tensors_[i].first, " = ", FormatTensor(values.results[i])));
    }
    std::optional<std::pair<double, int64_t>> elapsed = timer_.UpdateLastTriggered(iter_);
    last_line_ = absl::StrJoin(stats, ", ");
    if (elapsed.has_value())
      absl::StrAppend(&last_line_, absl::StrFormat(" (%.3f sec)", elapsed->first));
    LOG(INFO) << last_line_;
  }
  ++iter_;
  return absl::OkStatus();
}

absl::Status LoggingTensorHook::End(Session* session) {
  if (!at_end_ || tensors_.empty()) return absl::OkStatus();
  std::vector<std::string> fetches;
  for (const auto& [display, tensor] : tensors_) fetches.push_back(tensor);
  TANDEM_ASSIGN_OR_RETURN(std::vector<Tensor> results, session->Run({}, fetches));
  std::vector<std::string> stats;
  for (size_t i = 0; i < tensors_.size() && i < results.size(); ++i) {
    stats.push_back(absl::StrCat(tensors_[i].first, " = ", FormatTensor(results[i])));
  }
  std::optional<std::pair<double, int64_t>> elapsed = timer_.UpdateLastTriggered(iter_);
  last_line_ = absl::StrJoin(stats, ", ");
  if (elapsed.has_value())
    absl::StrAppend(&last_line_, absl::StrFormat(" (%.3f sec)", elapsed->first));
  LOG(INFO) << last_line_;
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------
// NanTensorHook

NanTensorHook::NanTensorHook(std::string loss_tensor, bool fail_on_nan_loss)
    : loss_tensor_(std::move(loss_tensor)), fail_on_nan_loss_(fail_on_nan_loss) {}

absl::StatusOr<SessionRunArgs> NanTensorHook::BeforeRun(SessionRunContext& context) {
  SessionRunArgs args;
  args.fetches.push_back(loss_tensor_);
  return args;
}

absl::Status NanTensorHook::AfterRun(SessionRunContext& context, const SessionRunValues& values) {
  const Tensor& loss = values.results.at(0);
  if (!loss.IsInitialized() || loss.dtype() == DType::kResource || loss.NumElements() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("NanTensorHook: ", loss_tensor_,
                                                   " is not a scalar (shape ",
                                                   loss.shape().DebugString(), ")"));
  }
  const double v = loss.ValueAsDouble(0);
  if (std::isfinite(v)) return absl::OkStatus();
  const std::string message =
      absl::StrCat("Model diverged with loss = ", FormatElement(loss, 0), " (", loss_tensor_, ")");
  if (fail_on_nan_loss_) {
    LOG(ERROR) << message;
    return absl::InternalError(absl::StrCat("NaN loss during training. ", message));
  }
  LOG(WARNING) << message << "; requesting stop";
  context.RequestStop();
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------
// FinalOpsHook

FinalOpsHook::FinalOpsHook(std::vector<std::string> final_tensors, FeedMap feeds)
    : final_tensors_(std::move(final_tensors)), feeds_(std::move(feeds)) {}

absl::Status FinalOpsHook::End(Session* session) {
  if (final_tensors_.empty()) return absl::OkStatus();
  absl::StatusOr<std::vector<Tensor>> values = session->Run(feeds_, final_tensors_);
  if (!values.ok()) return AnnotateStatus(values.status(), "FinalOpsHook: running final ops");
  values_ = *std::move(values);
  return absl::OkStatus();
}

}  // namespace tandem

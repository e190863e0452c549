// hooks/profiler_hook.cc: ProfilerHook (tf.train.ProfilerHook) and the Chrome trace
// conversion (TensorFlow's timeline.Timeline.generate_chrome_trace_format).
//
// As TensorFlow, the first step is never traced: it only starts the timer. Then a step
// is traced when the timer would fire at the step it is expected to produce, and its
// trace is written as output_dir/timeline-<global step after the step>.json.
//
// Trace layout: one process per device (pid = index of the device in sorted order,
// named by a "process_name" metadata event), one thread row per executor thread (tid =
// order of first appearance on that device, named by "thread_name"), and one complete
// ("ph": "X") event per node: name = the op type, args = {name: node, op: op type}.
#include "hooks/profiler_hook.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "glog/logging.h"
#include "hooks/internal/hook_util.h"
#include "nlohmann/json.hpp"

namespace tandem {

using hooks_internal::GlobalStepTensorName;
using hooks_internal::ReadInt64;
using hooks_internal::ScalarToInt64;

std::string StepStatsToChromeTrace(const StepStats& stats) {
  using json = nlohmann::json;
  std::map<std::string, int> pids;
  for (const NodeExecStats& n : stats.nodes) pids.emplace(n.device, 0);
  int next_pid = 0;
  for (auto& [device, pid] : pids) pid = next_pid++;

  json events = json::array();
  for (const auto& [device, pid] : pids) {
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", pid},
                      {"args", {{"name", device.empty() ? "(unplaced)" : device}}}});
  }
  // Per device: thread id -> row.
  std::map<std::pair<int, uint64_t>, int> tids;
  std::map<int, int> rows_per_pid;
  for (const NodeExecStats& n : stats.nodes) {
    const int pid = pids.at(n.device);
    auto [it, inserted] = tids.emplace(std::make_pair(pid, n.thread_id), 0);
    if (inserted) {
      it->second = rows_per_pid[pid]++;
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", pid},
                        {"tid", it->second},
                        {"args", {{"name", absl::StrCat("thread ", it->second)}}}});
    }
    const std::string& label = n.op.empty() ? n.node_name : n.op;
    events.push_back({{"name", label},
                      {"cat", "Op"},
                      {"ph", "X"},
                      {"ts", n.start_micros},
                      {"dur", std::max<int64_t>(n.end_micros - n.start_micros, 0)},
                      {"pid", pid},
                      {"tid", it->second},
                      {"args", {{"name", n.node_name}, {"op", n.op}}}});
  }
  json trace = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  return trace.dump();
}

ProfilerHook::ProfilerHook(Every every, std::string output_dir)
    : timer_(every.secs, every.steps), output_dir_(std::move(output_dir)) {}

absl::Status ProfilerHook::Begin(Graph* graph) {
  if (output_dir_.empty()) return absl::InvalidArgumentError("ProfilerHook: output_dir is empty");
  next_step_ = -1;
  TANDEM_ASSIGN_OR_RETURN(global_step_tensor_, GlobalStepTensorName(graph, "ProfilerHook"));
  return absl::OkStatus();
}

absl::StatusOr<SessionRunArgs> ProfilerHook::BeforeRun(SessionRunContext& context) {
  request_trace_ = next_step_ >= 0 && timer_.ShouldTrigger(next_step_);
  SessionRunArgs args;
  args.fetches.push_back(global_step_tensor_);
  args.trace = request_trace_;
  return args;
}

absl::Status ProfilerHook::AfterRun(SessionRunContext& context, const SessionRunValues& values) {
  TANDEM_ASSIGN_OR_RETURN(int64_t stale, ScalarToInt64(values.results.at(0), global_step_tensor_));
  // The first step only starts the timer.
  if (next_step_ < 0) timer_.UpdateLastTriggered(stale);
  int64_t global_step = stale + 1;
  if (request_trace_) {
    TANDEM_ASSIGN_OR_RETURN(global_step, ReadInt64(context.session(), global_step_tensor_));
    timer_.UpdateLastTriggered(global_step);
    TANDEM_RETURN_IF_ERROR(env::MakeDirs(output_dir_));
    const std::string path =
        env::JoinPath(output_dir_, absl::StrCat("timeline-", global_step, ".json"));
    LOG(INFO) << "Saving timeline for " << global_step << " into '" << path << "'.";
    TANDEM_RETURN_IF_ERROR(
        env::WriteFileAtomic(path, StepStatsToChromeTrace(values.run_metadata.step_stats)));
  }
  next_step_ = global_step + 1;
  return absl::OkStatus();
}

}  // namespace tandem

// tests/hooks/hooks_test_util.h
//
// Shared fixtures of the hooks tests: a temporary directory, a tiny training graph
// (global step + one float variable, a train op adding 1 to the step and 0.5 to the
// variable), a hook that records every call into a shared log, and a Session wrapper
// whose Run can be made to fail.
#ifndef TANDEM_TESTS_HOOKS_HOOKS_TEST_UTIL_H_
#define TANDEM_TESTS_HOOKS_HOOKS_TEST_UTIL_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/graph/scope.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/optimizer.h"
#include "framework/ops/state_ops.h"
#include "framework/runtime/session.h"
#include "gtest/gtest.h"
#include "hooks/session_run_hook.h"
#include "tests/util/temp_dir.h"

namespace tandem::testing_util {

using ::tandem::testing::TempDir;

// global_step (int64), "w" (float, starts at 1), train op "train" (step += 1, w += 0.5),
// "loss" = 2 * w.
struct TrainGraph {
  explicit TrainGraph(bool with_global_step = true) {
    ops::Variable w(root, "w", ops::Const(root, 1.0f));
    w_value = w.value();
    w_tensor = w_value.name();
    std::vector<Node*> updates = {ops::AssignAdd(root, w, ops::Const(root, 0.5f)).node};
    if (with_global_step) {
      ops::Variable step = ops::GetOrCreateGlobalStep(root);
      step_tensor = step.value().name();
      updates.push_back(
          ops::AssignAdd(root, step, ops::Const(root, Tensor::Scalar<int64_t>(1))).node);
    }
    train_op = ops::NoOp(root.WithOpName("train").WithControlDependencies(updates))->name();
    loss_tensor = ops::Mul(root.WithOpName("loss"), w.value(), ops::Const(root, 2.0f)).name();
    EXPECT_TRUE(root.ok()) << root.status();
  }
  Graph* graph() const { return root.graph(); }

  Scope root = Scope::NewRootScope();
  Output w_value;
  std::string train_op, step_tensor, w_tensor, loss_tensor;
};

inline SessionRunRequest TrainRequest(const TrainGraph& g) {
  SessionRunRequest r;
  r.targets = {g.train_op};
  return r;
}

// Appends "<name>.<Phase>" for every call to a shared log.
class RecordingHook : public SessionRunHook {
 public:
  RecordingHook(std::string name, std::shared_ptr<std::vector<std::string>> log)
      : name_(std::move(name)), log_(std::move(log)) {}
  absl::Status Begin(Graph* graph) override { return Record("Begin"); }
  absl::Status AfterCreateSession(Session* session) override {
    return Record("AfterCreateSession");
  }
  absl::StatusOr<SessionRunArgs> BeforeRun(SessionRunContext& context) override {
    absl::Status s = Record("BeforeRun");
    if (!s.ok()) return s;
    SessionRunArgs args;
    args.fetches = fetches;
    return args;
  }
  absl::Status AfterRun(SessionRunContext& context, const SessionRunValues& values) override {
    last_results = values.results;
    ++after_runs;
    absl::Status s = Record("AfterRun");
    if (s.ok() && stop_at_after_run > 0 && after_runs == stop_at_after_run) context.RequestStop();
    if (s.ok() && fail_at_after_run > 0 && after_runs == fail_at_after_run) {
      return absl::InternalError(absl::StrCat(name_, " failed"));
    }
    return s;
  }
  absl::Status End(Session* session) override { return Record("End"); }

  std::vector<std::string> fetches;
  std::vector<Tensor> last_results;
  int after_runs = 0;
  int stop_at_after_run = 0;  // > 0: RequestStop at that AfterRun.
  int fail_at_after_run = 0;  // > 0: INTERNAL error at that AfterRun.

 private:
  absl::Status Record(const std::string& phase) {
    log_->push_back(absl::StrCat(name_, ".", phase));
    return absl::OkStatus();
  }
  std::string name_;
  std::shared_ptr<std::vector<std::string>> log_;
};

// Forwards to a real session; Run fails with `fail_code` while *failures_left > 0
// (decremented on each failure) and the step asks for `fail_target`.
class FlakySession : public Session {
 public:
  FlakySession(std::unique_ptr<Session> inner, std::shared_ptr<std::atomic<int>> failures_left,
               std::string fail_target, absl::StatusCode fail_code)
      : inner_(std::move(inner)),
        failures_left_(std::move(failures_left)),
        fail_target_(std::move(fail_target)),
        fail_code_(fail_code) {}
  absl::Status Extend(const proto::GraphDef& graph) override { return inner_->Extend(graph); }
  absl::StatusOr<std::vector<Tensor>> Run(const FeedMap& feeds,
                                          absl::Span<const std::string> fetches,
                                          absl::Span<const std::string> targets,
                                          const RunOptions& options,
                                          RunMetadata* metadata) override {
    for (const std::string& t : targets) {
      if (t == fail_target_ && failures_left_->load() > 0) {
        failures_left_->fetch_sub(1);
        return absl::Status(fail_code_, "injected failure: the worker went away");
      }
    }
    return inner_->Run(feeds, fetches, targets, options, metadata);
  }
  absl::Status Close() override {
    closed = true;
    return inner_->Close();
  }
  bool closed = false;

 private:
  std::unique_ptr<Session> inner_;
  std::shared_ptr<std::atomic<int>> failures_left_;
  std::string fail_target_;
  absl::StatusCode fail_code_;
};

// A session whose every call fails: proves a hook does not use its session.
class ErrorSession : public Session {
 public:
  absl::Status Extend(const proto::GraphDef& graph) override { return Error(); }
  absl::StatusOr<std::vector<Tensor>> Run(const FeedMap& feeds,
                                          absl::Span<const std::string> fetches,
                                          absl::Span<const std::string> targets,
                                          const RunOptions& options,
                                          RunMetadata* metadata) override {
    return Error();
  }
  absl::Status Close() override { return absl::OkStatus(); }

 private:
  static absl::Status Error() { return absl::UnimplementedError("ErrorSession was used"); }
};

}  // namespace tandem::testing_util

#endif  // TANDEM_TESTS_HOOKS_HOOKS_TEST_UTIL_H_

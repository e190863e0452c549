// MasterSession's abort of a failed step: the master reaches in-process workers through
// a fault-injecting transport, and one task's failure must end the step on every task.
#include "framework/distributed/master_session.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "framework/distributed/server.h"
#include "framework/distributed/worker.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/math_ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/distributed/start_cluster.h"
#include "tests/util/def_of.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::StartCluster;

// Forwards every call to `target` (a task's in-process Worker).
class ForwardingWorker : public WorkerInterface {
 public:
  explicit ForwardingWorker(WorkerInterface* target) : target_(target) {}
#define TANDEM_FORWARD_RPC(Name) \
  TANDEM_RPC_OVERRIDE(Name) { target_->Name##Async(options, request, response, std::move(done)); }
  TANDEM_WORKER_RPCS(TANDEM_FORWARD_RPC)
#undef TANDEM_FORWARD_RPC

 protected:
  WorkerInterface* const target_;
};

// What the master asked of one task, and when its partitions' steps really ended.
struct TaskLog {
  absl::Mutex mu;
  std::vector<int64_t> run_steps ABSL_GUARDED_BY(mu);
  std::map<int64_t, absl::Status> ended ABSL_GUARDED_BY(mu);  // By step: the worker's status.
  std::map<int64_t, int> cleanup_abort ABSL_GUARDED_BY(mu);   // By step: abort_code.
};

// A task as a master sees it through a transport, with a fault: RunGraph can fail at
// once without reaching the worker (once the worker holds a step waiting for one of
// its tensors). A cancelled RunGraph completes the caller's call with CANCELLED, as
// gRPC's client does, while the worker's step runs on until it ends on its own; `log`
// records when it does.
class FaultyWorker : public ForwardingWorker {
 public:
  FaultyWorker(Worker* worker, std::shared_ptr<TaskLog> log)
      : ForwardingWorker(worker), worker_(worker), log_(std::move(log)) {}
  std::atomic<bool> fail_run_graph{false};

  TANDEM_RPC_OVERRIDE(RunGraph) {
    const int64_t step = request->proto.step_id();
    {
      absl::MutexLock lock(&log_->mu);
      log_->run_steps.push_back(step);
    }
    if (fail_run_graph) {
      // Fail while a peer's partition waits on this task for a tensor of the step.
      for (int i = 0; i < 60000 && worker_->NumLiveSteps() == 0; ++i)
        absl::SleepFor(absl::Milliseconds(1));
      done(absl::InternalError("injected RunGraph failure"));
      return;
    }
    struct Call {
      absl::Mutex mu;
      StatusCallback done;  // Reset once the caller's call is complete.
      WireMessage<proto::RunGraphRequest> request;
      WireMessage<proto::RunGraphResponse> response;
    };
    auto call = std::make_shared<Call>();
    call->done = std::move(done);
    call->request = *request;
    if (options != nullptr) {
      options->SetCancelCallback([call] {
        StatusCallback d;
        {
          absl::MutexLock lock(&call->mu);
          d = std::move(call->done);
          call->done = nullptr;
        }
        if (d) d(absl::CancelledError("RunGraph cancelled by the caller"));
      });
    }
    target_->RunGraphAsync(nullptr, &call->request, &call->response,
                           [call, response, step, log = log_](const absl::Status& s) {
                             {
                               absl::MutexLock lock(&log->mu);
                               log->ended[step] = s;
                             }
                             StatusCallback d;
                             {
                               absl::MutexLock lock(&call->mu);
                               d = std::move(call->done);
                               call->done = nullptr;
                             }
                             if (!d) return;  // Cancelled: the caller has gone.
                             *response = std::move(call->response);
                             d(s);
                           });
  }

  TANDEM_RPC_OVERRIDE(CleanupGraph) {
    {
      absl::MutexLock lock(&log_->mu);
      log_->cleanup_abort[request->proto.step_id()] = request->proto.abort_code();
    }
    target_->CleanupGraphAsync(options, request, response, std::move(done));
  }

 private:
  Worker* const worker_;
  std::shared_ptr<TaskLog> log_;
};

class FaultyWorkerCache : public WorkerCacheInterface {
 public:
  void Add(const std::string& task, std::unique_ptr<FaultyWorker> w) {
    workers_[task] = std::move(w);
  }
  FaultyWorker* at(const std::string& task) { return workers_.at(task).get(); }
  absl::StatusOr<WorkerInterface*> GetWorker(const std::string& task) override {
    auto it = workers_.find(task);
    if (it == workers_.end()) return absl::NotFoundError(task);
    return it->second.get();
  }
  std::vector<std::string> ListTasks() const override {
    std::vector<std::string> tasks;
    for (const auto& [task, w] : workers_) tasks.push_back(task);
    return tasks;
  }

 private:
  std::map<std::string, std::unique_ptr<FaultyWorker>> workers_;
};

// Waits up to 30 s for `done`; the bound only keeps a hang from stalling the test.
bool Eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 3000; ++i) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return done();
}

// Task 0's RunGraph fails while task 1's partition waits in a _Recv for task 0's
// tensor. The master returns task 0's error and aborts the step on every task
// (CleanupGraph with the error): task 1's step ends, neither task keeps the step's
// rendezvous, and the next step runs normally.
TEST(MasterSessionTest, AFailedPartitionAbortsTheStepOnEveryTask) {
  auto servers = StartCluster({{"worker", 2}});
  const std::string t0 = "/job:worker/replica:0/task:0", t1 = "/job:worker/replica:0/task:1";
  auto log0 = std::make_shared<TaskLog>(), log1 = std::make_shared<TaskLog>();
  FaultyWorkerCache cache;
  cache.Add(t0, std::make_unique<FaultyWorker>(servers[0]->worker(), log0));
  cache.Add(t1, std::make_unique<FaultyWorker>(servers[1]->worker(), log1));
  Scope root = Scope::NewRootScope();
  // x is computed on task 0 (a Const would be copied to task 1, which would then not
  // wait for task 0).
  Output x = ops::Identity(root.WithDevice(t0),
                           ops::Const(root.WithDevice(t0), {1.5f, -2.0f}, TensorShape({2})));
  Output y = ops::Neg(root.WithDevice(t1), x);
  MasterEnv env;
  env.task_name = t0;
  env.worker_cache = &cache;
  proto::SessionConfig config;
  config.set_wait_for_workers_ms(10000);
  auto session = MasterSession::Create(env, "abort_test", testing::DefOf(root), config);
  ASSERT_TRUE(session.ok()) << session.status();
  WireMessage<proto::RunStepRequest> req;
  req.proto.add_fetch(y.name());

  cache.at(t0)->fail_run_graph = true;
  WireMessage<proto::RunStepResponse> resp;
  absl::Status s = (*session)->Run(req, &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_THAT(s.message(), HasSubstr("injected RunGraph failure"));
  EXPECT_THAT(s.message(), HasSubstr(t0));
  int64_t step = 0;
  {
    absl::MutexLock lock(&log1->mu);
    ASSERT_EQ(log1->run_steps.size(), 1u);
    step = log1->run_steps[0];
  }
  // Task 1's partition ends (aborted), though nobody waits for its RunGraph any more.
  EXPECT_TRUE(Eventually([&] {
    absl::MutexLock lock(&log1->mu);
    return log1->ended.count(step) > 0;
  })) << "task 1's step never ended";
  {
    absl::MutexLock lock(&log1->mu);
    if (log1->ended.count(step)) {
      EXPECT_FALSE(log1->ended[step].ok());
    }
  }
  // Both tasks were told to abort the step, and neither keeps it.
  for (const auto& log : {log0, log1}) {
    absl::MutexLock lock(&log->mu);
    ASSERT_EQ(log->cleanup_abort.count(step), 1u);
    EXPECT_EQ(log->cleanup_abort[step], static_cast<int>(absl::StatusCode::kInternal));
  }
  EXPECT_TRUE(Eventually([&] {
    return servers[0]->worker()->NumLiveSteps() == 0 && servers[1]->worker()->NumLiveSteps() == 0;
  })) << "live steps: task 0 "
      << servers[0]->worker()->NumLiveSteps() << ", task 1 "
      << servers[1]->worker()->NumLiveSteps();

  // The next step runs.
  cache.at(t0)->fail_run_graph = false;
  WireMessage<proto::RunStepResponse> resp2;
  ASSERT_TRUE((*session)->Run(req, &resp2).ok());
  ASSERT_EQ(resp2.tensors.size(), 1u);
  EXPECT_THAT(resp2.tensors[0].flat<float>(), ElementsAre(-1.5f, 2.0f));
  EXPECT_TRUE((*session)->Close().ok());
}

}  // namespace
}  // namespace tandem

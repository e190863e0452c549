// tests/estimator/run_config_test.cc
//
// RunConfig from TF_CONFIG, checked against TensorFlow 1.x's rules
// (tensorflow_estimator/python/estimator/run_config.py) with the TF_CONFIGs that real
// schedulers set.
#include "estimator/run_config.h"

#include <cstdlib>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

absl::StatusOr<RunConfig> FromTfConfig(const char* json, RunConfigOptions options = {}) {
  absl::StatusOr<TfConfig> tf_config = ParseTfConfig(json);
  if (!tf_config.ok()) return tf_config.status();
  return RunConfig::Create(options, *tf_config);
}

// An INVALID_ARGUMENT whose message contains every one of `parts`.
void ExpectError(const char* json, std::initializer_list<const char*> parts) {
  absl::StatusOr<RunConfig> c = FromTfConfig(json);
  ASSERT_FALSE(c.ok()) << json;
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
  for (const char* p : parts) EXPECT_THAT(c.status().message(), HasSubstr(p)) << json;
}

TEST(RunConfigTest, DefaultsMatchTensorFlow) {
  RunConfig c;
  EXPECT_EQ(c.save_summary_steps(), 100);
  EXPECT_EQ(c.save_checkpoints_secs(), 600);
  EXPECT_FALSE(c.save_checkpoints_steps().has_value());
  EXPECT_EQ(c.keep_checkpoint_max(), 5);
  EXPECT_EQ(c.keep_checkpoint_every_n_hours(), 10000);
  EXPECT_EQ(c.log_step_count_steps(), 100);
  EXPECT_FALSE(c.tf_random_seed().has_value());
  absl::StatusOr<RunConfig> created = RunConfig::Create({}, {});
  ASSERT_TRUE(created.ok());
  EXPECT_EQ(*created, c);
}

TEST(RunConfigTest, LocalWithoutTfConfig) {
  absl::StatusOr<RunConfig> c = FromTfConfig("");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->task_type(), "worker");
  EXPECT_EQ(c->task_id(), 0);
  EXPECT_TRUE(c->is_chief());
  EXPECT_EQ(c->master(), "");
  EXPECT_EQ(c->num_ps_replicas(), 0);
  EXPECT_EQ(c->num_worker_replicas(), 1);
  EXPECT_TRUE(c->cluster_spec().empty());
  EXPECT_FALSE(c->is_distributed());
  EXPECT_FALSE(c->session_config().has_value());
  EXPECT_EQ(c->task_device_name(), "");
}

TEST(RunConfigTest, LocalSessionMasterAndTaskRules) {
  absl::StatusOr<RunConfig> c = FromTfConfig(R"({"session_master": "grpc://10.0.0.1:8470"})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->master(), "grpc://10.0.0.1:8470");
  ExpectError(R"({"task": {"type": "ps", "index": 0}})",
              {"if \"cluster\" is not set, task.type must be \"worker\""});
  ExpectError(R"({"task": {"type": "worker", "index": 1}})",
              {"if \"cluster\" is not set, task.index must be 0"});
}

TEST(RunConfigTest, KubeflowTfJobWorker) {
  absl::StatusOr<RunConfig> c = FromTfConfig(R"({
      "cluster": {"chief": ["mnist-chief-0.kubeflow.svc:2222"],
                  "ps": ["mnist-ps-0.kubeflow.svc:2222"],
                  "worker": ["mnist-worker-0.kubeflow.svc:2222",
                             "mnist-worker-1.kubeflow.svc:2222"]},
      "task": {"type": "worker", "index": 1},
      "environment": "cloud"})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->task_type(), "worker");
  EXPECT_EQ(c->task_id(), 1);
  EXPECT_FALSE(c->is_chief());
  EXPECT_EQ(c->master(), "grpc://mnist-worker-1.kubeflow.svc:2222");
  EXPECT_EQ(c->evaluation_master(), "");
  EXPECT_EQ(c->num_ps_replicas(), 1);
  EXPECT_EQ(c->num_worker_replicas(), 3);
  EXPECT_EQ(c->global_id_in_cluster(), 2);  // chief 0, worker 1..2, ps last.
  EXPECT_EQ(c->environment(), "cloud");
  EXPECT_FALSE(c->is_google_environment());
  EXPECT_EQ(c->task_device_name(), "/job:worker/replica:0/task:1");
  ASSERT_TRUE(c->session_config().has_value());
  EXPECT_THAT(c->session_config()->device_filters, ElementsAre("/job:ps", "/job:worker/task:1"));
}

TEST(RunConfigTest, KubeflowTfJobChief) {
  absl::StatusOr<RunConfig> c = FromTfConfig(R"({
      "cluster": {"chief": ["c-0:2222"], "ps": ["p-0:2222", "p-1:2222"],
                  "worker": ["w-0:2222", "w-1:2222", "w-2:2222"]},
      "task": {"type": "chief", "index": 0}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->is_chief());
  EXPECT_EQ(c->master(), "grpc://c-0:2222");
  EXPECT_EQ(c->num_ps_replicas(), 2);
  EXPECT_EQ(c->num_worker_replicas(), 4);
  EXPECT_EQ(c->global_id_in_cluster(), 0);
  EXPECT_THAT(c->session_config()->device_filters, ElementsAre("/job:ps", "/job:chief"));
}

TEST(RunConfigTest, KubeflowLegacyMasterCluster) {
  const char* kCluster = R"("cluster": {"master": ["m-0:2222"], "ps": ["p-0:2222"],
                                        "worker": ["w-0:2222", "w-1:2222"]})";
  absl::StatusOr<RunConfig> master = FromTfConfig(
      (std::string("{") + kCluster + R"(, "task": {"type": "master", "index": 0}})").c_str());
  ASSERT_TRUE(master.ok()) << master.status();
  EXPECT_TRUE(master->is_chief());
  EXPECT_EQ(master->master(), "grpc://m-0:2222");
  EXPECT_EQ(master->num_worker_replicas(), 3);  // master + 2 workers.
  EXPECT_THAT(master->session_config()->device_filters, ElementsAre("/job:ps", "/job:master"));
  absl::StatusOr<RunConfig> worker = FromTfConfig(
      (std::string("{") + kCluster + R"(, "task": {"type": "worker", "index": 0}})").c_str());
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_FALSE(worker->is_chief());
  EXPECT_EQ(worker->global_id_in_cluster(), 1);
}

TEST(RunConfigTest, SageMakerParameterServer) {
  absl::StatusOr<RunConfig> c = FromTfConfig(R"({
      "cluster": {"master": ["algo-1:2222"], "ps": ["algo-1:2223", "algo-2:2223"],
                  "worker": ["algo-2:2222"]},
      "environment": "cloud",
      "task": {"index": 1, "type": "ps"}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->task_type(), "ps");
  EXPECT_FALSE(c->is_chief());
  EXPECT_EQ(c->master(), "grpc://algo-2:2223");
  EXPECT_EQ(c->num_ps_replicas(), 2);
  EXPECT_EQ(c->num_worker_replicas(), 2);
  EXPECT_EQ(c->global_id_in_cluster(), 3);  // master 0, worker 1, ps 2..3.
  EXPECT_THAT(c->session_config()->device_filters,
              ElementsAre("/job:ps", "/job:worker", "/job:chief", "/job:master"));
}

TEST(RunConfigTest, VertexAiChiefWithExtraKeys) {
  absl::StatusOr<RunConfig> c = FromTfConfig(R"({
      "cluster": {"chief": ["cmle-training-workerpool0-ab-0:2222"],
                  "worker": ["cmle-training-workerpool1-ab-0:2222",
                             "cmle-training-workerpool1-ab-1:2222"],
                  "ps": ["cmle-training-workerpool2-ab-0:2222"]},
      "environment": "cloud",
      "task": {"type": "chief", "index": 0, "trial": ""},
      "job": {"worker_pool_specs": [{"replica_count": 1}]}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->is_chief());
  EXPECT_EQ(c->num_worker_replicas(), 3);
  EXPECT_EQ(c->num_ps_replicas(), 1);
}

TEST(RunConfigTest, EvaluatorIsNotPartOfTheTrainingCluster) {
  absl::StatusOr<RunConfig> c = FromTfConfig(R"({
      "cluster": {"chief": ["c:2222"], "ps": ["p:2222"], "worker": ["w:2222"]},
      "task": {"type": "evaluator", "index": 0},
      "eval_session_master": "grpc://e:1"})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->task_type(), "evaluator");
  EXPECT_FALSE(c->is_chief());
  EXPECT_EQ(c->master(), "");
  EXPECT_EQ(c->evaluation_master(), "grpc://e:1");
  EXPECT_TRUE(c->cluster_spec().empty());
  EXPECT_EQ(c->num_ps_replicas(), 0);
  EXPECT_EQ(c->num_worker_replicas(), 0);
  EXPECT_FALSE(c->global_id_in_cluster().has_value());
  EXPECT_FALSE(c->session_config().has_value());
  ExpectError(R"({"cluster": {"master": ["m:1"]}, "task": {"type": "evaluator", "index": 0}})",
              {"\"evaluator\" is not supported"});
}

TEST(RunConfigTest, KubeflowListsTheEvaluatorInTheCluster) {
  // The training-operator's TF_CONFIG for the shipped TFJob: every replica type in
  // "cluster", the evaluator too. TensorFlow: the evaluator is not a worker replica and
  // shifts the global ids of the jobs sorted after it; its own cluster is cleared.
  const std::string cluster = R"("cluster": {
      "chief": ["fashion-mlp-chief-0.default.svc:2222"],
      "evaluator": ["fashion-mlp-evaluator-0.default.svc:2222"],
      "ps": ["fashion-mlp-ps-0.default.svc:2222", "fashion-mlp-ps-1.default.svc:2222"],
      "worker": ["fashion-mlp-worker-0.default.svc:2222", "fashion-mlp-worker-1.default.svc:2222"]},
      "environment": "cloud")";
  auto config = [&](const char* type, int index) {
    return FromTfConfig(
        absl::StrCat("{", cluster, R"(, "task": {"type": ")", type, R"(", "index": )", index, "}}")
            .c_str());
  };
  struct Want {
    const char* type;
    int index;
    int global_id;
    std::optional<int> replica;
  };
  for (const Want& w : {Want{"chief", 0, 0, 0}, Want{"worker", 0, 2, 1}, Want{"worker", 1, 3, 2},
                        Want{"ps", 0, 4, std::nullopt}, Want{"ps", 1, 5, std::nullopt}}) {
    absl::StatusOr<RunConfig> c = config(w.type, w.index);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->global_id_in_cluster(), w.global_id) << w.type << w.index;
    EXPECT_EQ(c->replica_index(), w.replica) << w.type << w.index;
    EXPECT_EQ(c->num_worker_replicas(), 3);
    EXPECT_EQ(c->num_ps_replicas(), 2);
    EXPECT_EQ(c->is_chief(), std::string(w.type) == "chief");
    // Nothing connects to the evaluator: it runs no server.
    EXPECT_FALSE(c->cluster_spec().HasJob("evaluator"));
    EXPECT_EQ(c->cluster_spec().TotalTasks(), 5);
  }
  absl::StatusOr<RunConfig> evaluator = config("evaluator", 0);
  ASSERT_TRUE(evaluator.ok()) << evaluator.status();
  EXPECT_TRUE(evaluator->cluster_spec().empty());
  EXPECT_FALSE(evaluator->global_id_in_cluster().has_value());
  EXPECT_FALSE(evaluator->replica_index().has_value());
  EXPECT_EQ(evaluator->num_worker_replicas(), 0);
  // A lone chief beside the evaluator trains locally: the evaluator is not part of the
  // training cluster (TensorFlow would give master "grpc://c:1").
  absl::StatusOr<RunConfig> lone = FromTfConfig(
      R"({"cluster": {"chief": ["c:1"], "evaluator": ["e:1"]}, "task": {"type": "chief", "index": 0}})");
  ASSERT_TRUE(lone.ok()) << lone.status();
  EXPECT_EQ(lone->master(), "");
  EXPECT_FALSE(lone->TrainsOnCluster());
}

TEST(RunConfigTest, SingleNodeClusterRunsLocally) {
  absl::StatusOr<RunConfig> c = FromTfConfig(R"({"cluster": {"chief": ["localhost:2222"]},
                       "task": {"type": "chief", "index": 0}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->master(), "");
  EXPECT_TRUE(c->is_chief());
  EXPECT_EQ(c->num_worker_replicas(), 1);
}

TEST(RunConfigTest, SparseTaskIds) {
  const char* kJson = R"({"cluster": {"chief": ["c:2222"],
                                      "worker": {"1": "w1:2222", "3": "w3:2222"}},
                          "task": {"type": "worker", "index": "3"}})";
  absl::StatusOr<RunConfig> c = FromTfConfig(kJson);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->master(), "grpc://w3:2222");
  EXPECT_EQ(c->num_worker_replicas(), 3);
  ExpectError(R"({"cluster": {"chief": ["c:2222"], "worker": {"1": "w1:2222"}},
                  "task": {"type": "worker", "index": 0}})",
              {"task.index 0 is not a task of job \"worker\""});
  ExpectError(R"({"cluster": {"worker": {"x": "w1:2222"}}})",
              {"cluster.worker: task id \"x\" must be a non-negative integer"});
}

TEST(RunConfigTest, FromEnvironment) {
  setenv("TF_CONFIG",
         R"({"cluster": {"chief": ["c:1"], "worker": ["w:1"]},
             "task": {"type": "worker", "index": 0}, "model_dir": "/tmp/m"})",
         1);
  absl::StatusOr<RunConfig> c = RunConfig::FromEnvironment();
  unsetenv("TF_CONFIG");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->master(), "grpc://w:1");
  EXPECT_EQ(c->model_dir(), "/tmp/m");
}

TEST(RunConfigTest, MalformedTfConfigs) {
  ExpectError("{\"cluster\": ", {"TF_CONFIG: not valid JSON"});
  ExpectError("[1, 2]", {"TF_CONFIG: must be a JSON object"});
  ExpectError("\xff\xfe{", {"TF_CONFIG: not valid JSON"});  // Invalid UTF-8 is reported.
  ExpectError(R"({"cluster": ["a:1"]})", {"cluster must be an object"});
  ExpectError(R"({"cluster": {"worker": "a:1"}})", {"cluster.worker must be a list"});
  ExpectError(R"({"cluster": {"worker": [1]}})", {"cluster.worker[0] must be a \"host:port\""});
  ExpectError(R"({"cluster": {"chief": ["c:1"], "worker": ["w:99999"]}})",
              {"job 'worker' task 0: invalid task address 'w:99999'"});
  ExpectError(R"({"cluster": {"chief": ["c:1"]}, "task": "chief"})", {"task must be an object"});
  ExpectError(R"({"cluster": {"chief": ["c:1"]}, "task": {"type": 3, "index": 0}})",
              {"task.type must be a string"});
  ExpectError(R"({"cluster": {"chief": ["c:1"]}, "task": {"type": "chief", "index": "x"}})",
              {"task.index must be an integer, got \"x\""});
  ExpectError(R"({"cluster": {"chief": ["c:1"]}, "task": {"type": "chief", "index": -1}})",
              {"task.index must be non-negative"});
  ExpectError(R"({"cluster": {"chief": ["c:1"]}, "task": {"index": 0}})",
              {"task.type must be set"});
  ExpectError(R"({"cluster": {"chief": ["c:1"]}, "task": {"type": "chief"}})",
              {"task.index must be set"});
  ExpectError(R"({"service": "x"})", {"\"service\" is set it must be an object"});
  ExpectError(R"({"model_dir": ""})", {"model_dir should be non-empty"});
  ExpectError(R"({"environment": 1})", {"environment must be a string"});
}

TEST(RunConfigTest, WithoutAChiefWorkerZeroActsAsTheChief) {
  // Looser than TensorFlow's Estimator on purpose (Kubeflow's default TFJob has no chief).
  for (int index : {0, 1}) {
    const std::string json = absl::StrCat(
        R"({"cluster": {"worker": ["w0:1", "w1:1"], "ps": ["p:1"]}, "task": {"type": "worker", "index": )",
        index, "}}");
    absl::StatusOr<RunConfig> c = FromTfConfig(json.c_str());
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->is_chief(), index == 0);
    EXPECT_EQ(c->num_worker_replicas(), 2);
    EXPECT_EQ(c->num_ps_replicas(), 1);
    EXPECT_EQ(c->global_id_in_cluster(), index);
    EXPECT_EQ(c->replica_index(), index);
  }
  // Without a worker 0 nothing can lead.
  ExpectError(R"({"cluster": {"worker": {"1": "w1:1"}}, "task": {"type": "worker", "index": 1}})",
              {"must have one \"chief\" task, or a \"worker\" task 0"});
}

TEST(RunConfigTest, ClusterRulesFromTensorFlow) {
  ExpectError(R"({"cluster": {"chief": ["c0:1", "c1:1"]}, "task": {"type": "chief", "index": 0}})",
              {"must have only one \"chief\" task"});
  ExpectError(R"({"cluster": {"chief": ["c:1"], "master": ["m:1"]},
                  "task": {"type": "chief", "index": 0}})",
              {"a \"chief\" job is not supported"});
  ExpectError(R"({"cluster": {"chief": ["c:1"], "worker": ["w:1"]},
                  "task": {"type": "trainer", "index": 0}})",
              {"task.type \"trainer\" is not a job in the cluster"});
  ExpectError(R"({"cluster": {"chief": ["c:1"], "worker": ["w:1"]},
                  "task": {"type": "worker", "index": 1}})",
              {"task.index 1 is not a task of job \"worker\""});
}

TEST(RunConfigTest, OptionsAndModelDir) {
  RunConfigOptions steps;
  steps.save_checkpoints_steps = 500;
  absl::StatusOr<RunConfig> c = RunConfig::Create(steps, {});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->save_checkpoints_steps(), 500);
  EXPECT_FALSE(c->save_checkpoints_secs().has_value());
  EXPECT_TRUE(c->checkpoints_enabled());

  RunConfigOptions both = steps;
  both.save_checkpoints_secs = 60;
  EXPECT_THAT(RunConfig::Create(both, {}).status().message(), HasSubstr("cannot be both set"));

  RunConfigOptions off;
  off.save_checkpoints_steps = 0;
  EXPECT_FALSE(RunConfig::Create(off, {})->checkpoints_enabled());

  RunConfigOptions bad;
  bad.log_step_count_steps = 0;
  EXPECT_THAT(RunConfig::Create(bad, {}).status().message(),
              HasSubstr("log_step_count_steps should be > 0"));

  RunConfigOptions dir;
  dir.model_dir = "/a";
  TfConfig tf;
  tf.model_dir = "/b";
  EXPECT_THAT(RunConfig::Create(dir, tf).status().message(),
              HasSubstr("must be the same as TF_CONFIG model_dir"));
  tf.model_dir = "/a";
  EXPECT_EQ(RunConfig::Create(dir, tf)->model_dir(), "/a");
  EXPECT_THAT(DefaultDeviceFilters("evaluator", 0), IsEmpty());
}

}  // namespace
}  // namespace tandem

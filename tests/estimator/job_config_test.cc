// tests/estimator/job_config_test.cc
//
// JobConfig: the example configs, precedence (--set > TF_CONFIG > file > defaults), the
// ToToml round trip, and malformed files and overrides, each with an error that names
// the key and where it came from.
#include "estimator/job_config.h"

#include <stdlib.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string ConfigPath(const std::string& name) {
  std::string here = __FILE__;  // [<root>/]tests/estimator/job_config_test.cc
  std::string root = here.substr(0, here.rfind("tests/estimator/"));
  return (root.empty() ? "./" : root) + "configs/" + name;
}

constexpr char kMinimal[] = R"(
[model]
name = "fashion_mlp"

[model.params]
hidden_units = [256, 128]
learning_rate = 0.001
use_bias = true
activation = "relu"

[run]
model_dir = "/tmp/m"
save_checkpoints_steps = 100

[train]
max_steps = 1000
)";

absl::StatusOr<JobConfig> Parse(const std::string& text, std::vector<std::string> overrides = {},
                                const std::string& tf_config = "") {
  return JobConfig::Parse(text, "job.toml", overrides, tf_config);
}

void ExpectError(const absl::StatusOr<JobConfig>& c, std::initializer_list<const char*> parts) {
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
  for (const char* p : parts) EXPECT_THAT(c.status().message(), HasSubstr(p));
}

TEST(JobConfigTest, ExampleConfigsParse) {
  for (const char* name : {"linear_regression.toml", "fashion_mlp.toml", "fashion_cnn.toml"}) {
    absl::StatusOr<JobConfig> c = JobConfig::Load(ConfigPath(name));
    ASSERT_TRUE(c.ok()) << name << ": " << c.status();
    EXPECT_FALSE(c->model.name.empty());
    EXPECT_TRUE(c->run_config().is_chief());
    absl::StatusOr<JobConfig> again = Parse(c->ToToml());
    ASSERT_TRUE(again.ok()) << again.status() << "\n" << c->ToToml();
    EXPECT_EQ(*again, *c) << c->ToToml();
  }
  absl::StatusOr<JobConfig> mlp = JobConfig::Load(ConfigPath("fashion_mlp.toml"));
  ASSERT_TRUE(mlp.ok());
  EXPECT_EQ(mlp->model.params.at("hidden_units"),
            ParamValue::Array({ParamValue::Int(256), ParamValue::Int(128), ParamValue::Int(100)}));
  EXPECT_EQ(*mlp->model.GetInt("num_classes", 0), 10);
  absl::StatusOr<JobConfig> cnn = JobConfig::Load(ConfigPath("fashion_cnn.toml"));
  ASSERT_TRUE(cnn.ok());
  EXPECT_DOUBLE_EQ(*cnn->model.GetDouble("dropout_rate", 0), 0.4);
  EXPECT_EQ(cnn->run_config().save_checkpoints_steps(), 1000);
  EXPECT_EQ(cnn->run_config().save_checkpoints_secs(), std::nullopt);
  EXPECT_FALSE(cnn->run_config().session_config().has_value());  // 0 threads: defaults.
}

TEST(JobConfigTest, ThreadCountsBecomeTheSessionConfig) {
  absl::StatusOr<JobConfig> c =
      Parse("[model]\nname = \"m\"\n[run]\ninter_op_threads = 2\nintra_op_threads = 4\n");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->run_config().session_config().has_value());
  EXPECT_EQ(c->run_config().session_config()->inter_op_parallelism_threads, 2);
  EXPECT_EQ(c->run_config().session_config()->intra_op_parallelism_threads, 4);
}

TEST(JobConfigTest, PrecisionReachesTheRunConfig) {
  absl::StatusOr<JobConfig> c = Parse("[model]\nname = \"m\"\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->run_config().precision(), Precision::kFloat32);
  c = Parse("[model]\nname = \"m\"\n[run]\nprecision = \"mixed_bfloat16\"\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->run_config().precision(), Precision::kMixedBfloat16);
  ExpectError(Parse("[model]\nname = \"m\"\n[run]\nprecision = \"bfloat16\"\n"),
              {"job.toml:4:13: [run] precision must be one of \"float32\", \"mixed_bfloat16\", "
               "got \"bfloat16\""});
}

TEST(JobConfigTest, DefaultsAndTypedParams) {
  absl::StatusOr<JobConfig> c = Parse("[model]\nname = \"linear_regression\"\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->train.batch_size, 32);
  EXPECT_FALSE(c->train.max_steps.has_value());
  EXPECT_EQ(c->eval.throttle_secs, 600);
  EXPECT_EQ(c->run.save_checkpoints_secs, 600);  // Resolved TensorFlow default.
  EXPECT_EQ(c->run_config().save_summary_steps(), 100);
  EXPECT_EQ(c->distribute.strategy, "auto");

  absl::StatusOr<JobConfig> m = Parse(kMinimal);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(*m->model.GetDouble("learning_rate", 0), 0.001);
  EXPECT_EQ(*m->model.GetBool("use_bias", false), true);
  EXPECT_EQ(*m->model.GetString("activation", ""), "relu");
  EXPECT_EQ(*m->model.GetInt("missing", 7), 7);
  EXPECT_THAT(m->model.GetInt("activation", 0).status().message(),
              HasSubstr("[model.params] activation must be an integer"));
  EXPECT_EQ(m->run_config().save_checkpoints_steps(), 100);
  EXPECT_FALSE(m->run_config().save_checkpoints_secs().has_value());
}

TEST(JobConfigTest, OverridesBeatTfConfigWhichBeatsTheFile) {
  const std::string file = std::string(kMinimal) + R"(
[cluster]
chief = ["file-chief:2222"]
worker = ["file-worker:2222"]
ps = ["file-ps:2222"]
[task]
type = "chief"
index = 0
)";
  const std::string tf_config = R"({"cluster": {"chief": ["c:2222"], "ps": ["p:2222"],
                                                "worker": ["w0:2222", "w1:2222"]},
                                    "task": {"type": "worker", "index": 1},
                                    "model_dir": "/tf/model"})";
  absl::StatusOr<JobConfig> c = Parse(file, {}, tf_config);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->run_config().master(), "grpc://w1:2222");
  EXPECT_EQ(c->run.model_dir, "/tf/model");
  EXPECT_EQ(c->run_config().num_ps_replicas(), 1);

  c = Parse(file,
            {"train.max_steps=5", "run.model_dir=/cli/model", "model.params.learning_rate=0.5",
             "task.index=0", "cluster.worker=[\"x0:1\", \"x1:1\", \"x2:1\"]"},
            tf_config);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->train.max_steps, 5);
  EXPECT_EQ(c->run.model_dir, "/cli/model");
  EXPECT_EQ(*c->model.GetDouble("learning_rate", 0), 0.5);
  EXPECT_EQ(c->run_config().master(), "grpc://x0:1");
  EXPECT_EQ(c->run_config().num_worker_replicas(), 4);

  // Without TF_CONFIG the file's cluster is used.
  c = Parse(file);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->run_config().master(), "grpc://file-chief:2222");
  EXPECT_TRUE(c->run_config().is_chief());
}

TEST(JobConfigTest, ToTomlRoundTripsSparseClusterAndParams) {
  const std::string file = std::string(kMinimal) + R"(
[data]
dataset = "fashion_mnist"
shuffle_buffer = 5
[eval]
name = "quote \" and \\ backslash"
[distribute]
strategy = "parameter_server"
[cluster]
chief = ["[::1]:2222"]
worker = { 1 = "h1:2222", 4 = "h4:2222" }
ps = ["p:1"]
[task]
type = "worker"
index = 4
)";
  absl::StatusOr<JobConfig> c = Parse(
      file,
      {"model.params.eps=1e-7", "model.params.nested=[[1, 2], [\"a\"]]", "run.random_seed=-3"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->run_config().master(), "grpc://h4:2222");
  std::string text = c->ToToml();
  absl::StatusOr<JobConfig> again = Parse(text);
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << text;
  EXPECT_EQ(*again, *c) << text;
  EXPECT_EQ(again->ToToml(), text);
}

TEST(JobConfigTest, LoadNamesMissingFile) {
  absl::StatusOr<JobConfig> c = JobConfig::Load("/nonexistent/job.toml");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("/nonexistent/job.toml"));
}

// Malformed files: each error names the key, with file:line:column.
TEST(JobConfigTest, UnknownKeyWithSuggestion) {
  ExpectError(Parse("[model]\nname = \"m\"\n[run]\n  save_checkpoint_steps = 10\n"),
              {"job.toml:4:3: [run] unknown key 'save_checkpoint_steps' "
               "(did you mean 'save_checkpoints_steps'?)"});
}

TEST(JobConfigTest, UnknownSection) {
  ExpectError(Parse("[model]\nname = \"m\"\n[trian]\nmax_steps = 1\n"),
              {"job.toml:3:2: unknown section [trian] (did you mean 'train'?)"});
}

TEST(JobConfigTest, WrongType) {
  ExpectError(Parse("[model]\nname = \"m\"\n[train]\nmax_steps = \"1000\"\n"),
              {"job.toml:4:13: [train] max_steps must be an integer, got string"});
  ExpectError(Parse("[model]\nname = \"m\"\n[distribute]\nsync = 1\n"),
              {"job.toml:4:8: [distribute] sync must be a boolean"});
  ExpectError(Parse("[model]\nname = \"m\"\nparams = 3\n"),
              {"job.toml:3:10: [model] params must be a table, got integer"});
  ExpectError(Parse("model = 3\n"), {"job.toml:1:9: [model] must be a table"});
}

TEST(JobConfigTest, NegativeAndOutOfRangeValues) {
  ExpectError(Parse("[model]\nname = \"m\"\n[run]\nsave_checkpoints_steps = -5\n"),
              {"job.toml:4:26: [run] save_checkpoints_steps must be >= 0, got -5"});
  ExpectError(Parse("[model]\nname = \"m\"\n[train]\nbatch_size = 0\n"),
              {"[train] batch_size must be >= 1, got 0"});
  ExpectError(Parse("[model]\nname = \"m\"\n[run]\nkeep_checkpoint_every_n_hours = 0.0\n"),
              {"job.toml:4:33: [run] keep_checkpoint_every_n_hours must be a finite number > 0"});
  ExpectError(Parse("[model]\nname = \"m\"\n[distribute]\nstrategy = \"mirrored\"\n"),
              {"job.toml:4:12: [distribute] strategy must be one of \"auto\", \"none\", "
               "\"parameter_server\", \"collective\", \"multi_worker_mirrored\", \"hybrid\", got "
               "\"mirrored\""});
}

TEST(JobConfigTest, BothCheckpointCadences) {
  ExpectError(Parse("[model]\nname = \"m\"\n[run]\nsave_checkpoints_steps = 5\n"
                    "save_checkpoints_secs = 60\n"),
              {"job.toml:5:25: [run] save_checkpoints_steps and save_checkpoints_secs cannot "
               "both be set (job.toml:4:26 sets save_checkpoints_steps)"});
}

TEST(JobConfigTest, MalformedToml) {
  ExpectError(Parse("[model]\nname = \"m\n"), {"job.toml:2:"});
  ExpectError(Parse("[model]\nname = \"m\"\nname = \"n\"\n"), {"job.toml:3:"});
}

TEST(JobConfigTest, MissingModelName) {
  ExpectError(Parse("[train]\nmax_steps = 1\n"), {"[model] name is required"});
}

TEST(JobConfigTest, BadClusterAddressAndTask) {
  ExpectError(Parse("[model]\nname = \"m\"\n[cluster]\nchief = [\"c:2222\"]\n"
                    "worker = [\"w:70000\"]\n[task]\ntype = \"chief\"\nindex = 0\n"),
              {"job.toml:5:10: [cluster] job 'worker' task 0: invalid task address 'w:70000'"});
  ExpectError(Parse("[model]\nname = \"m\"\n[cluster]\nchief = [\"c:2222\"]\n"
                    "worker = [\"w:1\"]\n[task]\ntype = \"worker\"\nindex = 3\n"),
              {"job.toml:3:1: task.index 3 is not a task of job \"worker\""});
  ExpectError(Parse("[model]\nname = \"m\"\n[task]\ntpye = \"worker\"\n"),
              {"job.toml:4:1: [task] unknown key 'tpye' (did you mean 'type'?)"});
  ExpectError(Parse("[model]\nname = \"m\"\n[cluster]\nworker = 3\n"),
              {"job.toml:4:10: [cluster] worker must be an array"});
}

TEST(JobConfigTest, ParamsRejectTables) {
  ExpectError(Parse("[model]\nname = \"m\"\n[model.params.inner]\nx = 1\n"),
              {"[model.params] inner must be a number, string, boolean or array, got table"});
}

// Overrides: each error names the override.
TEST(JobConfigTest, BadOverrideSyntax) {
  ExpectError(Parse(kMinimal, {"max_steps=5"}), {"--set max_steps=5: expected section.key=value"});
  ExpectError(Parse(kMinimal, {"train.max_steps"}),
              {"--set train.max_steps: expected section.key=value"});
  ExpectError(Parse(kMinimal, {"train..x=1"}), {"expected section.key=value"});
  ExpectError(Parse(kMinimal, {"model.params.hidden=[1, 2"}),
              {"--set model.params.hidden=[1, 2: malformed TOML value"});
}

TEST(JobConfigTest, OverrideOfUnknownKeyOrWrongType) {
  ExpectError(Parse(kMinimal, {"train.max_step=5"}),
              {"--set train.max_step=5: [train] unknown key 'max_step' (did you mean "
               "'max_steps'?)"});
  ExpectError(Parse(kMinimal, {"train.max_steps=many"}),
              {"--set train.max_steps=many: [train] max_steps must be an integer, got string"});
  ExpectError(Parse(kMinimal, {"train.max_steps=-1"}),
              {"--set train.max_steps=-1: [train] max_steps must be >= 1, got -1"});
  ExpectError(Parse(kMinimal, {"optimizer.lr=1"}),
              {"--set optimizer.lr=1: unknown section [optimizer]"});
  ExpectError(Parse(kMinimal, {"run.model_dir.x=1"}),
              {"--set run.model_dir.x=1: 'run.model_dir' is a string, not a table"});
  ExpectError(Parse(kMinimal, {"run.save_checkpoints_secs=60"}),
              {"--set run.save_checkpoints_secs=60: [run] save_checkpoints_steps and "
               "save_checkpoints_secs cannot both be set"});
}

TEST(JobConfigTest, BadTfConfigIsNamed) {
  ExpectError(Parse(kMinimal, {}, "{not json"), {"TF_CONFIG: not valid JSON"});
  ExpectError(Parse(kMinimal, {}, R"({"cluster": {"chief": ["c:1"], "worker": ["w:1"]},
                                     "task": {"type": "worker", "index": 2}})"),
              {"TF_CONFIG cluster: task.index 2 is not a task of job \"worker\""});
}

// [distribute] is honoured or refused: each refusal is a config error naming the key.
TEST(JobConfigTest, DistributeSettingsThatCannotRunAreRefused) {
  const std::string cluster =
      "\n[cluster]\nchief = [\"c:1\"]\nworker = [\"w:1\"]\nps = [\"p:1\"]\n[task]\ntype = "
      "\"worker\"\nindex = 0\n";
  struct Case {
    std::string text;
    absl::StatusCode code;
    const char* says;
  };
  const std::string no_ps =
      "\n[cluster]\nchief = [\"c:1\"]\nworker = [\"w:1\"]\n[task]\ntype = \"chief\"\nindex = 0\n";
  const std::vector<Case> cases = {
      {"[distribute]\nsync = true\n", absl::StatusCode::kInvalidArgument,
       "job.toml:18:8: [distribute] sync = true trains synchronous replicas on a cluster with "
       "ps tasks"},
      {"[distribute]\nsync = true\nreplicas_to_aggregate = 3\n" + cluster,
       absl::StatusCode::kInvalidArgument,
       "replicas_to_aggregate = 3 exceeds the cluster's 2 replicas"},
      {"[distribute]\nsync = true\ntotal_num_replicas = 5\n" + cluster,
       absl::StatusCode::kInvalidArgument, "total_num_replicas = 5 but the cluster has 2"},
      {"[distribute]\non_missing_replicas = \"continue\"\n", absl::StatusCode::kInvalidArgument,
       "on_missing_replicas applies only with sync = true"},

      {"[distribute]\nreplicas_to_aggregate = 2\n", absl::StatusCode::kInvalidArgument,
       "replicas_to_aggregate applies only with sync = true"},
      {"[distribute]\nnum_shards = 2\n", absl::StatusCode::kInvalidArgument,
       "num_shards applies to partitioner = \"fixed\"; this job has partitioner = \"auto\""},
      {"[distribute]\npartitioner = \"fixed\"\nmin_shard_bytes = 4096\n",
       absl::StatusCode::kInvalidArgument, "min_shard_bytes applies to partitioner = \"min_size\""},
      {"[distribute]\npartitioner = \"fixed\"\nmax_shards = 3\n",
       absl::StatusCode::kInvalidArgument,
       "max_shards applies to partitioner = \"min_size\" or \"max_size\""},
      {"[distribute]\npartitioner = \"variable_axis_size\"\n", absl::StatusCode::kInvalidArgument,
       "partitioner = \"max_size\" needs max_shard_bytes"},
      {"[distribute]\npartitioner = \"min_size\"\nmax_shard_bytes = 4096\n",
       absl::StatusCode::kInvalidArgument, "max_shard_bytes applies to partitioner = \"max_size\""},
      {"[distribute]\nstrategy = \"collective\"\npartitioner = \"fixed\"\n" + no_ps,
       absl::StatusCode::kInvalidArgument,
       "the collective strategy holds every variable whole on every replica"},
      {"[distribute]\nstrategy = \"parameter_server\"\n", absl::StatusCode::kInvalidArgument,
       "needs a cluster (TF_CONFIG or [cluster]) with ps tasks"},
      {"[distribute]\nstrategy = \"none\"\n" + cluster, absl::StatusCode::kInvalidArgument,
       "strategy = \"none\" trains locally, but the cluster has several tasks"},
      {"[distribute]\nstrategy = \"collective\"\n" + cluster, absl::StatusCode::kInvalidArgument,
       "mirrors the variables on every training task, but the cluster has ps tasks"},
      {"[distribute]\nstrategy = \"collective\"\nsync = true\n" + no_ps,
       absl::StatusCode::kInvalidArgument, "the collective strategy is always synchronous"},
      {"[distribute]\nbytes_per_pack = 4096\n" + cluster, absl::StatusCode::kInvalidArgument,
       "bytes_per_pack applies only to strategy = \"collective\""},
      {"[distribute]\ncollective_timeout_secs = 5\n", absl::StatusCode::kInvalidArgument,
       "collective_timeout_secs applies only to strategy = \"collective\""},
      {"[distribute]\nstrategy = \"parameter_server\"\n" + no_ps,
       absl::StatusCode::kInvalidArgument, "needs ps tasks; the cluster"},
      {"[distribute]\nstrategy = \"hybrid\"\n" + no_ps, absl::StatusCode::kInvalidArgument,
       "strategy = \"hybrid\" keeps the tables on ps tasks and all-reduces the rest"},
      {"[distribute]\nstrategy = \"hybrid\"\n", absl::StatusCode::kInvalidArgument,
       "it needs a cluster (TF_CONFIG or [cluster]) with both; this one is empty"},
      {"[distribute]\nstrategy = \"hybrid\"\nsync = true\nreplicas_to_aggregate = 1\n" + cluster,
       absl::StatusCode::kInvalidArgument,
       "replicas_to_aggregate applies to strategy = \"parameter_server\" with sync = true"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<JobConfig> job = Parse(std::string(kMinimal) + c.text);
    ASSERT_FALSE(job.ok()) << c.text;
    EXPECT_EQ(job.status().code(), c.code) << job.status();
    EXPECT_THAT(job.status().message(), HasSubstr(c.says));
    EXPECT_TRUE(IsConfigError(job.status())) << job.status();
  }
  // Parts are bounded when parsed.
  absl::StatusOr<JobConfig> many =
      Parse(std::string(kMinimal) + "[distribute]\npartitioner = \"fixed\"\nnum_shards = 5000\n");
  EXPECT_THAT(many.status().message(), HasSubstr("num_shards must be <= 1024, got 5000"));
  // The same cluster with "auto" (the default) is parameter-server training.
  absl::StatusOr<JobConfig> ok = Parse(std::string(kMinimal) + cluster);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(ok->run_config().TrainsOnCluster());
  EXPECT_EQ(ok->strategy(), Strategy::kParameterServer);
  absl::StatusOr<JobConfig> local = Parse(kMinimal);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->strategy(), Strategy::kLocal);
  // Without ps tasks "auto" is collective all-reduce, as is the alias.
  for (const char* strategy : {"", "[distribute]\nstrategy = \"multi_worker_mirrored\"\n"}) {
    absl::StatusOr<JobConfig> c = Parse(std::string(kMinimal) + strategy + no_ps);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->strategy(), Strategy::kCollective);
    EXPECT_THAT(c->DescribeRole(), HasSubstr("collective all-reduce replica 0 of 2"));
  }
  absl::StatusOr<JobConfig> tuned =
      Parse(std::string(kMinimal) + "[distribute]\nbytes_per_pack = 4096\n" + no_ps,
            {"distribute.check_replicas_steps=0"});
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  EXPECT_EQ(tuned->distribute.bytes_per_pack, 4096);
  EXPECT_EQ(tuned->distribute.check_replicas_steps, 0);
  // Hybrid: the collective keys apply, the role says what the task does.
  absl::StatusOr<JobConfig> hybrid =
      Parse(std::string(kMinimal) + "[distribute]\nstrategy = \"hybrid\"\n" + cluster,
            {"distribute.bytes_per_pack=4096", "distribute.partitioner=\"fixed\""});
  ASSERT_TRUE(hybrid.ok()) << hybrid.status();
  EXPECT_EQ(hybrid->strategy(), Strategy::kHybrid);
  EXPECT_EQ(hybrid->distribute.bytes_per_pack, 4096);
  EXPECT_THAT(hybrid->DescribeRole(), HasSubstr("hybrid replica 1 of 2: trains a mirrored copy"));
  absl::StatusOr<JobConfig> hybrid_sync =
      Parse(std::string(kMinimal) + "[distribute]\nstrategy = \"hybrid\"\nsync = true\n" + cluster);
  ASSERT_TRUE(hybrid_sync.ok()) << hybrid_sync.status();
  // Synchronous, with a backup replica.
  absl::StatusOr<JobConfig> sync = Parse(
      std::string(kMinimal) + "[distribute]\nsync = true\nreplicas_to_aggregate = 1\n" + cluster);
  ASSERT_TRUE(sync.ok()) << sync.status();
  EXPECT_THAT(sync->DescribeRole(), HasSubstr("trains synchronously"));
}

TEST(JobConfigTest, PrintedConfigSaysTheRole) {
  const std::string tf = R"({"cluster": {"chief": ["c:1"], "worker": ["w:1", "w:2"],
                            "ps": ["p:1"]}, "task": {"type": "worker", "index": 1}})";
  absl::StatusOr<JobConfig> worker = Parse(kMinimal, {}, tf);
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_THAT(worker->ToToml(),
              HasSubstr("# Role: worker (task worker:1, not the chief, of a cluster of 1 chief, "
                        "1 ps, 2 workers): trains asynchronously"));
  absl::StatusOr<JobConfig> chief =
      Parse(kMinimal, {}, R"({"cluster": {"chief": ["c:1"], "ps": ["p:1"]},
                             "task": {"type": "chief", "index": 0}})");
  ASSERT_TRUE(chief.ok()) << chief.status();
  EXPECT_THAT(chief->DescribeRole(), HasSubstr("task chief:0, the chief"));
  EXPECT_THAT(chief->DescribeRole(), HasSubstr("evaluates the final checkpoint"));
  absl::StatusOr<JobConfig> evaluator =
      Parse(kMinimal, {}, R"({"cluster": {"chief": ["c:1"], "ps": ["p:1"]},
                             "task": {"type": "evaluator", "index": 0}})");
  ASSERT_TRUE(evaluator.ok()) << evaluator.status();
  EXPECT_THAT(evaluator->DescribeRole(), HasSubstr("evaluator (task evaluator:0, outside"));
  EXPECT_FALSE(evaluator->run_config().TrainsOnCluster());
  absl::StatusOr<JobConfig> local = Parse(kMinimal);
  ASSERT_TRUE(local.ok());
  EXPECT_THAT(local->ToToml(), HasSubstr("# Role: local (no cluster)"));
}

// What a config may ask of the parser and the machine is bounded: deep dotted keys
// (which overflowed toml++'s stack), batch sizes and thread counts.
TEST(JobConfigTest, DeepKeysHugeBatchesAndThreadCountsAreRefused) {
  std::string deep = "[model]\nname = \"m\"\n[model.params]\n";
  for (int i = 0; i < 100000; ++i) deep += "k.";
  deep += "k = 1\n";
  ExpectError(Parse(deep), {"job.toml:4:", "a key has more than 32 dotted segments"});
  ExpectError(Parse("[model]\nname = \"m\"\n[" + std::string(200000, 'a') + "]\n"),
              {"unknown section"});  // A long key is fine; only depth is bounded.
  std::string header = "[model]\nname = \"m\"\n[a";
  for (int i = 0; i < 100; ++i) header += ".a";
  ExpectError(Parse(header + "]\n"), {"job.toml:3:", "more than 32 dotted segments"});
  std::string set = "model.params";
  for (int i = 0; i < 100000; ++i) set += ".k";
  ExpectError(Parse(kMinimal, {set + "=1"}), {"the key has more than 32 dotted segments"});
  ExpectError(Parse(kMinimal, {"train.batch_size=1000000000000"}),
              {"[train] batch_size must be <= 1048576, got 1000000000000"});
  ExpectError(Parse(kMinimal, {"data.eval_batch_size=2000000"}),
              {"[data] eval_batch_size must be <= 1048576"});
  ExpectError(Parse(kMinimal, {"run.intra_op_threads=100000"}),
              {"[run] intra_op_threads must be <= "});
  ExpectError(Parse(kMinimal, {"run.inter_op_threads=100000"}),
              {"[run] inter_op_threads must be <= "});
  // Floats, times and quoted dots are not key segments.
  ASSERT_TRUE(
      Parse(std::string(kMinimal) + "[eval]\nname = \"" + std::string(100, '.') + "\"\n").ok());
  ASSERT_TRUE(Parse(kMinimal, {"model.params.eps=1.5e-7"}).ok());
}

TEST(JobConfigTest, ParamsNobodyReadAreUnknownWithSuggestion) {
  absl::StatusOr<JobConfig> c = Parse(kMinimal, {"model.params.hiden_units=[3]"});
  ASSERT_TRUE(c.ok()) << c.status();
  ModelSection params = c->model;  // Copies share what was read.
  ASSERT_TRUE(params.GetIntList("hidden_units", {}).ok());
  ASSERT_TRUE(params.GetDouble("learning_rate", 0).ok());
  ASSERT_TRUE(c->model.GetBool("use_bias", false).ok());
  ASSERT_TRUE(c->model.GetString("activation", "").ok());
  absl::Status s = params.CheckEveryKeyRead();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(IsConfigError(s));
  EXPECT_THAT(s.message(), HasSubstr("unknown key 'hiden_units' (did you mean 'hidden_units'?) "
                                     "for model 'fashion_mlp'"));
  ASSERT_TRUE(c->model.GetIntList("hiden_units", {}).ok());
  EXPECT_TRUE(params.CheckEveryKeyRead().ok());
  // A wrong type is a config error too.
  EXPECT_TRUE(IsConfigError(c->model.GetInt("activation", 0).status()));
  EXPECT_FALSE(IsConfigError(absl::InvalidArgumentError("x")));
}

}  // namespace
}  // namespace tandem

namespace tandem {
namespace {

TEST(JobConfigTest, ExportAndWarmStartKeysParseAndRoundTrip) {
  absl::StatusOr<JobConfig> c = Parse(std::string(kMinimal) + R"(
warm_start_from = "/w/weights.safetensors"
warm_start_vars = "dense.*"
[train.warm_start_map]
"dense/kernel" = "fc1.weight"
[export]
strategy = "best"
name = "serving"
keep = 3
metric = "accuracy"
metric_mode = "max"
)",
                                      {"train.warm_start_map.dense/bias=fc1.bias"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->train.warm_start_from, "/w/weights.safetensors");
  EXPECT_EQ(c->train.warm_start_vars, "dense.*");
  EXPECT_EQ(c->train.warm_start_map,
            (std::map<std::string, std::string>{{"dense/bias", "fc1.bias"},
                                                {"dense/kernel", "fc1.weight"}}));
  EXPECT_EQ(c->export_.strategy, "best");
  EXPECT_EQ(c->export_.keep, 3);
  const std::string text = c->ToToml();
  absl::StatusOr<JobConfig> again = Parse(text);
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << text;
  EXPECT_EQ(*again, *c) << text;
}

TEST(JobConfigTest, ExportAndWarmStartKeysThatCannotApplyAreRefused) {
  const std::string base = kMinimal;
  ExpectError(Parse(base, {"export.strategy=sometimes"}),
              {"[export] strategy must be one of \"none\", \"final\", \"latest\", \"best\""});
  ExpectError(Parse(base, {"export.metric=accuracy"}),
              {"--set export.metric=accuracy", "applies to strategy = \"best\" only"});
  ExpectError(Parse(base, {"export.strategy=best", "export.metric=accuracy"}),
              {"metric_mode (\"min\" or \"max\") is required for metric 'accuracy'"});
  ExpectError(Parse(base, {"export.name=../up"}), {"[export] name '../up' must be"});
  ExpectError(Parse(base, {"export.keep=0"}), {"[export] keep must be >= 1"});
  ExpectError(Parse(base, {"train.warm_start_vars=dense"}),
              {"warm_start_vars needs warm_start_from"});
  ExpectError(Parse(base, {"train.warm_start_from=/w", "train.warm_start_vars=(unclosed"}),
              {"warm_start_vars '(unclosed' is not a regex"});
  ExpectError(Parse(base, {"train.warm_start_from=/w", "train.warm_start_map.a=1"}),
              {"[train] warm_start_map.a must be a string, got integer"});
  ExpectError(Parse(base + "[train.warm_start_map]\nx = \"y\"\n"),
              {"warm_start_map needs warm_start_from"});
}

TEST(JobConfigTest, SecurityAndLivenessKeysParseAndRoundTrip) {
  absl::StatusOr<JobConfig> c =
      Parse(std::string(kMinimal) +
                "[security]\ntls_cert = \"/t/task.pem\"\ntls_key = \"/t/task.key\"\n"
                "tls_ca = \"/t/ca.pem\"\ntls_server_name = \"tandem-cluster\"\n"
                "health_port = 8081\n",
            {"run.operation_timeout_secs=30", "run.liveness_file=/tmp/alive"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->security.tls_cert, "/t/task.pem");
  EXPECT_EQ(c->security.tls_server_name, "tandem-cluster");
  EXPECT_EQ(c->security.health_port, 8081);
  EXPECT_EQ(c->run.liveness_file, "/tmp/alive");
  EXPECT_EQ(c->run_config().operation_timeout_secs(), 30);
  absl::StatusOr<JobConfig> again = Parse(c->ToToml());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *c);
  // The default step deadline.
  absl::StatusOr<JobConfig> plain = Parse(kMinimal);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->run_config().operation_timeout_secs(), 300);
}

TEST(JobConfigTest, SecurityKeysThatCannotApplyAreRefused) {
  const std::string base = kMinimal;
  ExpectError(Parse(base, {"security.tls_cert=/t/task.pem", "security.tls_key=/t/task.key"}),
              {"[security] tls_ca is missing", "go together"});
  ExpectError(Parse(base, {"security.tls_ca=/t/ca.pem"}), {"[security] tls_cert is missing"});
  ExpectError(Parse(base, {"security.tls_server_name=x"}),
              {"--set security.tls_server_name=x", "tls_server_name needs TLS"});
  ExpectError(Parse(base, {"security.health_port=70000"}), {"[security] health_port must be <="});
  ExpectError(Parse(base, {"security.token=abc"}), {"unknown key 'token'"});
  ExpectError(Parse(base, {"run.operation_timeout_secs=-1"}),
              {"[run] operation_timeout_secs must be >= 0"});
}

}  // namespace
}  // namespace tandem

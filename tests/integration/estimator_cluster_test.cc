// tests/integration/estimator_cluster_test.cc
//
// The stock trainer on a cluster of real processes on 127.0.0.1 (ephemeral ports):
// every task runs the same `trainer train_and_evaluate` command and only TF_CONFIG
// differs, as under Kubeflow, SageMaker or Vertex AI; and `trainer launch`, which
// generates those TF_CONFIGs itself. Each run trains fashion_mlp asynchronously and
// checks how every process ends, what global_step counts, the final checkpoint's
// shards, the accuracy the evaluator (or the chief) reports at max_steps, and the
// final model exported for serving by the task that evaluated it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/cluster_job.h"
#include "tests/integration/subprocess.h"

namespace tandem {
namespace {

using testing::Addresses;
using testing::EventAccuracy;
using testing::ExpectAllExitZero;
using testing::ExpectFinalCheckpoint;
using testing::FinalEvaluation;
using testing::Find;
using ::testing::HasSubstr;
using testing::JobArgs;
using testing::kJobDeadline;
using testing::kMaxSteps;
using ::testing::Not;
using testing::StartTasks;
using testing::Subprocess;
using testing::TaskRun;
using testing::TempDir;
using testing::TrainingFinished;
using json = nlohmann::json;

// [export] strategy = "final" on every task.
const std::vector<std::string> kExportFinal = {"export.strategy=\"final\""};

// model_dir/export/exporter holds the final model: every version complete and at the
// final step (the chief and the evaluator may both export it; a step already exported
// is skipped, but two exports at the same moment each keep a version).
void ExpectFinalExport(const std::string& model_dir) {
  const std::filesystem::path base = std::filesystem::path(model_dir) / "export" / "exporter";
  int versions = 0;
  for (const auto& entry : std::filesystem::directory_iterator(base)) {
    const std::string name = entry.path().filename().string();
    EXPECT_NE(name[0], '.') << "a temporary directory was left behind: " << name;
    std::ifstream in(entry.path() / "signature.json");
    json sig = json::parse(in, nullptr, false);
    ASSERT_TRUE(sig.is_object()) << entry.path();
    EXPECT_GE(sig.value("global_step", int64_t{0}), kMaxSteps) << entry.path();
    EXPECT_TRUE(std::filesystem::exists(entry.path() / "graph.pb")) << entry.path();
    EXPECT_TRUE(std::filesystem::exists(entry.path() / "variables.safetensors")) << entry.path();
    ++versions;
  }
  EXPECT_GE(versions, 1) << base;
  EXPECT_LE(versions, 2) << base;
}

// True when nothing listens on 127.0.0.1:`port` (this process can bind it).
bool PortIsFree(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return bound;
}

TEST(EstimatorClusterTest, KubeflowChiefTwoWorkersTwoPsAndEvaluator) {
  // The deploy/kubeflow TFJob as the training-operator writes its TF_CONFIG: every
  // replica type in "cluster", the evaluator too.
  TempDir tmp;
  const std::string model_dir = tmp.path() + "/model";
  json cluster = {{"chief", Addresses(1)},
                  {"worker", Addresses(2)},
                  {"ps", Addresses(2)},
                  {"evaluator", Addresses(1)}};
  std::vector<TaskRun> runs = StartTasks(
      cluster, {{"environment", "cloud"}},
      {{"ps", 0}, {"ps", 1}, {"chief", 0}, {"worker", 0}, {"worker", 1}, {"evaluator", 0}},
      model_dir, "", kExportFinal);
  // The evaluator serves nothing: the port "cluster" names for it stays free.
  const std::string evaluator_address = cluster["evaluator"][0].get<std::string>();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_TRUE(PortIsFree(std::stoi(evaluator_address.substr(evaluator_address.rfind(':') + 1))));
  ExpectAllExitZero(runs);
  ExpectFinalExport(model_dir);

  // Asynchronous replicas: each one trains (runs steps of its own) until the shared
  // global_step reaches max_steps, and global_step counts all their steps: the
  // chief's final global_step is at most their sum (steps after it are not in it) and
  // at least max_steps.
  int64_t sum = 0;
  for (const char* name : {"chief_0", "worker_0", "worker_1"}) {
    const testing::TrainingEnd end = TrainingFinished(Find(runs, name).process->Stderr());
    EXPECT_GE(end.local_steps, 1) << name << " ran no step of its own";
    EXPECT_GE(end.global_step, kMaxSteps) << name << " stopped before max_steps";
    sum += end.local_steps;
  }
  const std::string chief_out = Find(runs, "chief_0").process->Stdout();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(chief_out, m, std::regex(R"(trained: global_step = (\d+))")))
      << chief_out;
  const int64_t global_step = std::stoll(m[1]);
  EXPECT_GE(global_step, kMaxSteps);
  EXPECT_LE(global_step, sum);
  EXPECT_GE(sum, kMaxSteps);
  ExpectFinalCheckpoint(model_dir, 2);

  // The evaluator ended after the checkpoint at max_steps, with its events written.
  auto [accuracy, step] = FinalEvaluation(Find(runs, "evaluator_0").process->Stdout());
  EXPECT_GE(step, kMaxSteps);
  auto [event_accuracy, event_step] = EventAccuracy(model_dir);
  EXPECT_GE(event_step, kMaxSteps);
  EXPECT_GE(event_accuracy, 0.85);
  EXPECT_GE(accuracy, 0.85);
  EXPECT_THAT(Find(runs, "ps_0").process->Stdout(), HasSubstr("ps: stopped: training finished"));
}

TEST(EstimatorClusterTest, ChieflessPsWorkerTfJob) {
  // Kubeflow's default PS/Worker TFJob: no chief, no evaluator. Worker 0 acts as the
  // chief: it initialises, writes checkpoints, evaluates the final one and exports it.
  TempDir tmp;
  const std::string model_dir = tmp.path() + "/model";
  json cluster = {{"worker", Addresses(2)}, {"ps", Addresses(1)}};
  std::vector<TaskRun> runs =
      StartTasks(cluster, {{"environment", "cloud"}}, {{"ps", 0}, {"worker", 0}, {"worker", 1}},
                 model_dir, "", kExportFinal);
  ExpectAllExitZero(runs);
  ExpectFinalExport(model_dir);
  auto [accuracy, step] = FinalEvaluation(Find(runs, "worker_0").process->Stdout());
  EXPECT_GE(step, kMaxSteps);
  EXPECT_GE(accuracy, 0.85);
  EXPECT_THAT(Find(runs, "worker_0").process->Stderr(), HasSubstr("acts as the chief"));
  EXPECT_THAT(Find(runs, "worker_1").process->Stderr(), Not(HasSubstr("acts as the chief")));
  ExpectFinalCheckpoint(model_dir, 1);
}

// `trainer health --address ADDRESS [args...]`: its exit code and what it printed.
std::pair<int, std::string> Health(const std::string& dir, const std::string& address,
                                   const std::vector<std::string>& args = {}) {
  std::vector<std::string> argv = {TANDEM_TRAINER, "health",       "--address",
                                   address,        "--timeout_ms", "3000"};
  argv.insert(argv.end(), args.begin(), args.end());
  static int n = 0;
  Subprocess probe(argv, absl::StrCat(dir, "/health_", n++));
  const int code = probe.Wait(std::chrono::seconds(30));
  return {code, probe.Stdout()};
}

TEST(EstimatorClusterTest, MutualTlsClusterTrainsAndRefusesStrangers) {
  // Every task speaks mutual TLS with the cluster's CA ([security] from --set, as a
  // Kubernetes Secret's files would be named), and answers probes on a plaintext
  // health port of its own; the evaluator, which serves nothing, too.
  TempDir tmp;
  const std::string model_dir = tmp.path() + "/model";
  const std::string tls = std::string(TANDEM_SOURCE_DIR) + "/tests/data/tls/";
  const std::vector<std::string> security = {
      absl::StrCat("security.tls_cert=\"", tls, "cluster/task.pem\""),
      absl::StrCat("security.tls_key=\"", tls, "cluster/task.key\""),
      absl::StrCat("security.tls_ca=\"", tls, "cluster/ca.pem\""),
      "security.tls_server_name=\"tandem-cluster\""};
  json cluster = {{"chief", Addresses(1)}, {"worker", Addresses(1)}, {"ps", Addresses(1)}};
  std::vector<TaskRun> runs;
  std::map<std::string, std::string> health;  // Task -> its health port's address.
  for (const auto& [type, index] : std::vector<std::pair<std::string, int>>{
           {"ps", 0}, {"chief", 0}, {"worker", 0}, {"evaluator", 0}}) {
    const int port = testing::PickFreePort();
    std::vector<std::string> sets = security;
    sets.push_back(absl::StrCat("security.health_port=", port));
    std::vector<TaskRun> one =
        StartTasks(cluster, {{"environment", "cloud"}}, {{type, index}}, model_dir, "", sets);
    health[one[0].name] = absl::StrCat("127.0.0.1:", port);
    runs.push_back(std::move(one[0]));
  }
  // While the cluster trains: every health port answers a plaintext probe; the chief's
  // own port refuses plaintext and a peer of another CA, and serves the cluster's.
  const std::string chief = cluster["chief"][0].get<std::string>();
  for (const auto& [task, address] : health) {
    // A task opens its health port as it starts: on a loaded machine that can take
    // seconds, so wait for the first answer (bounded) instead of sleeping a fixed time.
    auto [code, out] = Health(tmp.path(), address);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (code != 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      std::tie(code, out) = Health(tmp.path(), address);
    }
    EXPECT_EQ(code, 0) << task << " health port " << address << ": " << out;
    EXPECT_THAT(out, HasSubstr("SERVING")) << task;
  }
  EXPECT_EQ(Health(tmp.path(), chief).first, 1) << "plaintext was served by a TLS port";
  auto [stranger, why] =
      Health(tmp.path(), chief,
             {"--tls_ca", tls + "cluster/ca.pem", "--tls_cert", tls + "other/task.pem", "--tls_key",
              tls + "other/task.key", "--tls_server_name", "tandem-cluster"});
  EXPECT_EQ(stranger, 1) << "a certificate of another CA was served: " << why;
  auto [peer, answer] =
      Health(tmp.path(), chief,
             {"--tls_ca", tls + "cluster/ca.pem", "--tls_cert", tls + "cluster/task.pem",
              "--tls_key", tls + "cluster/task.key", "--tls_server_name", "tandem-cluster"});
  EXPECT_EQ(peer, 0) << answer;
  ExpectAllExitZero(runs);
  EXPECT_THAT(Find(runs, "chief_0").process->Stderr(), HasSubstr("(TLS)"));
  auto [accuracy, step] = FinalEvaluation(Find(runs, "evaluator_0").process->Stdout());
  EXPECT_GE(step, kMaxSteps);
  EXPECT_GE(accuracy, 0.85);
  ExpectFinalCheckpoint(model_dir, 1);
}

TEST(EstimatorClusterTest, MismatchedTlsFilesStopATaskAtOnceNamingTheFile) {
  TempDir tmp;
  const std::string tls = std::string(TANDEM_SOURCE_DIR) + "/tests/data/tls/";
  json cluster = {{"chief", Addresses(1)}, {"ps", Addresses(1)}};
  std::vector<TaskRun> runs =
      StartTasks(cluster, {}, {{"chief", 0}}, tmp.path() + "/model", "",
                 {absl::StrCat("security.tls_cert=\"", tls, "other/task.pem\""),
                  absl::StrCat("security.tls_key=\"", tls, "other/task.key\""),
                  absl::StrCat("security.tls_ca=\"", tls, "cluster/ca.pem\"")});
  EXPECT_EQ(runs[0].process->Wait(std::chrono::seconds(60)), 2);
  EXPECT_THAT(runs[0].process->Stderr(), HasSubstr("does not verify against the CA"));
  EXPECT_THAT(runs[0].process->Stderr(), HasSubstr("other/task.pem"));
}

TEST(EstimatorClusterTest, LegacyMasterLayoutWithoutEvaluator) {
  // SageMaker-style: a "master" job, "environment": "cloud", a ps and a worker on each
  // of two hosts (here two ports of 127.0.0.1 each), no evaluator: the master
  // evaluates the final checkpoint itself.
  TempDir tmp;
  const std::string model_dir = tmp.path() + "/model";
  json cluster = {{"master", Addresses(1)}, {"worker", Addresses(1)}, {"ps", Addresses(2)}};
  std::vector<TaskRun> runs =
      StartTasks(cluster, {{"environment", "cloud"}},
                 {{"ps", 0}, {"ps", 1}, {"master", 0}, {"worker", 0}}, model_dir, "", kExportFinal);
  ExpectAllExitZero(runs);
  ExpectFinalExport(model_dir);  // By the master: there is no evaluator.
  auto [accuracy, step] = FinalEvaluation(Find(runs, "master_0").process->Stdout());
  EXPECT_GE(step, kMaxSteps);
  EXPECT_GE(accuracy, 0.85);
  auto [event_accuracy, event_step] = EventAccuracy(model_dir);
  EXPECT_EQ(event_step, step);
  EXPECT_FLOAT_EQ(event_accuracy, accuracy);
  ExpectFinalCheckpoint(model_dir, 2);
}

TEST(EstimatorClusterTest, VertexAiStyleTfConfig) {
  // Vertex AI adds a "job" object and task.trial; both are ignored, as TensorFlow does.
  TempDir tmp;
  const std::string model_dir = tmp.path() + "/model";
  json cluster = {{"chief", Addresses(1)}, {"worker", Addresses(1)}, {"ps", Addresses(1)}};
  json extra = {{"job", {{"python_module", "trainer.task"}, {"region", "us-central1"}}},
                {"environment", "cloud"},
                {"task", {{"trial", "1"}}}};
  std::vector<TaskRun> runs =
      StartTasks(cluster, extra, {{"ps", 0}, {"chief", 0}, {"worker", 0}}, model_dir);
  ExpectAllExitZero(runs);
  auto [accuracy, step] = FinalEvaluation(Find(runs, "chief_0").process->Stdout());
  EXPECT_GE(step, kMaxSteps);
  EXPECT_GE(accuracy, 0.85);
  ExpectFinalCheckpoint(model_dir, 1);
}

std::vector<std::string> LaunchArgs(const std::string& model_dir, int64_t max_steps) {
  std::vector<std::string> args = JobArgs("launch", model_dir);
  for (std::string& a : args) {
    if (a == absl::StrCat("train.max_steps=", kMaxSteps))
      a = absl::StrCat("train.max_steps=", max_steps);
  }
  for (const char* a : {"--ps", "2", "--workers", "2", "--evaluator"}) args.push_back(a);
  return args;
}

TEST(EstimatorClusterTest, LaunchRunsTheWholeCluster) {
  TempDir tmp;
  const std::string model_dir = tmp.path() + "/model";
  Subprocess launch(LaunchArgs(model_dir, kMaxSteps), tmp.path() + "/launch");
  ASSERT_EQ(launch.Wait(kJobDeadline), 0)
      << launch.Stdout().substr(std::max<size_t>(launch.Stdout().size(), 6000) - 6000);
  const std::string out = launch.Stdout();
  for (const char* task : {"ps:0", "ps:1", "chief:0", "worker:0", "worker:1", "evaluator:0"}) {
    EXPECT_THAT(out, HasSubstr(absl::StrCat("[launch] ", task, " (pid "))) << task;
    EXPECT_THAT(out, HasSubstr(absl::StrCat("[", task, "] "))) << task;
  }
  EXPECT_THAT(out, HasSubstr("[launch] every task ended successfully"));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      out, m,
      std::regex(R"(\[evaluator:0\] final evaluation: accuracy = ([0-9.]+).*global_step = (\d+))")))
      << out;
  EXPECT_GE(std::stod(m[1]), 0.85);
  EXPECT_GE(std::stoll(m[2]), kMaxSteps);
  ExpectFinalCheckpoint(model_dir, 2);
}

// --pin_cpus: every task runs on one CPU (the kernel's own answer, read by the
// launcher), the i-th task on the (i mod n)-th CPU the launcher may use, and the
// cluster trains to its end.
TEST(EstimatorClusterTest, LaunchPinsEachTaskToOneCpu) {
  TempDir tmp;
  std::vector<std::string> args = JobArgs("launch", tmp.path() + "/model");
  for (std::string& a : args) {
    if (a == absl::StrCat("train.max_steps=", kMaxSteps)) a = "train.max_steps=30";
  }
  for (const char* a : {"--ps", "2", "--workers", "1", "--command", "train", "--pin_cpus"}) {
    args.push_back(a);
  }
  Subprocess launch(args, tmp.path() + "/launch");
  ASSERT_EQ(launch.Wait(kJobDeadline), 0) << launch.Stdout();
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  const std::string out = launch.Stdout();
  int i = 0;  // The launch order: ps tasks, the chief, the workers.
  for (const char* task : {"ps:0", "ps:1", "chief:0", "worker:0"}) {
    const int want = cpus[i++ % cpus.size()];
    EXPECT_THAT(out, ::testing::ContainsRegex(absl::StrCat(
                         R"(\[launch\] started )", task, R"( \(pid [0-9]+\) on CPU )", want, "\n")))
        << out;
  }
  EXPECT_THAT(out, HasSubstr("[launch] every task ended successfully"));
}

bool ProcessGone(pid_t pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string content((std::istreambuf_iterator<char>(stat)), {});
  const size_t close = content.rfind(')');
  return close != std::string::npos && close + 2 < content.size() && content[close + 2] == 'Z';
}

TEST(EstimatorClusterTest, CtrlCOnLaunchLeavesNoProcessBehind) {
  TempDir tmp;
  const std::string model_dir = tmp.path() + "/model";
  Subprocess launch(LaunchArgs(model_dir, 1000000), tmp.path() + "/launch");
  // Wait until the chief trains.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (launch.Stdout().find("[chief:0]") == std::string::npos ||
         launch.Stdout().find("loss = ") == std::string::npos) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << launch.Stdout();
    ASSERT_EQ(launch.Wait(std::chrono::milliseconds(200)), -1) << launch.Stdout();
  }
  kill(launch.pid(), SIGINT);
  const int code = launch.Wait(std::chrono::seconds(60));
  EXPECT_NE(code, -1) << "the launcher did not end after SIGINT";
  EXPECT_NE(code, 0);
  const std::string out = launch.Stdout();
  std::vector<pid_t> pids;
  static const std::regex re(R"(\[launch\] started \S+ \(pid (\d+)\))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
       ++it) {
    pids.push_back(std::stoi((*it)[1]));
  }
  EXPECT_EQ(pids.size(), 6u) << out;
  for (pid_t pid : pids) {
    EXPECT_TRUE(ProcessGone(pid)) << "pid " << pid << " still runs";
    if (!ProcessGone(pid)) kill(pid, SIGKILL);
  }
}

// Runs the trainer with `args` and TF_CONFIG; returns {exit code, stderr}.
std::pair<int, std::string> RunTrainer(std::vector<std::string> args, const std::string& tf_config,
                                       const std::string& log_prefix) {
  Subprocess p(args, log_prefix, {"TF_CONFIG=" + tf_config});
  int code = p.Wait(std::chrono::seconds(60));
  return {code, p.Stderr()};
}

TEST(EstimatorClusterTest, ConfigErrorsExitTwoAtOnce) {
  TempDir tmp;
  const std::string model_dir = tmp.path() + "/model";
  json cluster = {{"chief", Addresses(1)}, {"worker", Addresses(1)}, {"ps", Addresses(1)}};
  const std::string evaluator =
      json{{"cluster", cluster}, {"task", {{"type", "evaluator"}, {"index", 0}}}}.dump();
  auto [code, err] = RunTrainer(JobArgs("train", model_dir), evaluator, tmp.path() + "/eval");
  EXPECT_EQ(code, 2);
  EXPECT_THAT(err, HasSubstr("evaluator"));
  EXPECT_THAT(err, HasSubstr("train_and_evaluate"));

  std::vector<std::string> sync = JobArgs("train_and_evaluate", model_dir);
  sync.insert(sync.end(), {"--set", "distribute.sync=true"});
  std::tie(code, err) = RunTrainer(sync, "", tmp.path() + "/sync");
  EXPECT_EQ(code, 2);
  EXPECT_THAT(err, HasSubstr("sync = true trains synchronous replicas on a cluster with ps tasks"));

  std::vector<std::string> typo = JobArgs("train", model_dir);
  typo.insert(typo.end(), {"--set", "model.params.hiden_units=[64]"});
  std::tie(code, err) = RunTrainer(typo, "", tmp.path() + "/typo");
  EXPECT_EQ(code, 2);
  EXPECT_THAT(err, HasSubstr("unknown key 'hiden_units' (did you mean 'hidden_units'?)"));
  EXPECT_FALSE(std::filesystem::exists(model_dir + "/checkpoint")) << "it trained";

  std::vector<std::string> negative = JobArgs("train", model_dir);
  negative.insert(negative.end(), {"--set", "model.params.hidden_units=[64, -5]"});
  std::tie(code, err) = RunTrainer(negative, "", tmp.path() + "/negative");
  EXPECT_EQ(code, 2);
  EXPECT_THAT(err, HasSubstr("[model.params] hidden_units must be >= 1, got -5"));

  json no_ps = {{"chief", Addresses(1)}, {"worker", Addresses(1)}};
  const std::string chief =
      json{{"cluster", no_ps}, {"task", {{"type", "chief"}, {"index", 0}}}}.dump();
  std::vector<std::string> ps_strategy = JobArgs("train", model_dir);
  ps_strategy.insert(ps_strategy.end(), {"--set", "distribute.strategy=\"parameter_server\""});
  std::tie(code, err) = RunTrainer(ps_strategy, chief, tmp.path() + "/no_ps");
  EXPECT_EQ(code, 2);
  EXPECT_THAT(err, HasSubstr("strategy = \"parameter_server\" needs ps tasks"));
}

}  // namespace
}  // namespace tandem

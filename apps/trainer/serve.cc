#include "apps/trainer/serve.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "estimator/job_config.h"
#include "estimator/run_config.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/distributed/server.h"
#include "glog/logging.h"

namespace tandem {
namespace {

struct Role {
  ClusterSpec cluster;
  std::string job;
  std::optional<int> task;
};

Role RoleOf(const ClusterSpec& cluster, const TaskSection& task) {
  Role role{cluster, task.type, std::nullopt};
  if (task.index) role.task = static_cast<int>(*task.index);
  return role;
}

// --cluster: TF_CONFIG JSON (inline or a .json file) or a TOML file with [cluster].
absl::StatusOr<Role> RoleFromClusterFlag(const std::string& value) {
  std::string text = value;
  std::string source = "--cluster";
  if (!absl::StartsWith(value, "{")) {
    TANDEM_ASSIGN_OR_RETURN(text, env::ReadFile(value));
    source = value;
  }
  Role role;
  if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(text), "{")) {
    absl::StatusOr<TfConfig> tf = ParseTfConfig(text);
    if (!tf.ok())
      return absl::InvalidArgumentError(absl::StrCat(source, ": ", tf.status().message()));
    role.cluster = tf->cluster;
    role.job = tf->task_type;
    role.task = tf->task_index;
    return role;
  }
  // A TOML file: only its [cluster] (and [task]) matter.
  ClusterSpec cluster;
  TaskSection task;
  TANDEM_RETURN_IF_ERROR(ParseClusterToml(text, source, &cluster, &task));
  return RoleOf(cluster, task);
}

}  // namespace

int Serve(const ServeFlags& flags) {
  Role role;
  if (!flags.config.empty()) {
    absl::StatusOr<JobConfig> job = JobConfig::LoadWithEnvironment(flags.config);
    if (!job.ok()) return Fail(kUsageError, job.status());
    role = RoleOf(job->cluster, job->task);
  }
  if (!flags.cluster.empty()) {
    absl::StatusOr<Role> r = RoleFromClusterFlag(flags.cluster);
    if (!r.ok()) return Fail(kUsageError, r.status());
    role.cluster = r->cluster;
    if (!r->job.empty()) role.job = r->job;
    if (r->task) role.task = r->task;
  }
  if (!flags.job.empty()) role.job = flags.job;
  if (flags.task) role.task = flags.task;
  if (role.cluster.empty()) {
    return Fail(kUsageError, absl::InvalidArgumentError(
                                 "serve needs a cluster: --cluster (TF_CONFIG JSON or a TOML "
                                 "file with [cluster]), or --config with [cluster]/TF_CONFIG"));
  }
  if (role.job.empty() || !role.task) {
    return Fail(kUsageError, absl::InvalidArgumentError(
                                 "serve needs this task's job and index: --job and --task (or "
                                 "TF_CONFIG's task)"));
  }
  const TaskId task{role.job, *role.task};
  if (!role.cluster.HasTask(task)) {
    return Fail(kUsageError, absl::InvalidArgumentError(absl::StrCat(
                                 "task ", role.job, ":", *role.task, " is not in the cluster ",
                                 role.cluster.DebugString())));
  }
  ServerOptions options;
  options.cluster = role.cluster;
  options.task = task;
  options.security.token = flags.token.empty() ? SecurityFromEnvironment().token : flags.token;
  options.security.cert_file = flags.tls_cert;
  options.security.key_file = flags.tls_key;
  options.security.ca_file = flags.tls_ca;
  options.inter_op_threads = flags.inter_op_threads;
  options.intra_op_threads = flags.intra_op_threads;
  options.channels_per_task = flags.channels_per_task;
  // Blocked before any thread starts, so that every thread inherits the mask and the
  // watcher below is the one that receives them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(options);
  if (!server.ok()) return Fail(kRuntimeError, server.status());
  std::printf("serving %s on %s\n", (*server)->task_name().c_str(), (*server)->address().c_str());
  std::fflush(stdout);

  // SIGTERM / SIGINT stop the server; a thread watches for them.
  Server* s = server->get();
  std::thread([s, set] {
    int sig = 0;
    sigwait(&set, &sig);
    LOG(INFO) << "signal " << sig << ": stopping";
    s->Stop();
  }).detach();
  std::string reason = s->Join();
  LOG(INFO) << "server " << s->task_name() << " stopped: " << reason;
  std::printf("stopped: %s\n", reason.c_str());
  std::fflush(stdout);
  std::_Exit(0);  // The signal thread may still be blocked in sigwait.
}

}  // namespace tandem

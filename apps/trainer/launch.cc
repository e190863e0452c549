// apps/trainer/launch.cc
//
// `trainer launch` (apps/trainer/launch.h): ports, TF_CONFIGs, child processes with
// prefixed output, signal forwarding and the end of the run.
#include "apps/trainer/launch.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "apps/trainer/exit_codes.h"
#include "framework/core/env.h"
#include "framework/core/free_port.h"
#include "nlohmann/json.hpp"

namespace tandem {
namespace {

struct Task {
  std::string job;
  int index = 0;
  std::string tf_config;
  pid_t pid = -1;
  int out = -1;               // Read end of the task's stdout+stderr pipe; -1 once closed.
  std::string pending;        // Output not yet ended by a newline.
  std::optional<int> status;  // wait status once exited.
  std::string name() const { return absl::StrCat(job, ":", index); }
};

std::vector<Task> PlanTasks(const LaunchFlags& flags, const std::vector<int>& ports) {
  nlohmann::json cluster = nlohmann::json::object();
  size_t next = 0;
  auto addresses = [&](int n) {
    nlohmann::json list = nlohmann::json::array();
    for (int i = 0; i < n; ++i) list.push_back(absl::StrCat("127.0.0.1:", ports[next++]));
    return list;
  };
  if (!flags.no_chief) cluster["chief"] = addresses(1);
  if (flags.workers > 0) cluster["worker"] = addresses(flags.workers);
  if (flags.ps > 0) cluster["ps"] = addresses(flags.ps);
  std::vector<Task> tasks;
  auto add = [&](const std::string& job, int index) {
    nlohmann::json tf = {{"cluster", cluster},
                         {"task", {{"type", job}, {"index", index}}},
                         {"environment", "cloud"}};
    tasks.push_back(Task{job, index, tf.dump()});
  };
  for (int i = 0; i < flags.ps; ++i) add("ps", i);
  if (!flags.no_chief) add("chief", 0);
  for (int i = 0; i < flags.workers; ++i) add("worker", i);
  if (flags.evaluator) add("evaluator", 0);
  return tasks;
}

void Say(const std::string& line) {
  std::fprintf(stdout, "[launch] %s\n", line.c_str());
  std::fflush(stdout);
}

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exit code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("signal ", WTERMSIG(status));
  return "unknown status";
}

bool Succeeded(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

// The CPUs in `set`, in order.
std::vector<int> CpusIn(const cpu_set_t& set) {
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

// The CPUs process `pid` (0: this one) may run on, as the kernel says; empty on error.
std::vector<int> AllowedCpus(pid_t pid = 0) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(pid, sizeof(set), &set) != 0) return {};
  return CpusIn(set);
}

// Restricts process `pid` (0: this one) to CPU `cpu`.
int PinTo(pid_t pid, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(pid, sizeof(set), &set);
}

// Starts `task` running this binary with `args`, on CPU `cpu` alone when it is not
// negative; its stdout and stderr go to a pipe.
absl::Status Start(Task& task, const std::vector<std::string>& args, const sigset_t& blocked,
                   int cpu) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::UnavailableError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return absl::UnavailableError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    // The child: its own process group, SIGKILL if the launcher dies, default signals.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    sigprocmask(SIG_UNBLOCK, &blocked, nullptr);
    // Before exec: every thread the trainer starts inherits it.
    if (cpu >= 0 && PinTo(0, cpu) != 0) _exit(127);
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    setenv("TF_CONFIG", task.tf_config.c_str(), 1);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv("/proc/self/exe", argv.data());
    std::fprintf(stderr, "exec of the trainer failed: %s\n", std::strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  // The child pins itself before exec; pinning here too makes the report below the
  // kernel's state rather than a race with the child.
  if (cpu >= 0) PinTo(pid, cpu);
  task.pid = pid;
  task.out = fds[0];
  Say(absl::StrCat("started ", task.name(), " (pid ", pid, ")",
                   cpu >= 0 ? absl::StrCat(" on CPU ", absl::StrJoin(AllowedCpus(pid), ",")) : ""));
  return absl::OkStatus();
}

// Writes the complete lines of `task`'s output with its prefix; at EOF the rest too.
void Drain(Task& task) {
  char buffer[65536];
  ssize_t n = read(task.out, buffer, sizeof(buffer));
  if (n > 0) task.pending.append(buffer, static_cast<size_t>(n));
  const bool eof = n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN);
  size_t start = 0;
  for (size_t nl; (nl = task.pending.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::fprintf(stdout, "[%s] %.*s\n", task.name().c_str(), static_cast<int>(nl - start),
                 task.pending.data() + start);
  }
  task.pending.erase(0, start);
  if (eof) {
    if (!task.pending.empty())
      std::fprintf(stdout, "[%s] %s\n", task.name().c_str(), task.pending.c_str());
    task.pending.clear();
    close(task.out);
    task.out = -1;
  }
  std::fflush(stdout);
}

// A private temporary directory holding a throwaway CA and a certificate for
// 127.0.0.1 that every task presents as server and client; removed by the destructor.
class ThrowawayTls {
 public:
  static absl::StatusOr<std::unique_ptr<ThrowawayTls>> Make() {
    std::string dir = "/tmp/tandem-launch-tls-XXXXXX";
    if (mkdtemp(dir.data()) == nullptr) {
      return absl::UnavailableError(absl::StrCat("mkdtemp: ", std::strerror(errno)));
    }
    auto tls = std::unique_ptr<ThrowawayTls>(new ThrowawayTls(dir));
    // An EC P-256 CA; a certificate signed by it for 127.0.0.1 and localhost with
    // both TLS usages, valid for two days.
    const std::string script = absl::StrCat(
        "set -e; cd '", dir, "'; exec 2>openssl.log; ",
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "-keyout ca.key -out ca.pem -days 2 -subj /CN=tandem-launch-ca >/dev/null; ",
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout task.key "
        "-out task.csr -subj /CN=tandem-launch-task >/dev/null; ",
        "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,"
        "clientAuth\n' > task.ext; ",
        "openssl x509 -req -in task.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
        "-extfile task.ext -out task.pem >/dev/null");
    const int rc = std::system(script.c_str());  // sh -c: the paths are ours.
    if (rc != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "launch --tls: making the throwaway certificates with the openssl command failed "
          "(is openssl installed? apt-get install openssl); see ",
          dir, "/openssl.log"));
    }
    return tls;
  }
  ~ThrowawayTls() { env::DeleteRecursively(dir_).IgnoreError(); }
  // The --set overrides that give every task these files.
  std::vector<std::string> Sets() const {
    return {absl::StrCat("security.tls_cert=\"", dir_, "/task.pem\""),
            absl::StrCat("security.tls_key=\"", dir_, "/task.key\""),
            absl::StrCat("security.tls_ca=\"", dir_, "/ca.pem\"")};
  }

 private:
  explicit ThrowawayTls(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

void SignalAll(std::vector<Task>& tasks, int sig) {
  for (Task& t : tasks) {
    if (t.pid > 0 && !t.status) kill(t.pid, sig);
  }
}

}  // namespace

CLI::App* AddLaunchCommand(CLI::App& app, LaunchFlags& flags) {
  CLI::App* launch = app.add_subcommand(
      "launch",
      "run a whole cluster on this machine: a chief, workers, ps tasks and optionally an "
      "evaluator, each this trainer with its own TF_CONFIG on 127.0.0.1");
  launch->add_option("--config", flags.config, "the TOML job config every task runs")->required();
  launch->add_option("--set", flags.sets, "config override passed to every task (repeatable)");
  launch
      ->add_option("--ps", flags.ps,
                   "parameter server tasks (0: collective all-reduce, no parameter servers; with "
                   "--set distribute.strategy=\\\"hybrid\\\" they hold the tables)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  launch->add_option("--workers", flags.workers, "worker tasks besides the chief")
      ->check(CLI::Range(0, 256))
      ->capture_default_str();
  launch->add_flag("--no_chief", flags.no_chief,
                   "no chief task: worker 0 acts as the chief (needs --workers >= 1)");
  launch->add_flag("--evaluator", flags.evaluator, "also run an evaluator task");
  launch->add_option("--command", flags.command, "what every task runs")
      ->check(CLI::IsMember({"train_and_evaluate", "train"}))
      ->capture_default_str();
  launch->add_flag("--tls", flags.tls,
                   "mutual TLS between the tasks, with a throwaway CA made by the openssl "
                   "command");
  launch->add_flag("--print_tf_config", flags.print_tf_config,
                   "print each task's TF_CONFIG instead of running");
  launch->add_flag("--pin_cpus", flags.pin_cpus,
                   "run each task's threads on one CPU: the i-th task on the (i mod n)-th of "
                   "the n CPUs this launcher may use");
  launch
      ->add_option("--grace_secs", flags.grace_secs,
                   "seconds between SIGTERM and SIGKILL when stopping tasks")
      ->check(CLI::Range(0, 3600))
      ->capture_default_str();
  return launch;
}

int Launch(const LaunchFlags& flags) {
  if (flags.no_chief && flags.workers < 1) {
    return Fail(kUsageError,
                absl::InvalidArgumentError("launch: --no_chief needs --workers >= 1 (worker 0 "
                                           "acts as the chief)"));
  }
  absl::StatusOr<std::vector<int>> ports =
      PickFreePorts((flags.no_chief ? 0 : 1) + flags.workers + flags.ps);
  if (!ports.ok()) return Fail(kRuntimeError, ports.status());
  std::vector<Task> tasks = PlanTasks(flags, *ports);
  if (flags.print_tf_config) {
    for (const Task& t : tasks) std::printf("%s %s\n", t.name().c_str(), t.tf_config.c_str());
    return 0;
  }
  std::vector<std::string> args = {"trainer", flags.command, "--config", flags.config};
  std::unique_ptr<ThrowawayTls> tls;
  std::vector<std::string> sets;
  if (flags.tls) {
    absl::StatusOr<std::unique_ptr<ThrowawayTls>> made = ThrowawayTls::Make();
    if (!made.ok()) return Fail(kRuntimeError, made.status());
    tls = *std::move(made);
    sets = tls->Sets();
    Say("mutual TLS between the tasks, with a throwaway CA");
  }
  sets.insert(sets.end(), flags.sets.begin(), flags.sets.end());  // The caller's win.
  for (const std::string& s : sets) {
    args.push_back("--set");
    args.push_back(s);
  }

  sigset_t handled;
  sigemptyset(&handled);
  for (int sig : {SIGINT, SIGTERM, SIGCHLD}) sigaddset(&handled, sig);
  sigprocmask(SIG_BLOCK, &handled, nullptr);
  const int sig_fd = signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sig_fd < 0) {
    return Fail(kRuntimeError,
                absl::UnavailableError(absl::StrCat("signalfd: ", std::strerror(errno))));
  }

  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> kill_at;  // Set once stopping: when SIGKILL follows.
  std::string failed;                        // The first task that failed.
  auto stop = [&](int sig, const std::string& why) {
    if (kill_at) return;
    Say(absl::StrCat(why, "; stopping every task (SIGKILL after ", flags.grace_secs, " s)"));
    SignalAll(tasks, sig);
    kill_at = Clock::now() + std::chrono::seconds(flags.grace_secs);
  };
  const std::vector<int> cpus = flags.pin_cpus ? AllowedCpus() : std::vector<int>();
  for (size_t i = 0; i < tasks.size(); ++i) {
    Task& t = tasks[i];
    const int cpu = cpus.empty() ? -1 : cpus[i % cpus.size()];
    absl::Status s = Start(t, args, handled, cpu);
    if (!s.ok()) {
      Say(absl::StrCat("could not start ", t.name(), ": ", s.message()));
      failed = t.name();
      stop(SIGTERM, "a task could not start");
      break;
    }
  }

  while (true) {
    bool running = false, open = false;
    std::vector<pollfd> fds = {{sig_fd, POLLIN, 0}};
    for (Task& t : tasks) {
      running = running || (t.pid > 0 && !t.status);
      if (t.out >= 0) {
        open = true;
        fds.push_back({t.out, POLLIN, 0});
      }
    }
    if (!running && !open) break;
    int timeout_ms = -1;
    if (kill_at) {
      timeout_ms = static_cast<int>(std::max<int64_t>(
          0,
          std::chrono::duration_cast<std::chrono::milliseconds>(*kill_at - Clock::now()).count()));
    }
    if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) break;
    if (kill_at && Clock::now() >= *kill_at && running) {
      Say("grace period over: SIGKILL to the tasks still running");
      SignalAll(tasks, SIGKILL);
      kill_at = Clock::now() + std::chrono::hours(24);
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      for (Task& t : tasks) {
        if (t.out == fds[i].fd) Drain(t);
      }
    }
    if (fds[0].revents != 0) {
      signalfd_siginfo info;
      while (read(sig_fd, &info, sizeof(info)) == sizeof(info)) {
        if (info.ssi_signo != SIGCHLD) {
          stop(static_cast<int>(info.ssi_signo),
               absl::StrCat("got signal ", info.ssi_signo, " (", strsignal(info.ssi_signo), ")"));
        }
      }
      for (Task& t : tasks) {
        int status = 0;
        if (t.pid <= 0 || t.status || waitpid(t.pid, &status, WNOHANG) != t.pid) continue;
        t.status = status;
        Say(absl::StrCat(t.name(), " (pid ", t.pid, ") ended: ", DescribeStatus(status)));
        if (!Succeeded(status) && !kill_at) {
          failed = t.name();
          stop(SIGTERM, absl::StrCat("task ", t.name(), " failed"));
        }
      }
    }
  }
  close(sig_fd);
  const std::string chief_job = flags.no_chief ? "worker" : "chief";
  const Task& chief = *std::find_if(tasks.begin(), tasks.end(), [&](const Task& t) {
    return t.job == chief_job && t.index == 0;
  });
  if (!failed.empty()) {
    Say(absl::StrCat("failed: task ", failed, " did not succeed"));
    return kRuntimeError;
  }
  if (!chief.status || !Succeeded(*chief.status)) {
    Say("stopped before the chief finished");
    return kRuntimeError;
  }
  Say("every task ended successfully");
  return 0;
}

}  // namespace tandem

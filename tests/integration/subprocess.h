// tests/integration/subprocess.h
//
// Child processes for integration tests: start a binary with arguments and extra
// environment, its stdout and stderr captured to files; wait with a deadline; kill by
// PID. The destructor SIGKILLs a child that is still running, so a failing test never
// leaves processes behind.
//
// Thread safety: one thread per Subprocess.
#ifndef TANDEM_TESTS_INTEGRATION_SUBPROCESS_H_
#define TANDEM_TESTS_INTEGRATION_SUBPROCESS_H_

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace tandem::testing {

class Subprocess {
 public:
  // Starts `argv[0]` with `argv`; `env` entries ("KEY=value") are added to (or replace
  // in) the current environment. Output goes to `<log_prefix>.out` / `.err`.
  Subprocess(const std::vector<std::string>& argv, const std::string& log_prefix,
             const std::vector<std::string>& env = {})
      : out_path_(log_prefix + ".out"), err_path_(log_prefix + ".err") {
    std::fflush(nullptr);  // Else the child's freopen would flush our buffered output too.
    pid_ = fork();
    if (pid_ == 0) {
      if (!freopen(out_path_.c_str(), "w", stdout) || !freopen(err_path_.c_str(), "w", stderr)) {
        _exit(126);
      }
      for (const std::string& kv : env) putenv(const_cast<char*>(kv.c_str()));
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~Subprocess() {
    if (running()) Kill(SIGKILL);
  }
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !exited_; }

  // Waits up to `timeout`; returns the exit code, 128 + signal when killed by one, or
  // -1 on timeout (the child keeps running).
  int Wait(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!exited_) {
      int status = 0;
      pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        exited_ = true;
        code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return code_;
  }
  // Sends `sig`; a signal that may end the child (not SIGSTOP or SIGCONT) then reaps
  // it, waiting up to 30 s.
  void Kill(int sig) {
    if (!running()) return;
    kill(pid_, sig);
    if (sig != SIGSTOP && sig != SIGCONT) Wait(std::chrono::seconds(30));
  }

  std::string Stdout() const { return Slurp(out_path_); }
  std::string Stderr() const { return Slurp(err_path_); }

 private:
  static std::string Slurp(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

  std::string out_path_, err_path_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int code_ = -1;
};

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_INTEGRATION_SUBPROCESS_H_

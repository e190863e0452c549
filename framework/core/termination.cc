// framework/core/termination.cc
#include "framework/core/termination.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>  // std::call_once
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"

namespace tandem::termination {
namespace {

std::atomic<int> g_signal{0};

struct Callbacks {
  absl::Mutex mu;
  std::map<int, std::function<void()>> fns ABSL_GUARDED_BY(mu);
  int next_id ABSL_GUARDED_BY(mu) = 0;
};

Callbacks& GetCallbacks() {
  static auto* callbacks = new Callbacks;
  return *callbacks;
}

// Sets the request (first signal only) and runs the callbacks; true if this call set it.
bool Request(int sig) {
  int expected = 0;
  if (!g_signal.compare_exchange_strong(expected, sig)) return false;
  std::vector<std::function<void()>> fns;
  {
    Callbacks& c = GetCallbacks();
    absl::MutexLock lock(&c.mu);
    for (auto& [id, fn] : c.fns) fns.push_back(fn);
  }
  for (auto& fn : fns) fn();
  return true;
}

void Watch(sigset_t set, double grace_secs) {
  int sig = 0;
  if (sigwait(&set, &sig) != 0) return;
  LOG(WARNING) << "Received " << strsignal(sig) << ": stopping; the process ends in at most "
               << grace_secs << " secs";
  // The grace timer runs beside the callbacks, which may block.
  std::thread([set]() mutable {
    int again = 0;
    if (sigwait(&set, &again) == 0) {
      LOG(WARNING) << "Received " << strsignal(again) << " again: exiting now";
      _exit(128 + g_signal.load());
    }
  }).detach();
  std::thread([grace_secs] {
    std::this_thread::sleep_for(std::chrono::duration<double>(grace_secs));
    LOG(WARNING) << "Still running " << grace_secs << " secs after the stop request: exiting";
    _exit(128 + g_signal.load());
  }).detach();
  Request(sig);
}

}  // namespace

void InstallHandler(double grace_secs) {
  static std::once_flag once;
  std::call_once(once, [grace_secs] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::thread(Watch, set, grace_secs).detach();
  });
}

bool Requested() { return g_signal.load() != 0; }
int Signal() { return g_signal.load(); }
int ExitCode() { return 128 + g_signal.load(); }

int OnRequest(std::function<void()> fn) {
  Callbacks& c = GetCallbacks();
  int id;
  bool run_now;
  {
    // Request() sets the signal before it copies the callbacks under this lock, so
    // `fn` runs exactly once: here or there.
    absl::MutexLock lock(&c.mu);
    id = c.next_id++;
    run_now = Requested();
    if (!run_now) c.fns.emplace(id, fn);
  }
  if (run_now) fn();
  return id;
}

void Unregister(int id) {
  Callbacks& c = GetCallbacks();
  absl::MutexLock lock(&c.mu);
  c.fns.erase(id);
}

void RequestForTesting(int sig) { Request(sig); }
void ResetForTesting() { g_signal.store(0); }

}  // namespace tandem::termination

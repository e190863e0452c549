// framework/core/termination.h
//
// A process's graceful stop on SIGTERM or SIGINT (what Kubernetes, Slurm and a
// terminal send before they kill): long loops poll Requested() and wind down, and
// callbacks registered with OnRequest() wake what blocks (a server's Join).
//
//   termination::InstallHandler(25.0);   // In main, before any other thread starts.
//   while (!termination::Requested()) { ...one step... }
//   return termination::ExitCode();      // 128 + the signal: 143 for SIGTERM.
//
// InstallHandler blocks SIGTERM and SIGINT in the calling thread (threads started
// later inherit the mask) and starts a watcher thread that takes them with sigwait.
// The first signal sets Requested(), logs it and runs the callbacks; if the process
// is still alive `grace_secs` later, the watcher ends it with _exit(ExitCode()). A
// second signal ends it at once. Without InstallHandler nothing is intercepted, and
// Requested() is false unless RequestForTesting was called.
//
// Thread safety: every function may be called from any thread.
#ifndef TANDEM_FRAMEWORK_CORE_TERMINATION_H_
#define TANDEM_FRAMEWORK_CORE_TERMINATION_H_

#include <functional>

namespace tandem::termination {

// Installs the watcher once per process (later calls do nothing). grace_secs > 0.
void InstallHandler(double grace_secs);

// True once a stop was requested.
bool Requested();
// The signal that requested the stop (SIGTERM, SIGINT), or 0.
int Signal();
// 128 + Signal(): the shell's code for a process ended by that signal.
int ExitCode();

// Runs `fn` on the watcher thread when a stop is requested (at once, on the calling
// thread, if one already was). Returns an id for Unregister.
int OnRequest(std::function<void()> fn);
void Unregister(int id);

// Behaves as if `sig` had arrived (without the grace timer): for tests.
void RequestForTesting(int sig);
// Clears a request made by RequestForTesting.
void ResetForTesting();

}  // namespace tandem::termination

#endif  // TANDEM_FRAMEWORK_CORE_TERMINATION_H_

// apps/trainer/launch.h
//
// `trainer launch`: a whole cluster on this machine in one command, the way a
// scheduler (UAI Train, Kubeflow) runs one: it picks free ports on 127.0.0.1, and
// starts one process per task (the chief, --workers workers, --ps parameter servers,
// and with --evaluator an evaluator outside the cluster), each running this same
// binary as `trainer <--command> --config FILE [--set ...]` with its own TF_CONFIG
// (TensorFlow's format, "environment": "cloud"). Every line a task prints comes out
// prefixed with the task ("[worker:1] ..."); the launcher's own lines start with
// "[launch]" and name each task's pid as it starts and its status as it ends.
//
// Ending: the launcher returns once every task has exited: the chief's exit code when
// every task succeeded, else 1 after naming the task that failed. A task that fails
// (a non-zero exit or a signal) makes the launcher stop the others: SIGTERM, then
// SIGKILL after --grace_secs. SIGINT and SIGTERM to the launcher are forwarded to
// every task the same way. Tasks run in a process group of their own (a terminal's
// Ctrl-C reaches only the launcher, which forwards it) and get SIGKILL should the
// launcher itself die.
//
// --ps 0 runs a cluster without parameter servers, which trains with collective
// all-reduce ([distribute] strategy "auto" or "collective"); with ps tasks the job's
// strategy is "parameter_server" unless it names "hybrid"; --no_chief leaves the chief
// out (worker 0 then acts as the chief, as in Kubeflow's default TFJob) and needs
// --workers >= 1.
//
// --tls makes every task speak mutual TLS: the launcher makes a throwaway CA and one
// certificate for 127.0.0.1 (both TLS usages) with the openssl command, in a private
// temporary directory removed at the end, and passes them to every task as
// [security] tls_cert, tls_key and tls_ca.
//
// --print_tf_config prints "<task> <TF_CONFIG JSON>" per task instead of running, for
// use with another scheduler (it still picks the ports on this machine).
#ifndef TANDEM_APPS_TRAINER_LAUNCH_H_
#define TANDEM_APPS_TRAINER_LAUNCH_H_

#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace tandem {

struct LaunchFlags {
  int ps = 1;       // 0..64
  int workers = 1;  // 0..256, besides the chief.
  bool no_chief = false;
  bool evaluator = false;
  std::string command = "train_and_evaluate";  // Or "train".
  std::string config;
  std::vector<std::string> sets;
  bool print_tf_config = false;
  bool tls = false;
  int grace_secs = 10;  // SIGTERM to SIGKILL when stopping tasks.
  // Each task's threads on one CPU of the launcher's: the i-th task started on the
  // (i mod n)-th of the n CPUs it may use. A thread woken on its own CPU needs no
  // inter-processor interrupt: a 4-task embedding cluster on a 2-vCPU VM ran 1.38x
  // as fast pinned, with a third of the context switches.
  bool pin_cpus = false;
};

// Adds the `launch` subcommand bound to `flags`; returns it.
CLI::App* AddLaunchCommand(CLI::App& app, LaunchFlags& flags);

// Runs the cluster (or prints its TF_CONFIGs); returns the exit code.
int Launch(const LaunchFlags& flags);

}  // namespace tandem

#endif  // TANDEM_APPS_TRAINER_LAUNCH_H_

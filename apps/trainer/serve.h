// apps/trainer/serve.h
//
// `trainer serve`: runs one task of a cluster as a server process (tf.train.Server
// followed by join()), typically a parameter server. The cluster and the task come
// from, in order of precedence: --cluster / --job / --task; the job config's
// [cluster] and [task] (with TF_CONFIG applied, as for training). The cluster token
// comes from --token or TANDEM_CLUSTER_TOKEN. The process prints
// "serving <task> on <host:port>" once it listens, and exits 0 when a client sends
// the Shutdown RPC (the chief, once training is over) or on SIGTERM/SIGINT.
#ifndef TANDEM_APPS_TRAINER_SERVE_H_
#define TANDEM_APPS_TRAINER_SERVE_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "apps/trainer/exit_codes.h"
#include "framework/distributed/transport_security.h"

namespace tandem {

struct ServeFlags {
  std::string config;   // Job config (optional).
  std::string cluster;  // TF_CONFIG JSON text, or a file: .json (TF_CONFIG) or TOML.
  std::string job;
  std::optional<int> task;
  std::string token;
  std::string tls_cert, tls_key, tls_ca;
  int inter_op_threads = 0;
  int intra_op_threads = 0;
  int channels_per_task = kDefaultChannelsPerTask;  // >= 1
};

// Returns the process exit code (0 after a clean shutdown, 2 for a usage error, 1 for
// a runtime error), printing errors to stderr.
int Serve(const ServeFlags& flags);

}  // namespace tandem

#endif  // TANDEM_APPS_TRAINER_SERVE_H_

#include "apps/trainer/serve_model.h"

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "apps/trainer/exit_codes.h"
#include "framework/core/env.h"
#include "framework/core/termination.h"
#include "framework/distributed/transport_security.h"
#include "glog/logging.h"
#include "serving/rest_model_manager.h"
#include "serving/rest_server.h"

namespace tandem {

CLI::App* AddServeModelCommand(CLI::App& app, ServeModelFlags& flags) {
  CLI::App* cmd = app.add_subcommand(
      "serve_model",
      "serve an exported model over TensorFlow Serving's REST API (/v1/models/<name>, "
      "/metadata, :predict), polling --export_dir for new versions");
  cmd->add_option("--export_dir", flags.export_dir,
                  "export base directory holding numbered version directories")
      ->required();
  cmd->add_option("--port", flags.port, "port to listen on (0: an ephemeral port)")
      ->required()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--host", flags.host, "address to bind")->capture_default_str();
  cmd->add_option("--model_name", flags.model_name,
                  "name in the URLs (default: the signature's model_name)");
  cmd->add_option("--enable_batching", flags.enable_batching,
                  "merge concurrent requests into batches (true/false)")
      ->capture_default_str();
  cmd->add_option("--max_batch_size", flags.max_batch_size, "most examples in one batch")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--batch_timeout_micros", flags.batch_timeout_micros,
                  "how long a request waits for others to fill its batch")
      ->check(CLI::Range(int64_t{0}, int64_t{60000000}))
      ->capture_default_str();
  cmd->add_option("--num_batch_threads", flags.num_batch_threads, "threads running batches")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("--file_system_poll_wait_seconds", flags.file_system_poll_wait_seconds,
                  "seconds between polls of --export_dir for a new version (0: never)")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  cmd->add_option("--max_body_bytes", flags.max_body_bytes,
                  "largest request body; larger ones are answered 413")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32))
      ->capture_default_str();
  cmd->add_option("--max_instances", flags.max_instances, "most examples in one request")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24))
      ->capture_default_str();
  cmd->add_option("--max_connections", flags.max_connections, "open connections at most")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--connection_timeout_secs", flags.connection_timeout_secs,
                  "idle connections are closed after this long")
      ->check(CLI::Range(0, 86400))
      ->capture_default_str();
  cmd->add_option("--num_http_threads", flags.num_http_threads,
                  "HTTP worker threads (0: one per connection)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  cmd->add_option("--intra_op_threads", flags.intra_op_threads, "0: one per core")
      ->check(CLI::Range(0, 256));
  cmd->add_option("--inter_op_threads", flags.inter_op_threads,
                  "0: one (each request's ops run one at a time on its thread)")
      ->check(CLI::Range(0, 256));
  cmd->add_option("--token", flags.token,
                  "bearer token every request must carry (default: $TANDEM_CLUSTER_TOKEN; "
                  "none: no authentication)");
  cmd->add_option("--port_file", flags.port_file, "write the bound port to this file");
  return cmd;
}

int ServeModel(const ServeModelFlags& flags) {
  // Before any thread starts (termination.h).
  termination::InstallHandler(kTerminationGraceSecs);
  serving::UseServingMallocSettings();  // Not InitProcess's training settings.
  serving::ModelManagerOptions mo;
  mo.export_base = flags.export_dir;
  mo.model_name = flags.model_name;
  mo.file_system_poll_wait_seconds = flags.file_system_poll_wait_seconds;
  mo.session.intra_op_threads = flags.intra_op_threads;
  mo.session.inter_op_threads = flags.inter_op_threads;
  absl::StatusOr<std::unique_ptr<serving::ModelManager>> models = serving::ModelManager::Create(mo);
  if (!models.ok()) return Fail(kRuntimeError, models.status());

  serving::RestServerOptions so;
  so.host = flags.host;
  so.port = flags.port;
  so.token = flags.token.empty() ? SecurityFromEnvironment().token : flags.token;
  so.limits.max_body_bytes = flags.max_body_bytes;
  so.limits.max_instances = flags.max_instances;
  so.batching.enabled = flags.enable_batching;
  so.batching.max_batch_size = flags.max_batch_size;
  so.batching.batch_timeout_micros = flags.batch_timeout_micros;
  so.batching.num_batch_threads = flags.num_batch_threads;
  so.max_connections = flags.max_connections;
  so.connection_timeout_secs = flags.connection_timeout_secs;
  so.num_http_threads = flags.num_http_threads;
  absl::StatusOr<std::unique_ptr<serving::RestServer>> server =
      serving::RestServer::Start(so, models->get());
  if (!server.ok()) return Fail(kRuntimeError, server.status());

  {  // Not held past the log: a swapped-out version is freed when its requests end.
    const auto model = (*models)->Current();
    LOG(INFO) << "serving model " << (*models)->name() << " version " << model->version()
              << " from " << model->path() << " on http://" << (*server)->address()
              << (so.token.empty() ? "" : " (bearer token required)")
              << (so.batching.enabled
                      ? absl::StrCat(", batches of up to ", so.batching.max_batch_size)
                      : ", batching off");
    std::printf("serving model %s version %lld on http://%s\n", (*models)->name().c_str(),
                static_cast<long long>(model->version()), (*server)->address().c_str());
    std::fflush(stdout);
  }
  if (!flags.port_file.empty()) {
    absl::Status s = env::WriteFileAtomic(flags.port_file, absl::StrCat((*server)->port(), "\n"));
    if (!s.ok()) return Fail(kRuntimeError, s);
  }

  absl::Notification stop;
  const int id = termination::OnRequest([&stop] { stop.Notify(); });
  stop.WaitForNotification();
  termination::Unregister(id);
  (*server)->Stop();
  const serving::BatcherStats stats = (*server)->batcher_stats();
  LOG(INFO) << "stopped after " << (*server)->handler().requests() << " requests ("
            << (*server)->handler().errors() << " errors, " << stats.batches << " batches, "
            << stats.merged_batches << " merged)";
  std::printf("stopped\n");
  std::fflush(stdout);
  return 0;
}

}  // namespace tandem

// apps/trainer/serve_model.h
//
// `trainer serve_model`: serves an exported model (serving/signature.h's directory
// layout, as `trainer export` and the exporters write it) over TensorFlow Serving's
// REST API (serving/rest_handler.h), so TensorFlow Serving clients work unchanged:
//
//   trainer serve_model --export_dir /models/fashion --port 8501
//   curl -d '{"instances": [...]}' http://127.0.0.1:8501/v1/models/fashion_cnn:predict
//
// It serves the newest version under --export_dir and polls the directory every
// --file_system_poll_wait_seconds for a newer one, swapped in without a restart.
// Batching takes TensorFlow Serving's flag names (--enable_batching, --max_batch_size,
// --batch_timeout_micros, --num_batch_threads). With --token (or
// $TANDEM_CLUSTER_TOKEN) every request must carry "Authorization: Bearer <token>".
//
// It prints "serving model <name> version <v> on http://<host>:<port>" once it
// listens (and writes the port to --port_file, for --port 0), logs every version
// swap, and exits 0 on SIGTERM or SIGINT after the requests in progress end.
#ifndef TANDEM_APPS_TRAINER_SERVE_MODEL_H_
#define TANDEM_APPS_TRAINER_SERVE_MODEL_H_

#include <cstdint>
#include <string>

#include "CLI/CLI.hpp"

namespace tandem {

struct ServeModelFlags {
  std::string export_dir;
  int port = -1;  // Required; 0: an ephemeral port.
  std::string host = "127.0.0.1";
  std::string model_name;  // Default: the signature's model_name.
  bool enable_batching = true;
  int max_batch_size = 64;
  int64_t batch_timeout_micros = 1000;
  int num_batch_threads = 2;
  double file_system_poll_wait_seconds = 1;
  uint64_t max_body_bytes = uint64_t{8} << 20;
  int64_t max_instances = 1024;
  int max_connections = 64;
  int connection_timeout_secs = 30;
  int num_http_threads = 0;  // 0: a thread per connection.
  int intra_op_threads = 0;  // 0: one per core.
  int inter_op_threads = 0;
  std::string token;
  std::string port_file;
};

// Adds the `serve_model` subcommand bound to `flags`; returns it.
CLI::App* AddServeModelCommand(CLI::App& app, ServeModelFlags& flags);

// Serves until SIGTERM/SIGINT; returns the exit code (0 after a clean stop, 1 when the
// model cannot be loaded or the port bound, 2 for a bad flag).
int ServeModel(const ServeModelFlags& flags);

}  // namespace tandem

#endif  // TANDEM_APPS_TRAINER_SERVE_MODEL_H_

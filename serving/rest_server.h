// serving/rest_server.h
//
// RestServer: a TensorFlow-Serving-compatible REST predict server (rest_handler.h's
// API) on GNU libmicrohttpd, in this process:
//
//   TANDEM_ASSIGN_OR_RETURN(auto models, ModelManager::Create({.export_base = dir}));
//   RestServerOptions options;  // 127.0.0.1, an ephemeral port, batching on
//   TANDEM_ASSIGN_OR_RETURN(auto server, RestServer::Start(options, models.get()));
//   LOG(INFO) << "listening on " << server->address();
//
// libmicrohttpd's own threads serve the connections: one thread per connection by
// default (a predict request blocks its thread while it waits for its batch), or a
// fixed pool of num_http_threads. At most max_connections are open at once; a
// connection idle for connection_timeout_secs is closed. A body longer than
// limits.max_body_bytes is answered 413 without being kept: when its length is
// declared, before it is read; otherwise the rest is read and dropped (a body that
// goes on past 4 x the limit closes the connection). Nothing a client sends ends the
// server: handler exceptions (std::bad_alloc included) become a 500/503 answer. What
// requests freed goes back to the system within a second of them (MemoryReleaser).
//
// Thread safety: the accessors may be called from any thread. Stop (also run by the
// destructor) waits for the requests in progress to finish.
#ifndef TANDEM_SERVING_REST_SERVER_H_
#define TANDEM_SERVING_REST_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "serving/rest_batcher.h"
#include "serving/rest_handler.h"
#include "serving/rest_json.h"
#include "serving/rest_memory.h"
#include "serving/rest_model_manager.h"

struct MHD_Daemon;

namespace tandem::serving {

struct RestServerOptions {
  std::string host = "127.0.0.1";  // A numeric address or a name getaddrinfo resolves.
  int port = 0;                    // 0: an ephemeral port (see port()).
  std::string token;               // Non-empty: every request needs "Bearer <token>".
  RestLimits limits;
  BatchingOptions batching;
  int max_connections = 64;
  int connection_timeout_secs = 30;
  int num_http_threads = 0;  // 0: a thread per connection.
};

class RestServer {
 public:
  // Binds and starts serving. `models` is not owned and must outlive the server.
  static absl::StatusOr<std::unique_ptr<RestServer>> Start(const RestServerOptions& options,
                                                           ModelManager* models);
  ~RestServer();
  RestServer(const RestServer&) = delete;
  RestServer& operator=(const RestServer&) = delete;

  // Stops accepting, waits for the requests in progress. Idempotent.
  void Stop();

  int port() const { return port_; }
  // "host:port".
  std::string address() const;
  BatcherStats batcher_stats() const { return batcher_->stats(); }
  const RestHandler& handler() const { return *handler_; }

 private:
  RestServer(const RestServerOptions& options, std::unique_ptr<Batcher> batcher,
             std::unique_ptr<RestHandler> handler);

  const RestServerOptions options_;
  std::unique_ptr<Batcher> batcher_;
  std::unique_ptr<RestHandler> handler_;
  std::unique_ptr<MemoryReleaser> releaser_;  // Outlives daemon_.
  MHD_Daemon* daemon_ = nullptr;
  int port_ = 0;
};

}  // namespace tandem::serving

#endif  // TANDEM_SERVING_REST_SERVER_H_

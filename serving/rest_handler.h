// serving/rest_handler.h
//
// RestHandler: TensorFlow Serving's REST API over one served model, free of any HTTP
// library (rest_server.h is the libmicrohttpd glue around it). Routes:
//
//   GET  /v1/models/<name>[/versions/<v>]            model status
//   GET  /v1/models/<name>[/versions/<v>]/metadata   signature metadata
//   POST /v1/models/<name>[/versions/<v>]:predict    predict (rest_json.h's formats)
//
// Every answer is JSON; every error is {"error": "<message>"} with TensorFlow
// Serving's status codes: 400 a malformed request, 401 a missing or wrong bearer token
// (when a token is set; compared in constant time), 404 an unknown path, model name or
// version ("Servable not found for request: Specific(<name>, <v>)": only the served,
// newest, version exists), 405 a wrong method, 413 a body over max_body_bytes, 503 a
// full batching queue.
//
// A request is answered in two steps so that the server can refuse it before reading
// its body: Precheck (method, path, Authorization header, declared body length) and
// then Handle (the whole request, Precheck included).
//
// Thread safety: Precheck and Handle may be called from many threads at once.
#ifndef TANDEM_SERVING_REST_HANDLER_H_
#define TANDEM_SERVING_REST_HANDLER_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "serving/rest_batcher.h"
#include "serving/rest_json.h"
#include "serving/rest_model_manager.h"

namespace tandem::serving {

struct RestRequest {
  absl::string_view method;                // "GET", "POST", ...
  absl::string_view path;                  // Decoded, without the query string.
  absl::string_view authorization;         // The Authorization header; empty when absent.
  std::optional<uint64_t> content_length;  // As declared, when declared.
  absl::string_view body;
};

struct RestResponse {
  int status = 200;
  std::string body;                                          // JSON.
  std::vector<std::pair<std::string, std::string>> headers;  // Besides Content-Type.
};

class RestHandler {
 public:
  // `models` and `batcher` are not owned and must outlive the handler. `token` empty:
  // no authentication.
  RestHandler(ModelManager* models, Batcher* batcher, const RestLimits& limits, std::string token);

  // The answer to a request that can be given from its head alone (an error), or
  // nullopt when its body must be read. Ignores request.body.
  std::optional<RestResponse> Precheck(const RestRequest& request);
  RestResponse Handle(const RestRequest& request);

  // Requests handled, and those answered with a status >= 400.
  int64_t requests() const { return requests_.load(); }
  int64_t errors() const { return errors_.load(); }
  const RestLimits& limits() const { return limits_; }

 private:
  RestResponse Predict(std::shared_ptr<const ExportedModel> model, absl::string_view body);

  ModelManager* const models_;  // Not owned.
  Batcher* const batcher_;      // Not owned.
  const RestLimits limits_;
  const std::string token_;
  std::atomic<int64_t> requests_{0};
  std::atomic<int64_t> errors_{0};
};

// True when the two tokens are equal; the time taken depends on their lengths only.
bool TokensEqual(absl::string_view a, absl::string_view b);

}  // namespace tandem::serving

#endif  // TANDEM_SERVING_REST_HANDLER_H_

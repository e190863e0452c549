// serving/rest_server.cc
//
// libmicrohttpd glue: the access handler sees a request several times (its head,
// then each piece of its body, then its end); the state between those calls is a
// RequestState, freed by the completion callback.
#include "serving/rest_server.h"

#include <microhttpd.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <new>
#include <optional>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "glog/logging.h"
#include "serving/rest_response.h"

namespace tandem::serving {
namespace {

// A body that goes on this many times past the limit closes the connection.
constexpr uint64_t kDropFactor = 4;

struct RequestState {
  std::string body;
  bool too_large = false;
  uint64_t dropped = 0;  // Bytes read past the limit and not kept.
};

std::optional<uint64_t> ContentLength(MHD_Connection* connection) {
  const char* value =
      MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
  uint64_t n = 0;
  if (value == nullptr || !absl::SimpleAtoi(value, &n)) return std::nullopt;
  return n;
}

MHD_Result Send(MHD_Connection* connection, const RestResponse& r) {
  MHD_Response* response = MHD_create_response_from_buffer(
      r.body.size(), const_cast<char*>(r.body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
  for (const auto& [name, value] : r.headers) {
    MHD_add_response_header(response, name.c_str(), value.c_str());
  }
  const MHD_Result queued = MHD_queue_response(connection, r.status, response);
  MHD_destroy_response(response);
  return queued;
}

// Runs `fn` (which answers the request); an exception becomes a 500 or 503 answer.
template <typename Fn>
MHD_Result Guarded(MHD_Connection* connection, Fn fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    LOG(ERROR) << "out of memory answering a request";
    return Send(connection, {503, ErrorJson("the server is out of memory"), {}});
  } catch (const std::exception& e) {
    LOG(ERROR) << "error answering a request: " << e.what();
    return Send(connection, {500, ErrorJson(absl::StrCat("internal error: ", e.what())), {}});
  }
}

MHD_Result OnRequest(void* cls, MHD_Connection* connection, const char* url, const char* method,
                     const char* /*version*/, const char* upload_data, size_t* upload_data_size,
                     void** request_state) {
  RestHandler* handler = static_cast<RestHandler*>(cls);
  const size_t max_body_bytes = handler->limits().max_body_bytes;
  const char* authorization =
      MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  RestRequest request;
  request.method = method;
  request.path = url;
  request.authorization = authorization == nullptr ? "" : authorization;
  request.content_length = ContentLength(connection);
  auto* state = static_cast<RequestState*>(*request_state);
  if (state == nullptr) {  // The head: answer now if the body is not needed.
    return Guarded(connection, [&] {
      if (std::optional<RestResponse> early = handler->Precheck(request)) {
        return Send(connection, *early);
      }
      *request_state = new RequestState();
      return MHD_YES;
    });
  }
  if (*upload_data_size > 0) {  // A piece of the body.
    const absl::string_view piece(upload_data, *upload_data_size);
    *upload_data_size = 0;
    if (!state->too_large && !env::AppendBounded(&state->body, piece, max_body_bytes)) {
      state->too_large = true;
      state->dropped = state->body.size();
      std::string().swap(state->body);
    }
    if (state->too_large) {
      state->dropped += piece.size();
      if (state->dropped > kDropFactor * max_body_bytes) return MHD_NO;
    }
    return MHD_YES;
  }
  return Guarded(connection, [&] {
    if (state->too_large) {
      request.content_length = state->dropped;  // Over the limit: Handle answers 413.
    } else {
      request.body = state->body;
    }
    return Send(connection, handler->Handle(request));
  });
}

void OnCompleted(void* cls, MHD_Connection* /*connection*/, void** request_state,
                 MHD_RequestTerminationCode /*code*/) {
  delete static_cast<RequestState*>(*request_state);
  *request_state = nullptr;
  static_cast<MemoryReleaser*>(cls)->Note();
}

void OnMhdError(void* /*cls*/, const char* format, va_list args) {
  char buf[512];
  std::vsnprintf(buf, sizeof(buf), format, args);
  LOG(WARNING) << "libmicrohttpd: " << buf;
}

}  // namespace

RestServer::RestServer(const RestServerOptions& options, std::unique_ptr<Batcher> batcher,
                       std::unique_ptr<RestHandler> handler)
    : options_(options),
      batcher_(std::move(batcher)),
      handler_(std::move(handler)),
      releaser_(std::make_unique<MemoryReleaser>()) {}

absl::StatusOr<std::unique_ptr<RestServer>> RestServer::Start(const RestServerOptions& options,
                                                              ModelManager* models) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("port ", options.port, " is out of range"));
  }
  if (options.max_connections < 1 || options.connection_timeout_secs < 0 ||
      options.num_http_threads < 0 || options.limits.max_body_bytes < 1 ||
      options.limits.max_json_depth < 1 || options.limits.max_instances < 1) {
    return absl::InvalidArgumentError(
        "max_connections, max_body_bytes, max_json_depth and max_instances must be positive; "
        "connection_timeout_secs and num_http_threads must not be negative");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(options.port);
  if (int rc = getaddrinfo(options.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve host '", options.host, "': ", gai_strerror(rc)));
  }
  sockaddr_storage addr{};
  std::memcpy(&addr, found->ai_addr, found->ai_addrlen);
  const bool ipv6 = found->ai_family == AF_INET6;
  freeaddrinfo(found);

  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Batcher> batcher, Batcher::Create(options.batching));
  auto handler =
      std::make_unique<RestHandler>(models, batcher.get(), options.limits, options.token);
  std::unique_ptr<RestServer> server(
      new RestServer(options, std::move(batcher), std::move(handler)));

  unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG;
  if (ipv6) flags |= MHD_USE_IPv6;
  std::vector<MHD_OptionItem> items = {
      {MHD_OPTION_EXTERNAL_LOGGER, reinterpret_cast<intptr_t>(&OnMhdError), nullptr},
      {MHD_OPTION_SOCK_ADDR, 0, &addr},
      {MHD_OPTION_CONNECTION_LIMIT, options.max_connections, nullptr},
      {MHD_OPTION_CONNECTION_TIMEOUT, options.connection_timeout_secs, nullptr},
      {MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&OnCompleted),
       server->releaser_.get()},
  };
  if (options.num_http_threads > 0) {
    items.push_back({MHD_OPTION_THREAD_POOL_SIZE, options.num_http_threads, nullptr});
  } else {
    flags |= MHD_USE_THREAD_PER_CONNECTION;
  }
  items.push_back({MHD_OPTION_END, 0, nullptr});
  server->daemon_ =
      MHD_start_daemon(flags, static_cast<uint16_t>(options.port), nullptr, nullptr, &OnRequest,
                       server->handler_.get(), MHD_OPTION_ARRAY, items.data(), MHD_OPTION_END);
  if (server->daemon_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.host, ":", options.port,
                                               " (libmicrohttpd's log says why)"));
  }
  const MHD_DaemonInfo* info = MHD_get_daemon_info(server->daemon_, MHD_DAEMON_INFO_BIND_PORT);
  server->port_ = info == nullptr ? options.port : info->port;
  return server;
}

RestServer::~RestServer() { Stop(); }

void RestServer::Stop() {
  if (daemon_ == nullptr) return;
  MHD_stop_daemon(daemon_);
  daemon_ = nullptr;
}

std::string RestServer::address() const {
  const bool ipv6 = options_.host.find(':') != std::string::npos;
  return ipv6 ? absl::StrCat("[", options_.host, "]:", port_)
              : absl::StrCat(options_.host, ":", port_);
}

}  // namespace tandem::serving

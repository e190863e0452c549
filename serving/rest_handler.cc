#include "serving/rest_handler.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "serving/rest_response.h"

namespace tandem::serving {
namespace {

enum class Route { kStatus, kMetadata, kPredict };

struct Target {
  Route route = Route::kStatus;
  std::string name;
  std::optional<int64_t> version;
};

// /v1/models/<name>[/versions/<digits>]{"", "/metadata", ":predict"}.
std::optional<Target> ParsePath(absl::string_view path) {
  if (!absl::ConsumePrefix(&path, "/v1/models/")) return std::nullopt;
  Target target;
  const size_t name_end = std::min(path.find_first_of("/:"), path.size());
  target.name = std::string(path.substr(0, name_end));
  if (target.name.empty()) return std::nullopt;
  path.remove_prefix(name_end);
  if (absl::ConsumePrefix(&path, "/versions/")) {
    const size_t end = std::min(path.find_first_of("/:"), path.size());
    const absl::string_view digits = path.substr(0, end);
    int64_t version = 0;
    if (digits.empty() || digits.size() > 18 ||
        !std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) ||
        !absl::SimpleAtoi(digits, &version)) {
      return std::nullopt;
    }
    target.version = version;
    path.remove_prefix(end);
  }
  if (path.empty()) {
    target.route = Route::kStatus;
  } else if (path == "/metadata") {
    target.route = Route::kMetadata;
  } else if (path == ":predict") {
    target.route = Route::kPredict;
  } else {
    return std::nullopt;
  }
  return target;
}

RestResponse Error(int status, absl::string_view message) {
  return RestResponse{status, ErrorJson(message), {}};
}

RestResponse Error(const absl::Status& status) {
  return Error(HttpStatusFor(status.code()), status.message());
}

// At most `n` bytes of `s` for a message.
std::string Clip(absl::string_view s, size_t n = 200) {
  return s.size() <= n ? std::string(s) : absl::StrCat(s.substr(0, n), "...");
}

// The bearer token of an Authorization header ("Bearer <token>"), or empty.
absl::string_view BearerToken(absl::string_view header) {
  header = absl::StripAsciiWhitespace(header);
  if (header.size() < 7 || !absl::EqualsIgnoreCase(header.substr(0, 7), "bearer ")) return {};
  return absl::StripAsciiWhitespace(header.substr(7));
}

// The checks shared by Precheck and Handle: an error response, or the target and
// the model version that serves it.
std::optional<RestResponse> Resolve(const RestRequest& request, const ModelManager& models,
                                    const RestLimits& limits, absl::string_view token,
                                    Target* target, std::shared_ptr<const ExportedModel>* model) {
  if (!token.empty() && !TokensEqual(BearerToken(request.authorization), token)) {
    RestResponse r =
        Error(401, request.authorization.empty() ? "this server requires a token: send the header "
                                                   "'Authorization: Bearer <token>'"
                                                 : "wrong token in the Authorization header");
    r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"tandem\"");
    return r;
  }
  std::optional<Target> parsed = ParsePath(request.path);
  if (!parsed) {
    return Error(
        404, absl::StrCat("Malformed request: ", Clip(request.method), " ", Clip(request.path)));
  }
  *target = std::move(*parsed);
  const char* method = target->route == Route::kPredict ? "POST" : "GET";
  if (request.method != method) {
    RestResponse r =
        Error(405, absl::StrCat("Method ", Clip(request.method, 20), " is not allowed for ",
                                Clip(request.path), ": use ", method));
    r.headers.emplace_back("Allow", method);
    return r;
  }
  if (request.content_length && *request.content_length > limits.max_body_bytes) {
    return Error(
        413, absl::StrCat("the request body of ", *request.content_length,
                          " bytes is larger than the limit of ", limits.max_body_bytes, " bytes"));
  }
  *model = models.Current();
  const bool found = target->name == models.name() &&
                     (!target->version || *target->version == (*model)->version());
  if (!found) {
    const std::string spec =
        target->version ? absl::StrCat("Specific(", Clip(target->name), ", ", *target->version, ")")
                        : absl::StrCat("Latest(", Clip(target->name), ")");
    return Error(404, absl::StrCat("Servable not found for request: ", spec));
  }
  return std::nullopt;
}

}  // namespace

bool TokensEqual(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  // Every byte is compared, so the time taken does not reveal a matching prefix.
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

RestHandler::RestHandler(ModelManager* models, Batcher* batcher, const RestLimits& limits,
                         std::string token)
    : models_(models), batcher_(batcher), limits_(limits), token_(std::move(token)) {}

std::optional<RestResponse> RestHandler::Precheck(const RestRequest& request) {
  Target target;
  std::shared_ptr<const ExportedModel> model;
  std::optional<RestResponse> answer = Resolve(request, *models_, limits_, token_, &target, &model);
  if (answer) {
    ++requests_;
    ++errors_;
  }
  return answer;
}

RestResponse RestHandler::Handle(const RestRequest& request) {
  ++requests_;
  Target target;
  std::shared_ptr<const ExportedModel> model;
  RestResponse response;
  if (std::optional<RestResponse> error =
          Resolve(request, *models_, limits_, token_, &target, &model)) {
    response = std::move(*error);
  } else if (request.body.size() > limits_.max_body_bytes) {
    response = Error(413, absl::StrCat("the request body is larger than the limit of ",
                                       limits_.max_body_bytes, " bytes"));
  } else if (target.route == Route::kStatus) {
    response.body = ModelStatusJson(model->version());
  } else if (target.route == Route::kMetadata) {
    response.body = ModelMetadataJson(models_->name(), model->version(), model->signature());
  } else {
    response = Predict(std::move(model), request.body);
  }
  if (response.status >= 400) ++errors_;
  return response;
}

RestResponse RestHandler::Predict(std::shared_ptr<const ExportedModel> model,
                                  absl::string_view body) {
  absl::StatusOr<PredictRequest> request = ParsePredictRequest(body, model->signature(), limits_);
  if (!request.ok()) return Error(request.status());
  absl::StatusOr<NamedTensors> outputs =
      batcher_->Predict(std::move(model), std::move(request->inputs), request->batch_size);
  if (!outputs.ok()) return Error(outputs.status());
  absl::StatusOr<std::string> json = PredictResponseJson(*outputs, request->format);
  if (!json.ok()) return Error(json.status());
  return RestResponse{200, std::move(*json), {}};
}

}  // namespace tandem::serving

// serving/rest_response.h
//
// The response half of TensorFlow Serving's REST API, as JSON text in its exact shapes:
//
//   predict, row format:  {"predictions": [<p>, ...]}, one <p> per example: the value of
//                         the single output, or {"<output>": value, ...} for several.
//   predict, columnar:    {"outputs": <value>} for a single output, else
//                         {"outputs": {"<output>": <value>, ...}}; values keep the batch.
//   model status:         {"model_version_status": [{"version": "<v>", "state":
//                         "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]}
//   model metadata:       {"model_spec": {...}, "metadata": {"signature_def":
//                         {"signature_def": {"serving_default": {...}}}}}
//   errors:               {"error": "<message>"}
//
// Values are nested lists in the tensor's shape; float32 is printed in the shortest
// form that reads back as the same float (NaN and infinities as NaN, Infinity and
// -Infinity, as TensorFlow Serving writes them), integers as integers, bool as
// true/false. Text that is not valid UTF-8 (a client's key echoed in a message) is
// replaced, never a reason to fail.
//
// Thread safety: pure functions.
#ifndef TANDEM_SERVING_REST_RESPONSE_H_
#define TANDEM_SERVING_REST_RESPONSE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "serving/exported_model.h"
#include "serving/rest_json.h"
#include "serving/signature.h"

namespace tandem::serving {

// The predict response for `outputs` (each [batch, ...]). INTERNAL when the outputs
// disagree on the batch size (row format) or one has no batch dimension.
absl::StatusOr<std::string> PredictResponseJson(const NamedTensors& outputs, RequestFormat format);

std::string ModelStatusJson(int64_t version);
std::string ModelMetadataJson(const std::string& model_name, int64_t version,
                              const Signature& signature);
std::string ErrorJson(absl::string_view message);

// TensorFlow Serving's HTTP status for a canonical code (INVALID_ARGUMENT 400,
// UNAUTHENTICATED 401, NOT_FOUND 404, UNAVAILABLE 503, ...).
int HttpStatusFor(absl::StatusCode code);

// "DT_FLOAT", "DT_INT64", ...: TensorFlow's DataType names.
std::string TfDTypeName(DType dtype);

}  // namespace tandem::serving

#endif  // TANDEM_SERVING_REST_RESPONSE_H_

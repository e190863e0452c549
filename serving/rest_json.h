// serving/rest_json.h
//
// The request half of TensorFlow Serving's REST predict API: a request body (JSON)
// becomes the input tensors of a Signature. Both of TensorFlow Serving's formats:
//
//   row:      {"signature_name"?: "serving_default", "instances": [<instance>, ...]}
//             With one input an instance is that input's value for one example (or
//             {"<input>": value}); with several it is {"<input>": value, ...}.
//   columnar: {"signature_name"?: ..., "inputs": <value> | {"<input>": <value>, ...}}
//             Each value holds the whole batch (its first dimension is the batch).
//
// A value is a nested JSON list whose shape is exactly the input's shape (without the
// batch dimension for an instance): numbers for float32 (integers accepted), integers
// in range for int32, int64 and uint8, true/false for bool, strings for string (or
// {"b64": "<base64>"} for any bytes, as TensorFlow Serving). A variable-length list
// input ([batch, -1] of strings or int64: a feature column's list) takes lists of any
// length per example, padded with '' or -1 to the longest.
//
// The body is untrusted. Anything wrong is INVALID_ARGUMENT with a message naming the
// input, the instance and the position. Nesting deeper than RestLimits::max_json_depth
// is refused by a scan before the JSON parser (rest_json_reader.h) runs, more than
// max_instances examples before a tensor is allocated, and no tensor is allocated
// larger than the body could fill (a ragged body cannot make the parser reserve what
// its first instance implies).
//
// Thread safety: pure functions.
#ifndef TANDEM_SERVING_REST_JSON_H_
#define TANDEM_SERVING_REST_JSON_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "serving/exported_model.h"
#include "serving/signature.h"

namespace tandem::serving {

// The only signature an exported tandem model has, under TensorFlow's default name.
inline constexpr char kDefaultSignatureName[] = "serving_default";

// Bounds on what one request may ask of the server.
struct RestLimits {
  size_t max_body_bytes = size_t{8} << 20;  // Larger bodies: 413.
  int max_json_depth = 64;                  // Nested lists and objects.
  int64_t max_instances = 1024;             // Examples per request (either format).
};

enum class RequestFormat { kRow, kColumnar };

struct PredictRequest {
  RequestFormat format = RequestFormat::kRow;
  NamedTensors inputs;     // One per signature input, each [batch_size, ...].
  int64_t batch_size = 0;  // >= 1.
};

// INVALID_ARGUMENT when `json` nests lists and objects more than `max_depth` deep.
// Scans the bytes without parsing (strings and escapes are skipped). The parser
// bounds its own nesting too, but does not count empty lists and objects and does not
// say where; this scan counts every level and names the byte. It costs about 1 ms per
// MB of body (AMD EPYC), against about 2 ms per MB for the parse.
absl::Status CheckJsonDepth(absl::string_view json, int max_depth);

// Parses a :predict body against `signature`. Checks the depth first (see above);
// `limits.max_body_bytes` is the caller's concern.
absl::StatusOr<PredictRequest> ParsePredictRequest(absl::string_view body,
                                                   const Signature& signature,
                                                   const RestLimits& limits);

}  // namespace tandem::serving

#endif  // TANDEM_SERVING_REST_JSON_H_

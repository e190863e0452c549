// serving/signature.h
//
// The exported-model format: one version of a model, self-contained in a directory
// that needs neither the Model subclass, the TOML job nor the trainer to load:
//
//   <export_base>/<version>/graph.pb               the PREDICT graph (tandem GraphDef,
//                                                  binary proto) with restore ops
//   <export_base>/<version>/variables.safetensors  every variable's value, one file
//   <export_base>/<version>/signature.json         the Signature below, as JSON
//
// <version> is a decimal number (seconds since the epoch when exported, made unique),
// as TensorFlow's exporters and TensorFlow Serving lay versions out; the newest
// version is the highest number. A version directory appears atomically (written under
// a hidden temporary name, then renamed), so a reader never sees half of one.
//
// signature.json:
//   {"format": "tandem-export", "format_version": 1, "model_name": "fashion_cnn",
//    "global_step": 2000, "checkpoint": "<prefix it came from>",
//    "inputs":  {"image": {"tensor": "input/image:0", "dtype": "float32",
//                          "shape": [-1, 28, 28, 1]}},
//    "outputs": {"classes": {"tensor": "...", "dtype": "int64", "shape": [-1]}, ...},
//    "restore": {"op": "save/restore_all",
//                "feeds": {"<variable>": "<placeholder tensor>", ...}},
//    "metrics": {"accuracy": 0.91, ...}}          (optional: eval results at export)
// Every input and output has the batch as its first dimension (-1: any size). dtypes
// are DTypeName's names (framework/tensor/dtype.h).
//
// ParseSignatureJson treats the text as untrusted: wrong types, missing keys, unknown
// dtypes, bad shapes, an unsupported format version, more than kMaxSignatureEntries
// entries are INVALID_ARGUMENT naming the key; it never crashes.
//
// Thread safety: value types and pure functions.
#ifndef TANDEM_SERVING_SIGNATURE_H_
#define TANDEM_SERVING_SIGNATURE_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "framework/tensor/dtype.h"
#include "framework/tensor/tensor_shape.h"

namespace tandem::serving {

inline constexpr char kGraphFile[] = "graph.pb";
inline constexpr char kVariablesFile[] = "variables.safetensors";
inline constexpr char kSignatureFile[] = "signature.json";
inline constexpr char kExportFormat[] = "tandem-export";
inline constexpr int kExportFormatVersion = 1;
// Bounds on what a signature may list (inputs, outputs, restore feeds, metrics).
inline constexpr int kMaxSignatureEntries = 100000;

// One named input or output of the signature.
struct TensorInfo {
  std::string tensor;  // "node:index" in the graph.
  DType dtype = DType::kInvalid;
  PartialShape shape;  // Known rank; dim 0 is the batch (-1).
  bool operator==(const TensorInfo& o) const = default;
};

struct Signature {
  std::string model_name;
  int64_t global_step = 0;
  std::string checkpoint;
  std::map<std::string, TensorInfo> inputs;
  std::map<std::string, TensorInfo> outputs;
  std::string restore_op;
  std::map<std::string, std::string> restore_feeds;  // Variable -> placeholder tensor.
  std::map<std::string, double> metrics;
  bool operator==(const Signature& o) const = default;
};

std::string SignatureToJson(const Signature& signature);
// `source` names the file in messages.
absl::StatusOr<Signature> ParseSignatureJson(absl::string_view json, absl::string_view source);

}  // namespace tandem::serving

#endif  // TANDEM_SERVING_SIGNATURE_H_

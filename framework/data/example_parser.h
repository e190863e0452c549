// framework/data/example_parser.h
//
// tf.train.Example input, as tf.io.parse_example: records holding serialized Examples
// (framework/protos/example.proto, TensorFlow's wire format) become one column tensor
// per requested feature, with the examples along dimension 0:
//
//   fixed length (FixedLenFeature): [n] for shape {1}, else [n, ...shape]; a missing
//     feature takes default_value, and without one it is an error; a feature present
//     with another number of values or another type is an error (TensorFlow's rules).
//   variable length (VarLenFeature): [n, longest list], padded with '' (strings), -1
//     (integers) or 0 (floats), the missing-value marks of the feature columns; a
//     missing feature is an empty list.
//
// ReadExampleFiles reads TFRecord files of Examples whole (gzip: by the ".gz" suffix,
// or always or never by `compression`), as ReadCsv does; FromTensors serves the
// columns as rows (dataset.h).
//
// Errors name the file, the record and the feature: "train.tfrecord: record 17:
// feature 'age' (data type: float32) is required but could not be found". Records and
// files are untrusted; a file holds at most a quarter of this process's memory.
//
// Thread safety: pure functions.
#ifndef TANDEM_FRAMEWORK_DATA_EXAMPLE_PARSER_H_
#define TANDEM_FRAMEWORK_DATA_EXAMPLE_PARSER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/data/dataset.h"

namespace tandem::data {

struct ExampleFeature {
  std::string key;
  DType dtype = DType::kFloat;  // kFloat, kInt64 or kString.
  bool var_len = false;
  std::vector<int64_t> shape = {1};  // Fixed length: per example.
  std::vector<double> default_value;  // Fixed length, numeric: empty = required.
};

// Columns of the examples in `records` (`name` names them in errors).
absl::StatusOr<std::vector<Tensor>> ParseExamples(const std::vector<absl::string_view>& records,
                                                  const std::vector<ExampleFeature>& features,
                                                  const std::string& name);

enum class Compression { kAuto, kNone, kGzip };
absl::StatusOr<std::vector<Tensor>> ReadExampleFiles(const std::vector<std::string>& paths,
                                                     const std::vector<ExampleFeature>& features,
                                                     Compression compression = Compression::kAuto);

}  // namespace tandem::data

#endif  // TANDEM_FRAMEWORK_DATA_EXAMPLE_PARSER_H_

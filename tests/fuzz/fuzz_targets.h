// tests/fuzz/fuzz_targets.h
//
// Fuzz targets for parsers of untrusted bytes. Each takes arbitrary bytes and must
// return without crashing, hanging or leaking, whatever they hold:
//   FuzzGraphDef: bytes -> GraphDef -> Graph (op lookup, attr decoding, inference of
//     every node) -> DirectSession creation (placement, kernel construction).
//   FuzzTensorProto: bytes -> TensorProto -> Tensor.
//   FuzzRecordFile, FuzzCsv, FuzzExamples, FuzzJobConfig, FuzzTfConfig: the TFRecord,
//     CSV, tf.Example, TOML and TF_CONFIG parsers.
//   FuzzPredictRequest, FuzzPredictStrings: the REST server's JSON request decoder.
// fuzz_main.cc wraps them for libFuzzer; fuzz_replay_test.cc runs them on seeds,
// byte mutations and structured random graphs in the default test tier.
#ifndef TANDEM_TESTS_FUZZ_FUZZ_TARGETS_H_
#define TANDEM_TESTS_FUZZ_FUZZ_TARGETS_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace tandem::fuzz {

// Each returns how far the input got (0: not parsed, 1: parsed, 2: decoded / graph
// built, 3: session created), so the replay test can check it reaches deep code.
int FuzzGraphDef(const uint8_t* data, size_t size);
int FuzzTensorProto(const uint8_t* data, size_t size);
// TFRecord framing (bytes as a file) -> RecordReader until end or error.
int FuzzRecordFile(const uint8_t* data, size_t size);
// CSV text with a header (bytes as a file) -> ReadCsv of a float, an int64 list and a
// string column with defaults -> batches of its rows. 1: refused; 2: read.
int FuzzCsv(const uint8_t* data, size_t size);
// A TFRecord file of tf.Examples (bytes) -> ReadExampleFiles of a fixed-length float,
// a string list and an int64 list. 1: refused; 2: read.
int FuzzExamples(const uint8_t* data, size_t size);
// TOML job-config text -> JobConfig (-> ToToml -> JobConfig again).
int FuzzJobConfig(const uint8_t* data, size_t size);
// TF_CONFIG JSON -> TfConfig -> RunConfig.
int FuzzTfConfig(const uint8_t* data, size_t size);
// A checkpoint shard (safetensors bytes) -> every tensor read (CRC-checked).
int FuzzSafetensors(const uint8_t* data, size_t size);
// A checkpoint index (JSON) -> CheckpointIndex.
int FuzzCheckpointIndex(const uint8_t* data, size_t size);
// An exported model's signature.json -> Signature -> JSON -> Signature again (2 when
// the round trip gives an equal Signature).
int FuzzSignature(const uint8_t* data, size_t size);
// A worker RPC as it arrives off the wire: byte 0 picks the method (RegisterGraph,
// RunGraph, RecvTensor, CleanupGraph), the rest is the tensor_wire message, decoded
// and handed to an in-process Worker that holds one registered graph ("graph_1":
// _Arg float -> Square -> _Retval) in session "fuzz". 2: the call succeeded.
int FuzzWorkerRequest(const uint8_t* data, size_t size);
// The bytes FuzzWorkerRequest takes for a message (method selector + encoding).
std::string WorkerRequestSeed(int method, const std::string& wire);
// A REST :predict request body -> the tensors of a fixed signature (inputs "x" float32
// [-1, 3] and "n" int64 [-1]) -> the predict response encoding those tensors (row or
// columnar, as the request). 0: not JSON (or nested too deep); 1: JSON, refused by
// the decoder (shape, dtype, keys); 2: decoded and encoded; 3: a bug, which the replay
// test checks never happens: tandem's JSON reader (serving/rest_json_reader.h)
// disagreed with nlohmann::json on whether the bytes are JSON or on their value, or
// the response did not parse back.
int FuzzPredictRequest(const uint8_t* data, size_t size);
// FuzzPredictRequest for a signature of string inputs: "s" string [-1], and the lists
// "tags" string [-1, -1] and "ids" int64 [-1, -1] (ragged per instance, padded).
int FuzzPredictStrings(const uint8_t* data, size_t size);

}  // namespace tandem::fuzz

#endif  // TANDEM_TESTS_FUZZ_FUZZ_TARGETS_H_

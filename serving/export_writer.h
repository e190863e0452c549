// serving/export_writer.h
//
// Writes versions of an exported model (format: serving/signature.h).
//
//   ExportGraph: the whole export of a built PREDICT graph. It adds a Saver's restore
//     ops to `graph`, reads every global variable's value from `checkpoint_prefix`
//     (CRCs checked; a variable missing from the checkpoint is NOT_FOUND naming it),
//     fills the signature from the named inputs and outputs (their dtype and static
//     shape, which must have a known rank and the batch first) and writes a new version.
//   WriteExport: writes one version directory from its parts. The version is the
//     current time in seconds, or one more than the newest existing version if that is
//     not newer, so versions only grow. The files go to a hidden temporary directory
//     that is renamed into place, so readers (a serving process polling the base) never
//     see half a version.
//   GarbageCollectExports: deletes the oldest versions beyond `keep`.
//
// Thread safety: functions of their arguments. Two processes may export to one base at
// once (a chief and an evaluator both exporting the final model): each gets its own
// version, and garbage collection tolerates versions the other deleted.
#ifndef TANDEM_SERVING_EXPORT_WRITER_H_
#define TANDEM_SERVING_EXPORT_WRITER_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "checkpoint/safetensors.h"
#include "framework/graph/graph.h"
#include "framework/protos/graph.pb.h"
#include "serving/signature.h"

namespace tandem::serving {

// Returns the new version directory, "<export_base>/<version>".
absl::StatusOr<std::string> WriteExport(const std::string& export_base, const Signature& signature,
                                        const proto::GraphDef& graph,
                                        absl::Span<const checkpoint::NamedTensor> variables);

struct ExportGraphOptions {
  std::string model_name;
  std::map<std::string, Output> inputs;   // Serving input name -> placeholder.
  std::map<std::string, Output> outputs;  // Prediction key -> tensor.
  std::string checkpoint_prefix;          // The weights.
  std::map<std::string, double> metrics;  // Recorded in the signature (may be empty).
};

// Returns the new version directory. `graph` gains the restore ops.
absl::StatusOr<std::string> ExportGraph(Graph* graph, const ExportGraphOptions& options,
                                        const std::string& export_base);

// Keeps the newest `keep` (>= 1) versions under `export_base`; returns those deleted.
absl::StatusOr<std::vector<int64_t>> GarbageCollectExports(const std::string& export_base,
                                                           int keep);

}  // namespace tandem::serving

#endif  // TANDEM_SERVING_EXPORT_WRITER_H_

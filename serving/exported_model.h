// serving/exported_model.h
//
// ExportedModel: one loaded version of an exported model (serving/signature.h), ready
// to predict. It links only the runtime layers (graph, kernels, DirectSession) and the
// safetensors reader, so a C++ service can embed a model without the estimator:
//
//   TANDEM_ASSIGN_OR_RETURN(auto model, serving::LoadExportedModel("/models/fashion"));
//   TANDEM_ASSIGN_OR_RETURN(auto out, model->Predict({{"image", batch}}));
//   const Tensor& probabilities = out.at("probabilities");
//
// Load reads signature.json, graph.pb and variables.safetensors (all untrusted: a
// malformed file is DATA_LOSS or INVALID_ARGUMENT naming it, never a crash), creates a
// DirectSession on the graph and assigns every variable from the safetensors file in
// one step (each value's dtype and shape checked against its placeholder first).
//
// Predict checks the inputs against the signature (every input present, no unknown
// name, dtype equal, shape compatible, one batch size shared by all) and returns
// INVALID_ARGUMENT naming the input otherwise; then it runs one step fetching the
// requested outputs (default: all).
//
// Thread safety: Predict may be called from many threads at once.
#ifndef TANDEM_SERVING_EXPORTED_MODEL_H_
#define TANDEM_SERVING_EXPORTED_MODEL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "framework/runtime/session.h"
#include "framework/tensor/tensor.h"
#include "serving/signature.h"

namespace tandem::serving {

// Largest graph.pb or signature.json Load reads.
inline constexpr uint64_t kMaxGraphFileBytes = 1ull << 30;
inline constexpr uint64_t kMaxSignatureFileBytes = 64ull << 20;

// The numeric version directories under `export_base`, ascending. Entries that are not
// decimal numbers (temporaries, other files) are skipped. NOT_FOUND when the directory
// is missing.
absl::StatusOr<std::vector<int64_t>> ListVersions(const std::string& export_base);

// The signature.json of one version directory, read (at most kMaxSignatureFileBytes)
// and validated; errors name the file.
absl::StatusOr<Signature> ReadSignature(const std::string& version_dir);

using NamedTensors = std::map<std::string, Tensor>;

class ExportedModel {
 public:
  // `dir` is one version directory (it holds signature.json) or an export base, whose
  // newest version is loaded. NOT_FOUND when there is no version.
  static absl::StatusOr<std::unique_ptr<ExportedModel>> Load(const std::string& dir,
                                                             const SessionOptions& options = {});
  ExportedModel(const ExportedModel&) = delete;
  ExportedModel& operator=(const ExportedModel&) = delete;
  ~ExportedModel();

  const Signature& signature() const { return signature_; }
  // The version directory's number; 0 when it is not a number.
  int64_t version() const { return version_; }
  const std::string& path() const { return path_; }

  // Runs the model on one batch. `output_keys` empty: every output.
  absl::StatusOr<NamedTensors> Predict(const NamedTensors& inputs,
                                       absl::Span<const std::string> output_keys = {}) const;

 private:
  ExportedModel(std::string path, int64_t version, Signature signature,
                std::unique_ptr<Session> session);

  const std::string path_;
  const int64_t version_;
  const Signature signature_;
  std::unique_ptr<Session> session_;
};

// ExportedModel::Load with default options.
absl::StatusOr<std::unique_ptr<ExportedModel>> LoadExportedModel(const std::string& dir);

}  // namespace tandem::serving

#endif  // TANDEM_SERVING_EXPORTED_MODEL_H_

// serving/export_writer.cc
//
// Export: restore ops + checkpoint values + signature -> a version directory, written
// under a temporary name and renamed into place.
#include "serving/export_writer.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/saver.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "glog/logging.h"
#include "serving/exported_model.h"

namespace tandem::serving {
namespace {

// Versions tried when other writers keep taking the next number.
constexpr int kMaxVersionAttempts = 16;

absl::StatusOr<TensorInfo> InfoOf(const std::string& key, const Output& out, bool input) {
  if (!out.valid()) {
    return absl::InvalidArgumentError(
        absl::StrCat("export: ", input ? "input" : "output", " '", key, "' is not a tensor"));
  }
  const PartialShape& shape = out.shape();
  if (!shape.known_rank() || shape.rank() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "export: ", input ? "input" : "output", " '", key, "' (", out.name(), ") has shape ",
        shape.DebugString(), "; serving needs a known rank with the batch as the first dimension"));
  }
  Dims dims = shape.dims();
  dims[0] = -1;
  return TensorInfo{out.name(), out.dtype(), PartialShape(absl::MakeConstSpan(dims))};
}

}  // namespace

absl::StatusOr<std::string> WriteExport(const std::string& export_base, const Signature& signature,
                                        const proto::GraphDef& graph,
                                        absl::Span<const checkpoint::NamedTensor> variables) {
  TANDEM_RETURN_IF_ERROR(env::MakeDirs(export_base));
  TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> versions, ListVersions(export_base));
  int64_t version = static_cast<int64_t>(std::time(nullptr));
  if (!versions.empty()) version = std::max(version, versions.back() + 1);
  static std::atomic<uint64_t> writes{0};  // Temporaries of one process never collide.
  const std::string temp_dir = env::JoinPath(
      export_base, absl::StrCat(".tmp-", version, "-", getpid(), "-", writes.fetch_add(1)));
  if (env::FileExists(temp_dir)) TANDEM_RETURN_IF_ERROR(env::DeleteRecursively(temp_dir));
  TANDEM_RETURN_IF_ERROR(env::MakeDirs(temp_dir));
  absl::StatusOr<std::string> final_dir = [&]() -> absl::StatusOr<std::string> {
    std::string graph_bytes;
    if (!graph.SerializeToString(&graph_bytes)) {
      return absl::InternalError("export: the graph could not be serialized");
    }
    TANDEM_RETURN_IF_ERROR(env::WriteFileAtomic(env::JoinPath(temp_dir, kGraphFile), graph_bytes));
    TANDEM_RETURN_IF_ERROR(checkpoint::WriteSafetensors(
        env::JoinPath(temp_dir, kVariablesFile), variables,
        {{"global_step", absl::StrCat(signature.global_step)}, {"format", kExportFormat}}));
    TANDEM_RETURN_IF_ERROR(
        env::WriteFileAtomic(env::JoinPath(temp_dir, kSignatureFile), SignatureToJson(signature)));
    // Another process exporting to this base may take the version first (rename
    // fails on a non-empty directory): the next free number is used then.
    for (int attempt = 0;; ++attempt) {
      const std::string dir = env::JoinPath(export_base, absl::StrCat(version));
      absl::Status renamed =
          env::FileExists(dir) ? absl::AlreadyExistsError(dir) : env::RenameFile(temp_dir, dir);
      if (renamed.ok()) return dir;
      if (!env::FileExists(dir) || attempt >= kMaxVersionAttempts) return renamed;
      TANDEM_ASSIGN_OR_RETURN(versions, ListVersions(export_base));
      version = std::max(version, versions.empty() ? version : versions.back()) + 1;
    }
  }();
  if (!final_dir.ok()) {
    env::DeleteRecursively(temp_dir).IgnoreError();
    return AnnotateStatus(final_dir.status(), "export to " + export_base);
  }
  return final_dir;
}

absl::StatusOr<std::string> ExportGraph(Graph* graph, const ExportGraphOptions& options,
                                        const std::string& export_base) {
  Signature sig;
  sig.model_name = options.model_name;
  sig.checkpoint = options.checkpoint_prefix;
  sig.metrics = options.metrics;
  if (options.inputs.empty() || options.outputs.empty()) {
    return absl::InvalidArgumentError("export: needs at least one input and one output");
  }
  for (const auto& [key, out] : options.inputs) {
    TANDEM_ASSIGN_OR_RETURN(sig.inputs[key], InfoOf(key, out, /*input=*/true));
  }
  for (const auto& [key, out] : options.outputs) {
    TANDEM_ASSIGN_OR_RETURN(sig.outputs[key], InfoOf(key, out, /*input=*/false));
  }
  TANDEM_ASSIGN_OR_RETURN(auto saver, checkpoint::Saver::Create(graph));
  sig.restore_op = saver->restore_op_name();
  sig.restore_feeds = saver->RestoreFeeds();
  TANDEM_ASSIGN_OR_RETURN(auto reader,
                          checkpoint::CheckpointReader::Open(options.checkpoint_prefix));
  sig.global_step = reader->index().global_step;
  std::vector<checkpoint::NamedTensor> values;
  for (const std::string& name : saver->VariableNames()) {
    absl::StatusOr<Tensor> value = reader->Read(name);
    if (!value.ok()) {
      return AnnotateStatus(value.status(),
                            absl::StrCat("export: variable '", name, "' of the PREDICT graph"));
    }
    values.emplace_back(name, *std::move(value));
  }
  proto::GraphDef def;
  graph->ToGraphDef(&def);
  TANDEM_ASSIGN_OR_RETURN(std::string dir, WriteExport(export_base, sig, def, values));
  LOG(INFO) << "Exported " << sig.model_name << " (global step " << sig.global_step << ", "
            << values.size() << " variables) to " << dir;
  return dir;
}

absl::StatusOr<std::vector<int64_t>> GarbageCollectExports(const std::string& export_base,
                                                           int keep) {
  if (keep < 1) return absl::InvalidArgumentError("export: keep must be >= 1");
  TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> versions, ListVersions(export_base));
  std::vector<int64_t> deleted;
  for (size_t i = 0; i + keep < versions.size(); ++i) {
    const std::string dir = env::JoinPath(export_base, absl::StrCat(versions[i]));
    absl::Status s = env::DeleteRecursively(dir);
    if (!s.ok() && env::FileExists(dir)) return s;  // Else another writer deleted it.
    deleted.push_back(versions[i]);
  }
  return deleted;
}

}  // namespace tandem::serving

// serving/exported_model.cc
//
// Load: signature.json + graph.pb (validated as a Graph) + variables.safetensors into a
// DirectSession. Predict: validate the batch against the signature, run one step.
#include "serving/exported_model.h"

#include <algorithm>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/shard_ops.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/graph/graph.h"

namespace tandem::serving {
namespace {

// The version number a directory name spells, or nullopt.
std::optional<int64_t> VersionOf(absl::string_view name) {
  if (name.empty() || name.size() > 18) return std::nullopt;
  if (!std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  int64_t v = 0;
  if (!absl::SimpleAtoi(name, &v)) return std::nullopt;
  return v;
}

std::string BaseName(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

// Checks that `tensor` names an output of `graph` of `dtype` (and, when `shape` is
// given, a shape compatible with it).
absl::Status CheckTensor(const Graph& graph, const std::string& what, const std::string& tensor,
                         DType dtype, const PartialShape* shape) {
  absl::StatusOr<Output> out = graph.FindOutput(tensor);
  if (!out.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " names tensor '", tensor, "', which the graph does not have"));
  }
  if (out->dtype() != dtype) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is ", DTypeName(dtype),
                                                   " but the graph's '", tensor, "' is ",
                                                   DTypeName(out->dtype())));
  }
  if (shape != nullptr && !out->shape().IsCompatibleWith(*shape)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has shape ", shape->DebugString(),
                                                   " but the graph's '", tensor, "' has ",
                                                   out->shape().DebugString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<FeedMap> LoadVariables(const std::string& dir, const Signature& sig,
                                      const Graph& graph) {
  const std::string path = env::JoinPath(dir, kVariablesFile);
  TANDEM_ASSIGN_OR_RETURN(checkpoint::SafetensorsFile file,
                          checkpoint::SafetensorsFile::Open(path));
  FeedMap feeds;
  for (const auto& [var, feed] : sig.restore_feeds) {
    TANDEM_ASSIGN_OR_RETURN(Tensor value, file.Read(var));
    const PartialShape shape(value.shape());
    TANDEM_RETURN_IF_ERROR(
        AnnotateStatus(CheckTensor(graph, absl::StrCat("variable '", var, "' in ", path), feed,
                                   value.dtype(), &shape),
                       dir));
    feeds.emplace_back(feed, std::move(value));
  }
  return feeds;
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> ListVersions(const std::string& export_base) {
  if (!env::IsDirectory(export_base)) {
    return absl::NotFoundError(absl::StrCat("export directory ", export_base, " does not exist"));
  }
  TANDEM_ASSIGN_OR_RETURN(std::vector<std::string> names, env::ListDir(export_base));
  std::vector<int64_t> versions;
  for (const std::string& name : names) {
    std::optional<int64_t> v = VersionOf(name);
    if (v && env::IsDirectory(env::JoinPath(export_base, name))) versions.push_back(*v);
  }
  std::sort(versions.begin(), versions.end());
  return versions;
}

absl::StatusOr<Signature> ReadSignature(const std::string& version_dir) {
  const std::string path = env::JoinPath(version_dir, kSignatureFile);
  TANDEM_ASSIGN_OR_RETURN(std::string text, env::ReadFile(path, kMaxSignatureFileBytes));
  return ParseSignatureJson(text, path);
}

ExportedModel::ExportedModel(std::string path, int64_t version, Signature signature,
                             std::unique_ptr<Session> session)
    : path_(std::move(path)),
      version_(version),
      signature_(std::move(signature)),
      session_(std::move(session)) {}

ExportedModel::~ExportedModel() {
  if (session_ != nullptr) session_->Close().IgnoreError();
}

absl::StatusOr<std::unique_ptr<ExportedModel>> ExportedModel::Load(const std::string& dir,
                                                                   const SessionOptions& options) {
  std::string version_dir = dir;
  if (!env::FileExists(env::JoinPath(dir, kSignatureFile))) {
    TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> versions, ListVersions(dir));
    if (versions.empty()) {
      return absl::NotFoundError(absl::StrCat(dir, " holds no exported model (neither ",
                                              kSignatureFile, " nor a version directory)"));
    }
    version_dir = env::JoinPath(dir, absl::StrCat(versions.back()));
  }
  const std::string sig_path = env::JoinPath(version_dir, kSignatureFile);
  TANDEM_ASSIGN_OR_RETURN(Signature sig, ReadSignature(version_dir));
  const std::string graph_path = env::JoinPath(version_dir, kGraphFile);
  TANDEM_ASSIGN_OR_RETURN(std::string graph_bytes, env::ReadFile(graph_path, kMaxGraphFileBytes));
  proto::GraphDef def;
  if (!def.ParseFromString(graph_bytes)) {
    return absl::DataLossError(absl::StrCat(graph_path, ": not a GraphDef"));
  }
  // A process that only serves has built no graph yet; the graph holds the ops of the
  // exporting Saver (SaveShard, RestoreShard) beside the standard ones.
  checkpoint::EnsureCheckpointOps();
  absl::StatusOr<std::unique_ptr<Graph>> graph = Graph::FromGraphDef(def, OpRegistry::Global());
  if (!graph.ok()) return AnnotateStatus(graph.status(), graph_path);
  for (const auto* infos : {&sig.inputs, &sig.outputs}) {
    const bool input = infos == &sig.inputs;
    for (const auto& [name, info] : *infos) {
      TANDEM_RETURN_IF_ERROR(AnnotateStatus(
          CheckTensor(**graph, absl::StrCat(input ? "input '" : "output '", name, "'"), info.tensor,
                      info.dtype, input ? &info.shape : nullptr),
          sig_path));
    }
  }
  if ((*graph)->FindNode(sig.restore_op) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(sig_path, ": restore op '", sig.restore_op, "' is not in the graph"));
  }
  TANDEM_ASSIGN_OR_RETURN(FeedMap values, LoadVariables(version_dir, sig, **graph));
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, NewDirectSession(def, options));
  TANDEM_RETURN_IF_ERROR(AnnotateStatus(session->Run(values, {}, {sig.restore_op}).status(),
                                        "restoring the variables of " + version_dir));
  const int64_t version = VersionOf(BaseName(version_dir)).value_or(0);
  return std::unique_ptr<ExportedModel>(
      new ExportedModel(version_dir, version, std::move(sig), std::move(session)));
}

absl::StatusOr<NamedTensors> ExportedModel::Predict(
    const NamedTensors& inputs, absl::Span<const std::string> output_keys) const {
  FeedMap feeds;
  int64_t batch = -1;
  std::string batch_from;
  for (const auto& [name, value] : inputs) {
    auto it = signature_.inputs.find(name);
    if (it == signature_.inputs.end()) {
      std::vector<std::string> known;
      for (const auto& [k, unused] : signature_.inputs) known.push_back(k);
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown input '", name, "'; the model's inputs are ", absl::StrJoin(known, ", ")));
    }
    const TensorInfo& info = it->second;
    if (value.dtype() != info.dtype) {
      return absl::InvalidArgumentError(absl::StrCat("input '", name, "' must be ",
                                                     DTypeName(info.dtype), ", got ",
                                                     DTypeName(value.dtype())));
    }
    if (!info.shape.IsCompatibleWith(PartialShape(value.shape()))) {
      return absl::InvalidArgumentError(absl::StrCat("input '", name, "' must have shape ",
                                                     info.shape.DebugString(), ", got ",
                                                     value.shape().DebugString()));
    }
    if (batch >= 0 && value.dim(0) != batch) {
      return absl::InvalidArgumentError(absl::StrCat("inputs disagree on the batch size: '",
                                                     batch_from, "' has ", batch, ", '", name,
                                                     "' has ", value.dim(0)));
    }
    batch = value.dim(0);
    batch_from = name;
    feeds.emplace_back(info.tensor, value);
  }
  for (const auto& [name, unused] : signature_.inputs) {
    if (!inputs.contains(name)) {
      return absl::InvalidArgumentError(absl::StrCat("missing input '", name, "'"));
    }
  }
  std::vector<std::string> keys(output_keys.begin(), output_keys.end());
  if (keys.empty()) {
    for (const auto& [key, unused] : signature_.outputs) keys.push_back(key);
  }
  std::vector<std::string> fetches;
  for (const std::string& key : keys) {
    auto it = signature_.outputs.find(key);
    if (it == signature_.outputs.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown output '", key, "'"));
    }
    fetches.push_back(it->second.tensor);
  }
  TANDEM_ASSIGN_OR_RETURN(std::vector<Tensor> values, session_->Run(feeds, fetches));
  NamedTensors out;
  for (size_t i = 0; i < keys.size(); ++i) out[keys[i]] = std::move(values[i]);
  return out;
}

absl::StatusOr<std::unique_ptr<ExportedModel>> LoadExportedModel(const std::string& dir) {
  return ExportedModel::Load(dir);
}

}  // namespace tandem::serving

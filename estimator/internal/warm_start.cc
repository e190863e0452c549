// estimator/internal/warm_start.cc
#include "estimator/internal/warm_start.h"

#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_state.h"
#include "checkpoint/safetensors.h"
#include "estimator/internal/mode_graph.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/ops/partitioned_variables.h"
#include "glog/logging.h"

namespace tandem::internal {
namespace {

absl::StatusOr<std::regex> Pattern(const WarmStartSettings& ws) {
  try {
    return std::regex(ws.vars_to_warm_start);
  } catch (const std::regex_error& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        "warm start: vars_to_warm_start '", ws.vars_to_warm_start, "' is not a regex: ", e.what()));
  }
}

// Reads tensors by name from a checkpoint or a plain safetensors file.
class Source {
 public:
  static absl::StatusOr<Source> Open(const std::string& from) {
    Source s;
    if (!env::IsDirectory(from) && absl::EndsWith(from, ".safetensors")) {
      TANDEM_ASSIGN_OR_RETURN(checkpoint::SafetensorsFile file,
                              checkpoint::SafetensorsFile::Open(from));
      s.file_ = std::make_unique<checkpoint::SafetensorsFile>(std::move(file));
      s.description_ = from;
      return s;
    }
    std::string prefix = from;
    if (env::IsDirectory(from)) {
      TANDEM_ASSIGN_OR_RETURN(prefix, checkpoint::LatestCheckpoint(from));
    }
    TANDEM_ASSIGN_OR_RETURN(s.reader_, checkpoint::CheckpointReader::Open(prefix));
    s.description_ = prefix;
    return s;
  }
  absl::StatusOr<Tensor> Read(const std::string& name) {
    if (file_ != nullptr) {
      return file_->Read(name, checkpoint::SafetensorsFile::CrcCheck::kWhenPresent);
    }
    return reader_->Read(name);
  }
  const std::string& description() const { return description_; }

 private:
  std::unique_ptr<checkpoint::SafetensorsFile> file_;
  std::unique_ptr<checkpoint::CheckpointReader> reader_;
  std::string description_;
};

}  // namespace

absl::Status ValidateWarmStart(const WarmStartSettings& ws) {
  if (ws.ckpt_to_initialize_from.empty()) {
    return absl::InvalidArgumentError("warm start: no source (ckpt_to_initialize_from) given");
  }
  return Pattern(ws).status();
}

std::function<absl::Status(Session*)> WarmStartFn(Graph* graph, WarmStartSettings ws) {
  return [graph, ws](Session* session) -> absl::Status {
    const std::string from = "warm start from " + ws.ckpt_to_initialize_from;
    TANDEM_ASSIGN_OR_RETURN(Source source,
                            Annotated(Source::Open(ws.ckpt_to_initialize_from), from));
    TANDEM_ASSIGN_OR_RETURN(
        auto vars, ops::VariablesInCollection(graph, ws.trainable_only ? ops::kTrainableVariables
                                                                       : ops::kGlobalVariables));
    TANDEM_ASSIGN_OR_RETURN(std::regex pattern, Pattern(ws));
    std::map<std::string, std::string> unused_map = ws.var_name_to_prev_var_name;
    FeedMap feeds;
    std::vector<std::string> targets;
    // A part of a partitioned variable is warm-started by its logical variable's name,
    // cut from the whole tensor (the last one read is kept: parts come in a row).
    std::string cached_name;
    Tensor cached;
    for (const ops::Variable& v : vars) {
      const std::optional<ops::SaveSliceInfo> slice = ops::GetSaveSliceInfo(*v.handle().node);
      const std::string name = slice ? slice->full_name : v.name();
      if (!std::regex_search(name, pattern, std::regex_constants::match_continuous)) continue;
      std::string stored = name;
      if (auto it = ws.var_name_to_prev_var_name.find(name);
          it != ws.var_name_to_prev_var_name.end()) {
        stored = it->second;
        unused_map.erase(name);
      }
      const std::string what =
          stored == v.name()
              ? absl::StrCat("warm start of variable '", v.name(), "'")
              : absl::StrCat("warm start of variable '", v.name(), "' from '", stored, "'");
      if (cached_name != stored) {
        cached_name.clear();
        TANDEM_ASSIGN_OR_RETURN(cached, Annotated(source.Read(stored), what));
        cached_name = stored;
      }
      Tensor value = cached;
      if (slice) {
        if (cached.shape().dims() != slice->full_shape) {
          return absl::InvalidArgumentError(absl::StrCat(
              what, ": ", source.description(), " holds ", DTypeName(cached.dtype()),
              cached.shape().DebugString(), ", the model's partitioned variable is ",
              TensorShape(slice->full_shape).DebugString()));
        }
        TANDEM_ASSIGN_OR_RETURN(
            value, Annotated(checkpoint::SliceTensor(cached, slice->offset, v.shape().dims()), what));
      }
      if (value.dtype() != v.dtype() || !v.shape().IsCompatibleWith(value.shape())) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": ", source.description(), " holds ", DTypeName(value.dtype()),
                         value.shape().DebugString(), ", the model has ", DTypeName(v.dtype()),
                         v.shape().DebugString()));
      }
      feeds.emplace_back(v.initializer()->input(1).name(), std::move(value));
      targets.push_back(v.initializer()->name());
    }
    if (!unused_map.empty()) {
      std::vector<std::string> names;
      for (const auto& [name, unused] : unused_map) names.push_back(name);
      return absl::InvalidArgumentError(
          absl::StrCat("warm start: the variable-name map names ", absl::StrJoin(names, ", "),
                       ", which no warm-started variable of the model is (check "
                       "vars_to_warm_start and the model's variable names)"));
    }
    if (!targets.empty()) TANDEM_RETURN_IF_ERROR(session->Run(feeds, {}, targets).status());
    LOG(INFO) << "Warm-started " << targets.size() << " variables from " << source.description();
    return absl::OkStatus();
  };
}

}  // namespace tandem::internal

// checkpoint/load_variables.cc: see load_variables.h.
#include "checkpoint/load_variables.h"

#include <algorithm>
#include <functional>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/safetensors.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/core/thread_pool.h"

namespace tandem::checkpoint {
namespace {

// Runs fn(i) for i in [0, n), on up to `max_threads` threads when n > 1.
void ParallelRun(int n, int max_threads, const std::function<void(int)>& fn) {
  if (n <= 1 || max_threads <= 1) {
    for (int i = 0; i < n; ++i) fn(i);
    return;
  }
  ThreadPool pool("checkpoint_io", std::min(n, max_threads) - 1);
  pool.ParallelFor(n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) fn(static_cast<int>(i));
  });
}

// Where each variable is read from: a shard file by its own name, or (relayout) its
// logical tensor through a CheckpointReader.
struct LoadPlan {
  std::vector<std::string> shard_files;
  std::vector<int> shard_of_var;      // -1: read through the reader.
  std::vector<std::string> relayout;  // The logical tensor, where shard_of_var is -1.
};

absl::StatusOr<LoadPlan> Plan(const CheckpointIndex& index, const std::string& index_path,
                              const std::vector<VariableToLoad>& vars) {
  LoadPlan plan;
  absl::flat_hash_map<std::string, int> shard_of_file;
  plan.relayout.resize(vars.size());
  for (size_t i = 0; i < vars.size(); ++i) {
    const VariableToLoad& v = vars[i];
    const std::string full = v.part ? v.part->full_name : v.name;
    auto it = index.weight_map.find(v.name);
    // A part is read by name only when the checkpoint has that very slice.
    bool same_slice = it != index.weight_map.end();
    if (same_slice && v.part) {
      auto sliced = index.slices.find(full);
      same_slice = sliced != index.slices.end() && sliced->second.full_shape == v.part->full_shape;
      if (same_slice) {
        same_slice = std::any_of(sliced->second.parts.begin(), sliced->second.parts.end(),
                                 [&](const SlicePart& p) {
                                   return p.part == v.name && p.offset == v.part->offset &&
                                          PartialShape(p.shape) == v.shape;
                                 });
      }
    }
    if (!same_slice) {
      if (index.slices.contains(full) || (full != v.name && index.weight_map.contains(full))) {
        plan.relayout[i] = full;
        plan.shard_of_var.push_back(-1);
        continue;
      }
      if (it == index.weight_map.end()) {
        return absl::NotFoundError(
            absl::StrCat(index_path, ": variable ", v.name,
                         full != v.name ? absl::StrCat(" (part of ", full, ")") : std::string(),
                         " of the model is not in the checkpoint"));
      }
    }
    auto [pos, inserted] =
        shard_of_file.emplace(it->second, static_cast<int>(plan.shard_files.size()));
    if (inserted) plan.shard_files.push_back(it->second);
    plan.shard_of_var.push_back(pos->second);
  }
  return plan;
}

// A variable stored under another layout: the slice of `full` a part covers, or a
// whole variable assembled from parts.
absl::StatusOr<Tensor> ReadRelayout(CheckpointReader& reader, const std::string& prefix,
                                    const VariableToLoad& v, const std::string& full,
                                    LoadFailure* kind) {
  absl::StatusOr<Tensor> t;
  if (!v.part) {
    t = reader.Read(full);
  } else {
    if (!v.shape.IsFullyDefined()) {
      return absl::InternalError(absl::StrCat("restore: part ", v.name, " has no full shape"));
    }
    t = reader.ReadSlice(full, v.part->full_shape, v.part->offset, v.shape.dims());
  }
  if (!t.ok()) {
    if (absl::IsInvalidArgument(t.status())) *kind = LoadFailure::kMismatch;
    return t.status();
  }
  if (t->dtype() != v.dtype || !v.shape.IsCompatibleWith(PartialShape(t->shape()))) {
    *kind = LoadFailure::kMismatch;
    return absl::InvalidArgumentError(absl::StrCat(IndexPath(prefix), ": ", v.name, " read from ",
                                                   full, " is ", DTypeName(t->dtype()),
                                                   t->shape().DebugString(), " but the model has ",
                                                   DTypeName(v.dtype), v.shape.DebugString()));
  }
  return t;
}

}  // namespace

absl::Status CheckVariablesPresent(const CheckpointIndex& index, const std::string& index_path,
                                   const std::vector<VariableToLoad>& vars) {
  return Plan(index, index_path, vars).status();
}

absl::StatusOr<std::vector<Tensor>> LoadVariables(const std::string& prefix,
                                                  const std::vector<VariableToLoad>& vars,
                                                  int max_parallel_reads, LoadFailure* kind) {
  *kind = LoadFailure::kUnreadable;
  const std::string index_path = IndexPath(prefix);
  TANDEM_ASSIGN_OR_RETURN(CheckpointIndex index, ReadIndex(index_path));
  absl::StatusOr<LoadPlan> plan = Plan(index, index_path, vars);
  if (!plan.ok()) {
    *kind = LoadFailure::kMismatch;
    return plan.status();
  }

  const std::string dir = env::Dirname(prefix);
  std::vector<absl::StatusOr<SafetensorsFile>> shards;
  shards.reserve(plan->shard_files.size());
  for (size_t k = 0; k < plan->shard_files.size(); ++k) {
    shards.emplace_back(absl::UnknownError("unread"));
  }
  ParallelRun(static_cast<int>(plan->shard_files.size()), max_parallel_reads, [&](int k) {
    shards[k] = SafetensorsFile::Open(env::JoinPath(dir, plan->shard_files[k]));
  });
  for (auto& s : shards) {
    if (!s.ok()) return s.status();
  }

  // Check every dtype and shape before reading (and CRC-checking) any data.
  for (size_t i = 0; i < vars.size(); ++i) {
    const VariableToLoad& v = vars[i];
    if (plan->shard_of_var[i] < 0) continue;  // Checked once read, below.
    const SafetensorsFile& file = *shards[plan->shard_of_var[i]];
    absl::StatusOr<SafetensorsEntry> info = file.Info(v.name);
    if (!info.ok()) {
      return absl::DataLossError(absl::StrCat(file.path(), ": tensor ", v.name,
                                              " is missing although ", index_path,
                                              " maps it to this shard"));
    }
    if (info->dtype != v.dtype) {
      *kind = LoadFailure::kMismatch;
      return absl::InvalidArgumentError(
          absl::StrCat(file.path(), ": ", v.name, " has dtype ", DTypeName(info->dtype),
                       " in the checkpoint but ", DTypeName(v.dtype), " in the model"));
    }
    if (!v.shape.IsCompatibleWith(PartialShape(info->shape))) {
      *kind = LoadFailure::kMismatch;
      return absl::InvalidArgumentError(
          absl::StrCat(file.path(), ": ", v.name, " has shape ", info->shape.DebugString(),
                       " in the checkpoint but ", v.shape.DebugString(), " in the model"));
    }
  }
  std::vector<Tensor> values;
  values.reserve(vars.size());
  std::unique_ptr<CheckpointReader> reader;
  for (size_t i = 0; i < vars.size(); ++i) {
    const VariableToLoad& v = vars[i];
    if (plan->shard_of_var[i] >= 0) {
      TANDEM_ASSIGN_OR_RETURN(Tensor t, shards[plan->shard_of_var[i]]->Read(v.name));
      values.push_back(std::move(t));
      continue;
    }
    if (reader == nullptr) {
      TANDEM_ASSIGN_OR_RETURN(reader, CheckpointReader::Open(prefix));
    }
    TANDEM_ASSIGN_OR_RETURN(Tensor t, ReadRelayout(*reader, prefix, v, plan->relayout[i], kind));
    values.push_back(std::move(t));
  }
  *kind = LoadFailure::kNone;
  return values;
}

}  // namespace tandem::checkpoint

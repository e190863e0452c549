// estimator/internal/partition_config.cc
#include "estimator/internal/partition_config.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/status.h"

namespace tandem::internal {
namespace {

constexpr int64_t kCannedMinShardBytes = int64_t{64} << 20;  // TF canned estimators.

// One part per ps task, at least one.
int PerPsTask(const JobConfig& job) { return std::max(1, job.cluster.NumTasks(kJobPs)); }

// Wraps `inner` with the checks every configured partitioner shares: at most
// kMaxTableParts parts.
ops::Partitioner Bounded(ops::Partitioner inner, std::string what) {
  return [inner = std::move(inner), what = std::move(what)](
             const TensorShape& shape, DType dtype) -> absl::StatusOr<std::vector<int>> {
    TANDEM_ASSIGN_OR_RETURN(std::vector<int> parts, inner(shape, dtype));
    for (int n : parts) {
      if (n > kMaxTableParts) {
        return ConfigError(absl::StrCat("[distribute] ", what, " cuts a table of shape ",
                                        shape.DebugString(), " into ", n, " parts; at most ",
                                        kMaxTableParts, " are allowed"));
      }
    }
    return parts;
  };
}

}  // namespace

std::string CanonicalPartitioner(const std::string& name) {
  if (name == "fixed_size") return "fixed";
  if (name == "min_max_variable" || name == "min_max") return "min_size";
  if (name == "variable_axis_size") return "max_size";
  return name;
}

bool PartitionerRequested(const DistributeSection& d) {
  const std::string p = CanonicalPartitioner(d.partitioner);
  return p != "auto" && p != "none";
}

absl::Status CheckPartitionerKeys(const JobConfig& c,
                                  const std::function<std::string(const std::string&)>& where) {
  const DistributeSection& d = c.distribute;
  const DistributeSection defaults;
  const std::string p = CanonicalPartitioner(d.partitioner);
  auto refuse = [&](const std::string& key, absl::string_view message) {
    return ConfigError(absl::StrCat(where("distribute." + key), ": [distribute] ", message));
  };
  struct Key {
    const char* name;
    bool set;
    std::vector<std::string> partitioners;
  };
  const Key keys[] = {
      {"num_shards", d.num_shards != defaults.num_shards, {"fixed"}},
      {"max_shards", d.max_shards != defaults.max_shards, {"min_size", "max_size"}},
      {"min_shard_bytes", d.min_shard_bytes != defaults.min_shard_bytes, {"min_size"}},
      {"max_shard_bytes", d.max_shard_bytes != defaults.max_shard_bytes, {"max_size"}},
  };
  for (const Key& k : keys) {
    if (k.set &&
        std::find(k.partitioners.begin(), k.partitioners.end(), p) == k.partitioners.end()) {
      return refuse(k.name, absl::StrCat(k.name, " applies to partitioner = \"",
                                         absl::StrJoin(k.partitioners, "\" or \""),
                                         "\"; this job has partitioner = \"", d.partitioner, "\""));
    }
  }
  if (p == "max_size" && d.max_shard_bytes <= 0) {
    return refuse("max_shard_bytes",
                  "partitioner = \"max_size\" needs max_shard_bytes (the most bytes of one part)");
  }
  if (PartitionerRequested(d) && c.strategy() == Strategy::kCollective) {
    return refuse("partitioner",
                  absl::StrCat("partitioner = \"", d.partitioner,
                               "\" splits tables across ps tasks, but the collective strategy "
                               "holds every variable whole on every replica; use "
                               "strategy = \"parameter_server\" or partitioner = \"none\""));
  }
  return absl::OkStatus();
}

absl::StatusOr<TablePartitioning> TablePartitionerFor(const JobConfig& job) {
  const DistributeSection& d = job.distribute;
  const std::string p = CanonicalPartitioner(d.partitioner);
  TablePartitioning out;
  if (p == "none" || (p == "auto" && (job.cluster.NumTasks(kJobPs) == 0 ||
                                      job.strategy() == Strategy::kCollective))) {
    return out;
  }
  if (p == "auto" || p == "min_size") {
    const int64_t min_bytes = p == "auto" ? kCannedMinShardBytes : d.min_shard_bytes;
    const int max_shards =
        p == "auto" || d.max_shards == 0 ? PerPsTask(job) : static_cast<int>(d.max_shards);
    out.description =
        absl::StrCat(p == "auto" ? "auto: " : "", "min_size(min_shard_bytes=", min_bytes,
                     ", max_shards=", max_shards, ")");
    out.partitioner =
        Bounded(ops::MinMaxVariablePartitioner(max_shards, 0, min_bytes), out.description);
  } else if (p == "fixed") {
    const int n = d.num_shards == 0 ? PerPsTask(job) : static_cast<int>(d.num_shards);
    out.description = absl::StrCat("fixed(num_shards=", n, ")");
    out.partitioner = Bounded(ops::FixedSizePartitioner(n, 0), out.description);
  } else if (p == "max_size") {
    const int64_t max_bytes = d.max_shard_bytes;
    const int max_shards = static_cast<int>(d.max_shards);
    out.description =
        absl::StrCat("max_size(max_shard_bytes=", max_bytes,
                     max_shards > 0 ? absl::StrCat(", max_shards=", max_shards) : "", ")");
    ops::Partitioner inner = ops::VariableAxisSizePartitioner(max_bytes, 0, 16, max_shards);
    out.partitioner = Bounded(
        [inner, max_bytes](const TensorShape& shape,
                           DType dtype) -> absl::StatusOr<std::vector<int>> {
          if (shape.rank() >= 1 && shape.dim(0) > 0) {
            const int64_t row = shape.num_elements() / shape.dim(0) * DTypeSize(dtype);
            if (row > max_bytes) {
              return ConfigError(absl::StrCat("[distribute] max_shard_bytes = ", max_bytes,
                                              " is below one row (", row,
                                              " bytes) of a table of shape ", shape.DebugString(),
                                              "; a part holds whole rows"));
            }
          }
          return inner(shape, dtype);
        },
        out.description);
  } else {
    return ConfigError(absl::StrCat("[distribute] unknown partitioner \"", d.partitioner, "\""));
  }
  return out;
}

}  // namespace tandem::internal

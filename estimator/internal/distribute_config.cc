// estimator/internal/distribute_config.cc
#include "estimator/internal/distribute_config.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "estimator/internal/partition_config.h"
#include "framework/core/status.h"

namespace tandem::internal {

int TrainingTasks(const ClusterSpec& cluster) {
  return cluster.NumTasks(kJobChief) + cluster.NumTasks(kJobMaster) + cluster.NumTasks(kJobWorker);
}

absl::Status CheckDistribute(const JobConfig& c,
                             const std::function<std::string(const std::string&)>& where) {
  const DistributeSection& d = c.distribute;
  auto refuse = [&](const std::string& key, absl::string_view message,
                    absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
    return ConfigError(absl::StrCat(where("distribute." + key), ": [distribute] ", message), code);
  };
  const int64_t replicas = TrainingTasks(c.cluster);
  const bool collective = c.strategy() == Strategy::kCollective;
  const bool hybrid = d.strategy == "hybrid";
  if (hybrid) {
    if (c.cluster.NumTasks(kJobPs) == 0 || replicas == 0) {
      return refuse("strategy",
                    absl::StrCat("strategy = \"hybrid\" keeps the tables on ps tasks and "
                                 "all-reduces the rest among the training tasks: it needs a "
                                 "cluster (TF_CONFIG or [cluster]) with both; this one is ",
                                 c.cluster.empty() ? "empty" : c.cluster.DebugString()));
    }
    for (const auto& [key, set] : std::vector<std::pair<std::string, bool>>{
             {"replicas_to_aggregate", d.replicas_to_aggregate != 0},
             {"total_num_replicas", d.total_num_replicas != 0},
             {"on_missing_replicas", d.on_missing_replicas != "wait"},
             {"missing_replicas_patience_secs", d.missing_replicas_patience_secs != 0}}) {
      if (set) {
        return refuse(key, key +
                               " applies to strategy = \"parameter_server\" with sync = true; "
                               "the hybrid strategy's replicas all take part in every step");
      }
    }
  }
  if (collective) {
    if (c.cluster.NumTasks(kJobPs) > 0) {
      return refuse(
          "strategy",
          absl::StrCat("strategy = \"", d.strategy,
                       "\" mirrors the variables on every training task, but the "
                       "cluster has ps tasks: ",
                       c.cluster.DebugString(), "; use \"parameter_server\" or drop the ps job"));
    }
    if (d.sync) {
      return refuse("sync",
                    "sync applies to strategy = \"parameter_server\"; the collective strategy "
                    "is always synchronous");
    }
  } else if (!hybrid) {
    const DistributeSection defaults;
    for (const auto& [key, set] : std::vector<std::pair<std::string, bool>>{
             {"bytes_per_pack", d.bytes_per_pack != defaults.bytes_per_pack},
             {"collective_timeout_secs",
              d.collective_timeout_secs != defaults.collective_timeout_secs},
             {"check_replicas_steps", d.check_replicas_steps != defaults.check_replicas_steps}}) {
      if (set) {
        return refuse(key, key +
                               " applies only to strategy = \"collective\" (a cluster of "
                               "training tasks without ps tasks) or \"hybrid\"");
      }
    }
  }
  if (d.sync) {
    if (c.cluster.NumTasks(kJobPs) == 0) {
      return refuse("sync",
                    "sync = true trains synchronous replicas on a cluster with ps tasks (TF_CONFIG "
                    "or [cluster]); this job has none");
    }
    if (d.total_num_replicas != 0 && d.total_num_replicas != replicas) {
      return refuse(
          "total_num_replicas",
          absl::StrCat("total_num_replicas = ", d.total_num_replicas, " but the cluster has ",
                       replicas, " replicas (chief and workers); leave it unset"));
    }
    if (d.replicas_to_aggregate > replicas) {
      return refuse("replicas_to_aggregate",
                    absl::StrCat("replicas_to_aggregate = ", d.replicas_to_aggregate,
                                 " exceeds the cluster's ", replicas,
                                 " replicas (chief and workers): no step could ever aggregate"));
    }
  } else {
    for (const auto& [key, set] : std::vector<std::pair<std::string, bool>>{
             {"replicas_to_aggregate", d.replicas_to_aggregate != 0},
             {"total_num_replicas", d.total_num_replicas != 0},
             {"on_missing_replicas", d.on_missing_replicas != "wait"},
             {"missing_replicas_patience_secs", d.missing_replicas_patience_secs != 0}}) {
      if (set) return refuse(key, key + " applies only with sync = true (synchronous replicas)");
    }
  }
  TANDEM_RETURN_IF_ERROR(CheckPartitionerKeys(c, where));
  if (replicas <= 1 && c.cluster.NumTasks(kJobPs) == 0) {
    if (d.strategy == "parameter_server" && !c.cluster.empty()) {
      return refuse("strategy",
                    "strategy = \"parameter_server\" needs a cluster with ps tasks; this one "
                    "has only " +
                        c.cluster.DebugString());
    }
    if (d.strategy == "parameter_server") {
      return refuse("strategy",
                    "strategy = \"parameter_server\" needs a cluster (TF_CONFIG or [cluster]) "
                    "with ps tasks; use \"auto\" to train locally without one");
    }
    return absl::OkStatus();
  }
  if (d.strategy == "none") {
    return refuse("strategy",
                  absl::StrCat("strategy = \"none\" trains locally, but the cluster "
                               "has several tasks: ",
                               c.cluster.DebugString(), "; use \"auto\" or \"parameter_server\""));
  }
  if (d.strategy == "parameter_server" && c.cluster.NumTasks(kJobPs) == 0) {
    return refuse("strategy", absl::StrCat("strategy = \"parameter_server\" needs ps tasks; the "
                                           "cluster ",
                                           c.cluster.DebugString(),
                                           " has none (\"collective\" trains without them)"));
  }
  return absl::OkStatus();
}

}  // namespace tandem::internal

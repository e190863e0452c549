// estimator/job_role.cc
//
// What a job's task does: JobConfig::strategy and DescribeRole (job_config.h),
// from the resolved cluster, task and [distribute] section.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "estimator/internal/distribute_config.h"
#include "estimator/job_config.h"

namespace tandem {

Strategy JobConfig::strategy() const {
  const std::string& s = distribute.strategy;
  if (s == "collective" || s == "multi_worker_mirrored") return Strategy::kCollective;
  if (cluster.TotalTasks() <= 1) return Strategy::kLocal;
  if (s == "hybrid") return Strategy::kHybrid;
  if (s == "auto" && cluster.NumTasks(kJobPs) == 0) {
    return internal::TrainingTasks(cluster) > 1 ? Strategy::kCollective : Strategy::kLocal;
  }
  return s == "none" ? Strategy::kLocal : Strategy::kParameterServer;
}

std::string JobConfig::DescribeRole() const {
  const RunConfig& rc = run_config_;
  if (cluster.empty()) {
    return "local (no cluster): trains in this process, evaluates after checkpoints (throttled) "
           "and at the end";
  }
  std::vector<std::string> jobs;
  for (const std::string& job : cluster.jobs()) {
    const int n = cluster.NumTasks(job);
    jobs.push_back(absl::StrCat(n, " ", job, n > 1 && job != kJobPs ? "s" : ""));
  }
  const std::string where = absl::StrCat("task ", rc.task_type(), ":", rc.task_id(),
                                         rc.is_chief() ? ", the chief" : ", not the chief",
                                         ", of a cluster of ", absl::StrJoin(jobs, ", "));
  const std::string& type = rc.task_type();
  if (type == kJobEvaluator) {
    return absl::StrCat("evaluator (task evaluator:", rc.task_id(),
                        ", outside the training cluster): evaluates each new checkpoint in ",
                        rc.model_dir(), " until the one at max_steps");
  }
  if (cluster.TotalTasks() <= 1) {
    return absl::StrCat(type, " (", where, "): a one-task cluster trains as a local job");
  }
  if (type == kJobPs) {
    return absl::StrCat("ps (", where,
                        "): holds variables and applies updates until the chief "
                        "shuts it down");
  }
  if (strategy() == Strategy::kCollective) {
    return absl::StrCat(type, " (", where, "), collective all-reduce replica ",
                        rc.replica_index().value_or(0), " of ", rc.num_worker_replicas(), ": ",
                        rc.is_chief() ? "initialises or restores and broadcasts the variables, "
                                        "trains, writes checkpoints and summaries"
                                      : "trains a mirrored copy of the variables",
                        " until global_step reaches max_steps (strategy \"collective\")");
  }
  if (strategy() == Strategy::kHybrid) {
    return absl::StrCat(type, " (", where, "), hybrid replica ", rc.replica_index().value_or(0),
                        " of ", rc.num_worker_replicas(), ": ",
                        rc.is_chief() ? "initialises or restores the tables on the ps tasks and "
                                        "the mirrored variables, trains, writes checkpoints and "
                                        "summaries, then shuts the ps tasks down"
                                      : "trains a mirrored copy of the dense variables against "
                                        "the tables on the ps tasks",
                        " until global_step reaches max_steps (strategy \"hybrid\")");
  }
  if (rc.is_chief()) {
    return absl::StrCat(type, " (", where,
                        "): initialises or restores, trains, writes "
                        "checkpoints and summaries, ",
                        distribute.sync ? "aggregates the replicas' gradients, " : "",
                        eval.final_on_chief ? "evaluates the final checkpoint, " : "",
                        "then shuts the ps tasks down");
  }
  return absl::StrCat(type, " (", where, "): trains ",
                      distribute.sync ? "synchronously" : "asynchronously",
                      " on its input shard until global_step reaches max_steps");
}

}  // namespace tandem

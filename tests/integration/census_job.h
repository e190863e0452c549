// tests/integration/census_job.h
//
// Census wide & deep (configs/census_wide_deep.toml on data/adult) as the tests that
// train it on clusters of trainer processes run it: the arguments of one task (no
// shuffling, every step's loss logged, one thread per task), the hybrid strategy's
// settings, starting a task with its TF_CONFIG, and starting a hybrid job.
#ifndef TANDEM_TESTS_INTEGRATION_CENSUS_JOB_H_
#define TANDEM_TESTS_INTEGRATION_CENSUS_JOB_H_

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tests/integration/cluster_job.h"
#include "tests/integration/subprocess.h"

namespace tandem::testing {

using json = nlohmann::json;

// `trainer <command>` on census wide & deep: no shuffling, every step's loss logged,
// one thread per task; `sets` come last and win.
inline std::vector<std::string> CensusArgs(const std::string& command, const std::string& model_dir,
                                           const std::vector<std::string>& sets) {
  const std::string root = TANDEM_SOURCE_DIR;
  std::vector<std::string> args = {
      TANDEM_TRAINER, command,
      "--config",     root + "/configs/census_wide_deep.toml",
      "--set",        absl::StrCat("run.model_dir=\"", model_dir, "\""),
      "--set",        "data.train_path=\"" + root + "/data/adult/adult.data.gz\"",
      "--set",        "data.eval_path=\"" + root + "/data/adult/adult.test.gz\"",
      "--set",        "data.shuffle_buffer=1",
      "--set",        "run.log_step_count_steps=1",
      "--set",        "run.intra_op_threads=1",
      "--set",        "run.inter_op_threads=1"};
  for (const std::string& s : sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  return args;
}

// `sets` with the hybrid strategy and a 20 s collective timeout.
inline std::vector<std::string> Hybrid(std::vector<std::string> sets) {
  sets.push_back("distribute.strategy=\"hybrid\"");
  sets.push_back("distribute.collective_timeout_secs=20");
  return sets;
}

// `trainer train` as task `type`:`index` of `cluster`; its log goes to
// <model_dir>/../<type>_<index><log_suffix>.{out,err}.
inline std::unique_ptr<Subprocess> StartCensusTask(const json& cluster, const std::string& type,
                                                   int index, const std::string& model_dir,
                                                   const std::vector<std::string>& sets,
                                                   const std::string& log_suffix = "") {
  return StartClusterTask(cluster, type, index, CensusArgs("train", model_dir, sets), model_dir,
                          log_suffix, {{"environment", "cloud"}});
}

// A chief, a worker and a ps training census wide & deep with `sets`, in <tmp>/job
// (the model in <tmp>/job/model, the tasks' logs beside it).
struct HybridJob {
  std::string model_dir;
  json cluster;
  std::unique_ptr<Subprocess> ps, chief, worker;
};
inline HybridJob StartHybridJob(const std::string& tmp, const std::vector<std::string>& sets) {
  HybridJob job;
  job.cluster = {{"chief", Addresses(1)}, {"worker", Addresses(1)}, {"ps", Addresses(1)}};
  std::filesystem::create_directories(tmp + "/job");
  job.model_dir = tmp + "/job/model";
  job.ps = StartCensusTask(job.cluster, "ps", 0, job.model_dir, sets);
  job.chief = StartCensusTask(job.cluster, "chief", 0, job.model_dir, sets);
  job.worker = StartCensusTask(job.cluster, "worker", 0, job.model_dir, sets);
  return job;
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_INTEGRATION_CENSUS_JOB_H_

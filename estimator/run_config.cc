// estimator/run_config.cc
#include "estimator/run_config.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"

namespace tandem {
namespace {

using nlohmann::json;

absl::Status TfConfigError(absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("TF_CONFIG: ", message));
}

std::string Shown(const json& value) {
  std::string s = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

// TensorFlow does int(task_id): integers, integral floats and numeric strings pass.
absl::StatusOr<int> ParseIndex(const json& value, absl::string_view field) {
  int64_t index = 0;
  bool ok = false;
  if (value.is_number_integer()) {
    ok = true;
    index = value.is_number_unsigned()
                ? static_cast<int64_t>(std::min<uint64_t>(value.get<uint64_t>(), 1ull << 40))
                : value.get<int64_t>();
  } else if (value.is_number_float()) {
    double d = value.get<double>();
    ok = std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e12;
    if (ok) index = static_cast<int64_t>(d);
  } else if (value.is_string()) {
    ok = absl::SimpleAtoi(value.get<std::string>(), &index);
  }
  if (!ok) {
    return TfConfigError(absl::StrCat(field, " must be an integer, got ", Shown(value)));
  }
  if (index < 0) {
    return TfConfigError(absl::StrCat(field, " must be non-negative, got ", index));
  }
  if (index > std::numeric_limits<int>::max()) {
    return TfConfigError(absl::StrCat(field, " is too large: ", index));
  }
  return static_cast<int>(index);
}

absl::StatusOr<ClusterSpec> ParseCluster(const json& cluster) {
  if (!cluster.is_object()) {
    return TfConfigError(
        absl::StrCat("cluster must be an object mapping job names to "
                     "lists of addresses, got ",
                     Shown(cluster)));
  }
  ClusterSpec spec;
  for (const auto& [job, tasks] : cluster.items()) {
    std::string where = absl::StrCat("cluster.", job);
    if (tasks.is_array()) {
      std::vector<std::string> addresses;
      for (size_t i = 0; i < tasks.size(); ++i) {
        if (!tasks[i].is_string()) {
          return TfConfigError(absl::StrCat(where, "[", i, "] must be a \"host:port\" string, got ",
                                            Shown(tasks[i])));
        }
        addresses.push_back(tasks[i].get<std::string>());
      }
      TANDEM_RETURN_IF_ERROR(AnnotateStatus(spec.AddJob(job, addresses), "TF_CONFIG cluster"));
    } else if (tasks.is_object()) {
      if (tasks.empty()) TANDEM_RETURN_IF_ERROR(spec.AddJob(job, {}));
      for (const auto& [id, address] : tasks.items()) {
        int64_t index = 0;
        if (!absl::SimpleAtoi(id, &index) || index < 0 || index > std::numeric_limits<int>::max()) {
          return TfConfigError(
              absl::StrCat(where, ": task id \"", id, "\" must be a non-negative integer"));
        }
        if (!address.is_string()) {
          return TfConfigError(absl::StrCat(where, ".", id, " must be a \"host:port\" string, got ",
                                            Shown(address)));
        }
        TANDEM_RETURN_IF_ERROR(
            AnnotateStatus(spec.AddTask(job, static_cast<int>(index), address.get<std::string>()),
                           "TF_CONFIG cluster"));
      }
    } else {
      return TfConfigError(absl::StrCat(where,
                                        " must be a list of addresses or an object "
                                        "from task id to address, got ",
                                        Shown(tasks)));
    }
  }
  return spec;
}

absl::StatusOr<std::optional<std::string>> OptionalString(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) {
    return TfConfigError(absl::StrCat(key, " must be a string, got ", Shown(*it)));
  }
  return std::optional<std::string>(it->get<std::string>());
}

// TensorFlow's _get_global_id_in_cluster: the chief type first, the other jobs
// alphabetically ("evaluator" among them when "cluster" lists it), ps last. A job
// spans its highest task index + 1, as TensorFlow's ClusterSpec.job_tasks does for a
// sparse job.
int GlobalId(const ClusterSpec& cluster, const std::string& task_type, int task_id,
             absl::string_view chief_type) {
  std::vector<std::string> order = {std::string(chief_type)};
  for (const std::string& job : cluster.jobs()) {
    if (job != chief_type && job != kJobPs) order.push_back(job);
  }
  if (cluster.HasJob(kJobPs)) order.push_back(std::string(kJobPs));
  int next = 0;
  for (const std::string& job : order) {
    if (job == task_type) return next + task_id;
    const std::vector<int> indices = cluster.TaskIndices(job);
    next += indices.empty() ? 0 : indices.back() + 1;
  }
  return next;  // Unreachable: task_type was validated to be in the cluster.
}

// The position of a training task among the chief (or master) and the workers, in
// task index order; unset for any other task.
std::optional<int> ReplicaIndex(const ClusterSpec& cluster, const std::string& task_type,
                                int task_id, absl::string_view chief_type) {
  if (task_type != chief_type && task_type != kJobWorker) return std::nullopt;
  int rank = 0;
  for (absl::string_view job : {chief_type, kJobWorker}) {
    for (int index : cluster.TaskIndices(job)) {
      if (job == task_type && index == task_id) return rank;
      ++rank;
    }
  }
  return std::nullopt;  // Unreachable: the task was validated to be in the cluster.
}

// `cluster` without its "evaluator" job.
ClusterSpec WithoutEvaluator(const ClusterSpec& cluster) {
  ClusterSpec out;
  for (const auto& [job, tasks] : cluster.job_tasks()) {
    if (job == kJobEvaluator) continue;
    if (tasks.empty()) out.AddJob(job, {}).IgnoreError();
    for (const auto& [index, address] : tasks) out.AddTask(job, index, address).IgnoreError();
  }
  return out;
}

std::string SessionMaster(const ClusterSpec& cluster, const std::string& task_type, int task_id,
                          const TfConfig& tf_config) {
  if (tf_config.session_master) return *tf_config.session_master;
  std::vector<std::string> jobs = cluster.jobs();
  if (jobs.size() == 1 && cluster.NumTasks(jobs[0]) == 1) return "";
  return absl::StrCat("grpc://", cluster.TaskAddress(task_type, task_id).value());
}

// TensorFlow's _validate_task_type_and_task_id.
absl::Status ValidateTask(const ClusterSpec& cluster, const TfConfig& tf_config,
                          absl::string_view chief_type) {
  if (cluster.NumTasks(chief_type) == 0 && !cluster.HasTask(kJobWorker, 0)) {
    return TfConfigError(absl::StrCat("if \"cluster\" is set it must have one \"", chief_type,
                                      "\" task, or a \"worker\" task 0 to act as the chief; "
                                      "cluster is ",
                                      cluster.DebugString()));
  }
  if (cluster.NumTasks(chief_type) > 1) {
    return TfConfigError(absl::StrCat("\"cluster\" must have only one \"", chief_type,
                                      "\" task; cluster is ", cluster.DebugString()));
  }
  if (tf_config.task_type.empty()) {
    return TfConfigError("if \"cluster\" is set, task.type must be set");
  }
  if (!tf_config.task_index) {
    return TfConfigError("if \"cluster\" is set, task.index must be set");
  }
  if (tf_config.task_type == kJobEvaluator) return absl::OkStatus();
  if (!cluster.HasJob(tf_config.task_type)) {
    return TfConfigError(absl::StrCat("task.type \"", tf_config.task_type,
                                      "\" is not a job in the cluster ", cluster.DebugString()));
  }
  if (!cluster.HasTask(tf_config.task_type, *tf_config.task_index)) {
    return TfConfigError(absl::StrCat("task.index ", *tf_config.task_index,
                                      " is not a task of job \"", tf_config.task_type,
                                      "\" in the cluster ", cluster.DebugString()));
  }
  return absl::OkStatus();
}

absl::Status ValidateOptions(const RunConfigOptions& o) {
  auto bad = [](absl::string_view message) { return absl::InvalidArgumentError(message); };
  if (o.save_summary_steps < 0) return bad("save_summary_steps should be >= 0");
  if (o.save_checkpoints_steps && o.save_checkpoints_secs) {
    return bad("save_checkpoints_steps and save_checkpoints_secs cannot be both set");
  }
  if (o.save_checkpoints_steps && *o.save_checkpoints_steps < 0) {
    return bad("save_checkpoints_steps should be >= 0");
  }
  if (o.save_checkpoints_secs && *o.save_checkpoints_secs < 0) {
    return bad("save_checkpoints_secs should be >= 0");
  }
  if (o.keep_checkpoint_max < 0) return bad("keep_checkpoint_max should be >= 0");
  if (!(o.keep_checkpoint_every_n_hours > 0)) {
    return bad("keep_checkpoint_every_n_hours should be > 0");
  }
  if (o.log_step_count_steps <= 0) return bad("log_step_count_steps should be > 0");
  if (o.trace_every_steps < 0) return bad("trace_every_steps should be >= 0");
  if (o.operation_timeout_secs < 0) return bad("operation_timeout_secs should be >= 0");
  if (o.num_gpus < -1) return bad("num_gpus should be -1 (auto), 0 or 1");
  if (o.num_gpus > 1) {
    return absl::UnimplementedError(
        absl::StrCat("RunConfig: num_gpus = ", o.num_gpus,
                     ": in-graph towers across several GPUs are not built; use 1 (GPU:0) or -1"));
  }
  if (!(o.gpu_memory_fraction > 0 && o.gpu_memory_fraction <= 1)) {
    return bad("gpu_memory_fraction should be in (0, 1]");
  }
  if (o.session_config && (o.session_config->inter_op_parallelism_threads < 0 ||
                           o.session_config->intra_op_parallelism_threads < 0)) {
    return bad("session thread counts should be >= 0");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TfConfig> ParseTfConfig(absl::string_view json_text) {
  TfConfig out;
  if (json_text.find_first_not_of(" \t\r\n") == absl::string_view::npos) return out;
  json config = json::parse(json_text.begin(), json_text.end(), nullptr, false);
  if (config.is_discarded()) {
    return TfConfigError(absl::StrCat("not valid JSON: ", Shown(std::string(json_text))));
  }
  if (!config.is_object()) {
    return TfConfigError(absl::StrCat("must be a JSON object, got ", Shown(config)));
  }
  if (auto it = config.find("cluster"); it != config.end() && !it->is_null()) {
    TANDEM_ASSIGN_OR_RETURN(out.cluster, ParseCluster(*it));
  }
  if (auto it = config.find("task"); it != config.end() && !it->is_null()) {
    if (!it->is_object()) {
      return TfConfigError(
          absl::StrCat("task must be an object {\"type\": ..., \"index\": ...}, "
                       "got ",
                       Shown(*it)));
    }
    if (auto t = it->find("type"); t != it->end() && !t->is_null()) {
      if (!t->is_string()) {
        return TfConfigError(absl::StrCat("task.type must be a string, got ", Shown(*t)));
      }
      out.task_type = t->get<std::string>();
    }
    if (auto i = it->find("index"); i != it->end() && !i->is_null()) {
      TANDEM_ASSIGN_OR_RETURN(out.task_index, ParseIndex(*i, "task.index"));
    }
  }
  if (auto it = config.find("environment"); it != config.end() && !it->is_null()) {
    if (!it->is_string()) {
      return TfConfigError(absl::StrCat("environment must be a string, got ", Shown(*it)));
    }
    out.environment = it->get<std::string>();
  }
  if (auto it = config.find("service"); it != config.end() && !it->is_null() && !it->is_object()) {
    return TfConfigError(
        absl::StrCat("if \"service\" is set it must be an object, got ", Shown(*it)));
  }
  TANDEM_ASSIGN_OR_RETURN(out.session_master, OptionalString(config, "session_master"));
  TANDEM_ASSIGN_OR_RETURN(out.eval_session_master, OptionalString(config, "eval_session_master"));
  TANDEM_ASSIGN_OR_RETURN(out.model_dir, OptionalString(config, "model_dir"));
  if (out.model_dir && out.model_dir->empty()) {
    return TfConfigError("model_dir should be non-empty");
  }
  return out;
}

absl::StatusOr<TfConfig> TfConfigFromEnvironment() {
  const char* text = std::getenv("TF_CONFIG");
  return ParseTfConfig(text == nullptr ? "" : text);
}

std::vector<std::string> DefaultDeviceFilters(absl::string_view task_type, int task_id) {
  if (task_type == kJobMaster) return {"/job:ps", "/job:master"};
  if (task_type == kJobChief) return {"/job:ps", "/job:chief"};
  if (task_type == kJobWorker) return {"/job:ps", absl::StrCat("/job:worker/task:", task_id)};
  if (task_type == kJobPs) return {"/job:ps", "/job:worker", "/job:chief", "/job:master"};
  return {};
}

RunConfig::RunConfig() = default;

absl::StatusOr<RunConfig> RunConfig::Create(const RunConfigOptions& options,
                                            const TfConfig& tf_config) {
  TANDEM_RETURN_IF_ERROR(ValidateOptions(options));
  RunConfig c;
  c.model_dir_ = options.model_dir;
  if (tf_config.model_dir) {
    if (!options.model_dir.empty() && options.model_dir != *tf_config.model_dir) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model_dir \"", options.model_dir, "\" must be the same as TF_CONFIG model_dir \"",
          *tf_config.model_dir, "\" when both are set"));
    }
    c.model_dir_ = *tf_config.model_dir;
  }
  c.tf_random_seed_ = options.tf_random_seed;
  c.save_summary_steps_ = options.save_summary_steps;
  c.save_checkpoints_steps_ = options.save_checkpoints_steps;
  c.save_checkpoints_secs_ = options.save_checkpoints_secs;
  if (!c.save_checkpoints_steps_ && !c.save_checkpoints_secs_) c.save_checkpoints_secs_ = 600;
  c.keep_checkpoint_max_ = options.keep_checkpoint_max;
  c.keep_checkpoint_every_n_hours_ = options.keep_checkpoint_every_n_hours;
  c.log_step_count_steps_ = options.log_step_count_steps;
  c.trace_every_steps_ = options.trace_every_steps;
  c.operation_timeout_secs_ = options.operation_timeout_secs;
  c.num_gpus_ = options.num_gpus;
  c.gpu_memory_fraction_ = options.gpu_memory_fraction;
  c.precision_ = options.precision;
  c.session_config_ = options.session_config;
  c.environment_ = tf_config.environment;

  // As given, with the evaluator when the scheduler lists it (Kubeflow does): TensorFlow
  // validates the task and numbers the global ids on it.
  const ClusterSpec& given = tf_config.cluster;
  if (given.empty()) {
    // Local mode.
    c.task_type_ = tf_config.task_type.empty() ? std::string(kJobWorker) : tf_config.task_type;
    c.task_id_ = tf_config.task_index.value_or(0);
    if (c.task_type_ != kJobWorker) {
      return TfConfigError(
          absl::StrCat("if \"cluster\" is not set, task.type must be "
                       "\"worker\", got \"",
                       c.task_type_, "\""));
    }
    if (c.task_id_ != 0) {
      return TfConfigError(
          absl::StrCat("if \"cluster\" is not set, task.index must be 0, got ", c.task_id_));
    }
    c.global_id_in_cluster_ = 0;
    c.replica_index_ = 0;
    c.master_ = tf_config.session_master.value_or("");
    c.evaluation_master_ = tf_config.eval_session_master.value_or("");
    c.is_chief_ = true;
    c.num_ps_replicas_ = 0;
    c.num_worker_replicas_ = 1;
    return c;
  }

  const bool legacy = given.HasJob(kJobMaster);
  if (legacy && given.HasJob(kJobChief)) {
    return TfConfigError(
        absl::StrCat("if a \"master\" job exists in \"cluster\", a \"chief\" "
                     "job is not supported; cluster is ",
                     given.DebugString()));
  }
  const absl::string_view chief_type = legacy ? kJobMaster : kJobChief;
  TANDEM_RETURN_IF_ERROR(ValidateTask(given, tf_config, chief_type));
  c.task_type_ = tf_config.task_type;
  c.task_id_ = *tf_config.task_index;
  if (c.task_type_ == kJobEvaluator) {
    if (legacy) {
      return TfConfigError(
          "if a \"master\" job exists in \"cluster\", task.type "
          "\"evaluator\" is not supported");
    }
    c.evaluation_master_ = tf_config.eval_session_master.value_or("");
    c.cluster_spec_ = ClusterSpec();
    c.master_ = "";
    c.num_ps_replicas_ = 0;
    c.num_worker_replicas_ = 0;
    c.global_id_in_cluster_.reset();
    c.replica_index_.reset();
    c.is_chief_ = false;
    return c;
  }
  // The evaluator serves nothing and binds no port: no training task may wait on it.
  const ClusterSpec cluster = WithoutEvaluator(given);
  c.cluster_spec_ = cluster;
  c.evaluation_master_ = "";
  c.master_ = SessionMaster(cluster, c.task_type_, c.task_id_, tf_config);
  c.num_ps_replicas_ = cluster.NumTasks(kJobPs);
  c.num_worker_replicas_ = cluster.NumTasks(kJobWorker) + cluster.NumTasks(chief_type);
  c.global_id_in_cluster_ = GlobalId(given, c.task_type_, c.task_id_, chief_type);
  c.replica_index_ = ReplicaIndex(cluster, c.task_type_, c.task_id_, chief_type);
  c.is_chief_ = c.task_type_ == chief_type;
  if (cluster.NumTasks(chief_type) == 0) {
    // A chief-less cluster (Kubeflow's PS/Worker TFJob): worker 0 acts as the chief, as
    // MultiWorkerMirroredStrategy and TensorFlow's contrib RunConfig do.
    c.is_chief_ = c.task_type_ == kJobWorker && c.task_id_ == 0;
    if (c.is_chief_) {
      LOG_FIRST_N(INFO, 1) << "The cluster has no \"" << chief_type
                           << "\" task: worker 0 (this task) acts as the chief.";
    }
  }
  if (c.num_gpus_ > 0) {
    return absl::UnimplementedError(
        "RunConfig: num_gpus = 1 on a cluster: cluster tasks compute on their CPU (GPU "
        "workers are not built); use -1 or 0");
  }
  if (!c.session_config_) {
    std::vector<std::string> filters = DefaultDeviceFilters(c.task_type_, c.task_id_);
    if (!filters.empty()) {
      c.session_config_ = SessionConfig();
      c.session_config_->device_filters = std::move(filters);
    }
  }
  return c;
}

absl::StatusOr<RunConfig> RunConfig::FromEnvironment(const RunConfigOptions& options) {
  TANDEM_ASSIGN_OR_RETURN(TfConfig tf_config, TfConfigFromEnvironment());
  return Create(options, tf_config);
}

bool RunConfig::checkpoints_enabled() const {
  return save_checkpoints_steps_.value_or(0) > 0 || save_checkpoints_secs_.value_or(0) > 0;
}

bool RunConfig::TrainsOnCluster() const {
  return cluster_spec_.TotalTasks() > 1 &&
         (task_type_ == kJobChief || task_type_ == kJobMaster || task_type_ == kJobWorker);
}

std::string RunConfig::task_device_name() const {
  if (cluster_spec_.empty()) return "";
  return task().DeviceName();
}

}  // namespace tandem

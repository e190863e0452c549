// framework/distributed/cluster_spec.cc
#include "framework/distributed/cluster_spec.h"

#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem {
namespace {

bool IsHostChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
}

bool IsDense(const ClusterSpec::TaskMap& tasks) {
  return tasks.empty() ||
         (tasks.begin()->first == 0 && tasks.rbegin()->first == static_cast<int>(tasks.size()) - 1);
}

}  // namespace

absl::Status ValidateTaskAddress(absl::string_view address) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid task address '", address, "': ", why,
                     " (expected host:port, e.g. \"localhost:2222\" or \"[::1]:2222\")"));
  };
  if (address.empty()) return bad("empty");
  if (address.find("://") != absl::string_view::npos) {
    return bad("a task address has no scheme (\"grpc://\")");
  }
  absl::string_view host;
  absl::string_view port;
  if (address.front() == '[') {
    size_t close = address.find(']');
    if (close == absl::string_view::npos) return bad("'[' without ']'");
    host = address.substr(1, close - 1);
    if (host.empty()) return bad("empty IPv6 host");
    for (char c : host) {
      if (!absl::ascii_isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.') {
        return bad("invalid character in IPv6 host");
      }
    }
    absl::string_view rest = address.substr(close + 1);
    if (rest.empty() || rest.front() != ':') return bad("no ':port' after ']'");
    port = rest.substr(1);
  } else {
    size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos) return bad("no port");
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
    if (host.empty()) return bad("empty host");
    if (host.find(':') != absl::string_view::npos) {
      return bad("IPv6 hosts must be in brackets");
    }
    for (char c : host) {
      if (!IsHostChar(c))
        return bad(absl::StrCat("invalid character '", std::string(1, c), "' in host"));
    }
  }
  if (port.empty()) return bad("empty port");
  if (port.size() > 5) return bad("port out of range 1..65535");
  for (char c : port) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return bad("port is not a number");
  }
  int value = 0;
  if (!absl::SimpleAtoi(port, &value) || value < 1 || value > 65535) {
    return bad("port out of range 1..65535");
  }
  return absl::OkStatus();
}

absl::Status ValidateJobName(absl::string_view job) {
  bool ok = !job.empty() && absl::ascii_isalpha(static_cast<unsigned char>(job.front()));
  for (char c : job) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') ok = false;
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid job name '", job, "': expected [A-Za-z][A-Za-z0-9_]*"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ClusterSpec> ClusterSpec::FromJobs(
    const std::map<std::string, std::vector<std::string>>& jobs) {
  ClusterSpec spec;
  for (const auto& [job, addresses] : jobs) {
    absl::Status s = spec.AddJob(job, addresses);
    if (!s.ok()) return s;
  }
  return spec;
}

absl::Status ClusterSpec::AddTask(absl::string_view job, int task_index,
                                  absl::string_view address) {
  absl::Status s = ValidateJobName(job);
  if (!s.ok()) return s;
  if (task_index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("job '", job, "': task index ", task_index, " is negative"));
  }
  s = ValidateTaskAddress(address);
  if (!s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job '", job, "' task ", task_index, ": ", s.message()));
  }
  TaskMap& tasks = jobs_[std::string(job)];
  if (tasks.count(task_index) > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("job '", job, "' task ", task_index, " is listed twice"));
  }
  const std::string owner = absl::StrCat(job, " task ", task_index);
  auto [owned, first] = address_owner_.emplace(std::string(address), owner);
  if (!first) {
    return absl::InvalidArgumentError(
        absl::StrCat("job '", job, "' task ", task_index, ": address ", address, " is also ",
                     owned->second, "'s (two tasks cannot listen on one address)"));
  }
  tasks.emplace(task_index, std::string(address));
  return absl::OkStatus();
}

absl::Status ClusterSpec::AddJob(absl::string_view job, const std::vector<std::string>& addresses) {
  absl::Status s = ValidateJobName(job);
  if (!s.ok()) return s;
  if (HasJob(job)) {
    return absl::InvalidArgumentError(absl::StrCat("job '", job, "' is listed twice"));
  }
  jobs_[std::string(job)];
  for (size_t i = 0; i < addresses.size(); ++i) {
    s = AddTask(job, static_cast<int>(i), addresses[i]);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

std::vector<std::string> ClusterSpec::jobs() const {
  std::vector<std::string> out;
  for (const auto& [job, tasks] : jobs_) out.push_back(job);
  return out;
}

bool ClusterSpec::HasJob(absl::string_view job) const {
  return jobs_.find(std::string(job)) != jobs_.end();
}

bool ClusterSpec::HasTask(absl::string_view job, int task_index) const {
  auto it = jobs_.find(std::string(job));
  return it != jobs_.end() && it->second.count(task_index) > 0;
}

int ClusterSpec::NumTasks(absl::string_view job) const {
  auto it = jobs_.find(std::string(job));
  return it == jobs_.end() ? 0 : static_cast<int>(it->second.size());
}

std::vector<int> ClusterSpec::TaskIndices(absl::string_view job) const {
  std::vector<int> out;
  auto it = jobs_.find(std::string(job));
  if (it == jobs_.end()) return out;
  for (const auto& [index, address] : it->second) out.push_back(index);
  return out;
}

int ClusterSpec::TotalTasks() const {
  int n = 0;
  for (const auto& [job, tasks] : jobs_) n += static_cast<int>(tasks.size());
  return n;
}

std::string TaskId::ToString() const { return absl::StrCat(job, ":", index); }

std::string TaskId::DeviceName() const { return ClusterSpec::TaskDeviceName(job, index); }

absl::StatusOr<std::string> ClusterSpec::TaskAddress(absl::string_view job, int task_index) const {
  auto it = jobs_.find(std::string(job));
  if (it != jobs_.end()) {
    auto t = it->second.find(task_index);
    if (t != it->second.end()) return t->second;
  }
  return absl::NotFoundError(absl::StrCat("task ", task_index, " of job '", job,
                                          "' is not in the cluster ", DebugString()));
}

std::string ClusterSpec::TaskDeviceName(absl::string_view job, int task_index) {
  return absl::StrCat("/job:", job, "/replica:0/task:", task_index);
}

DeviceSpec ClusterSpec::TaskDevice(absl::string_view job, int task_index) {
  DeviceSpec spec;
  spec.job = std::string(job);
  spec.replica = 0;
  spec.task = task_index;
  return spec;
}

std::vector<std::string> ClusterSpec::AllTaskDeviceNames() const {
  std::vector<std::string> out;
  for (const auto& [job, tasks] : jobs_) {
    for (const auto& [index, address] : tasks) out.push_back(TaskDeviceName(job, index));
  }
  return out;
}

std::string ClusterSpec::DebugString() const {
  std::vector<std::string> parts;
  for (const auto& [job, tasks] : jobs_) {
    std::vector<std::string> items;
    bool dense = IsDense(tasks);
    for (const auto& [index, address] : tasks) {
      items.push_back(dense ? absl::StrCat("\"", address, "\"")
                            : absl::StrCat("\"", index, "\": \"", address, "\""));
    }
    parts.push_back(absl::StrCat("\"", job, "\": ", dense ? "[" : "{", absl::StrJoin(items, ", "),
                                 dense ? "]" : "}"));
  }
  return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
}

std::string TaskNameOf(const DeviceSpec& device) {
  DeviceSpec task = device;
  task.type.reset();
  task.id.reset();
  if (!task.replica) task.replica = 0;
  return task.ToString();
}

}  // namespace tandem

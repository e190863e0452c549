// apps/trainer/liveness.cc
#include "apps/trainer/liveness.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "framework/core/status.h"
#include "framework/distributed/cluster_spec.h"
#include "glog/logging.h"

namespace tandem {
namespace {

// Creates `path` if missing and sets its modification time to now.
absl::Status Touch(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 || futimens(fd, nullptr) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("[run] liveness_file ", path, " cannot be written: ", why));
  }
  close(fd);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LivenessSignals>> LivenessSignals::Start(const JobConfig& job) {
  std::unique_ptr<LivenessSignals> s(new LivenessSignals);
  const RunConfig& config = job.run_config();
  const bool has_server = config.task_type() == kJobPs || config.TrainsOnCluster();
  if (job.security.health_port > 0 && !has_server) {
    const std::string address = absl::StrCat("0.0.0.0:", job.security.health_port);
    absl::StatusOr<std::unique_ptr<HealthPort>> port = HealthPort::Start(address);
    if (!port.ok()) return AnnotateStatus(port.status(), "[security] health_port");
    s->health_port_ = *std::move(port);
    LOG(INFO) << "Answering health checks on " << address << " (plaintext, grpc.health.v1 only)";
  }
  if (!job.run.liveness_file.empty()) {
    s->file_ = job.run.liveness_file;
    if (absl::Status t = Touch(s->file_); !t.ok()) return t;
    s->refresher_ = std::thread([p = s.get()] {
      while (!p->stop_.WaitForNotificationWithTimeout(absl::Seconds(kLivenessRefreshSecs))) {
        if (absl::Status t = Touch(p->file_); !t.ok()) LOG(WARNING) << t;
      }
    });
    LOG(INFO) << "Refreshing " << s->file_ << " every " << kLivenessRefreshSecs
              << " s while this process runs ([run] liveness_file)";
  }
  return s;
}

LivenessSignals::~LivenessSignals() {
  stop_.Notify();
  if (refresher_.joinable()) refresher_.join();
}

}  // namespace tandem

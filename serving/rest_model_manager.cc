#include "serving/rest_model_manager.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "glog/logging.h"

namespace tandem::serving {

absl::StatusOr<std::unique_ptr<ModelManager>> ModelManager::Create(
    const ModelManagerOptions& options) {
  if (options.file_system_poll_wait_seconds < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("file_system_poll_wait_seconds must not be negative, not ",
                     options.file_system_poll_wait_seconds));
  }
  TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> versions, ListVersions(options.export_base));
  if (versions.empty()) {
    return absl::NotFoundError(
        absl::StrCat(options.export_base, " holds no version directory (a decimal number)"));
  }
  absl::Status last_error;
  for (auto it = versions.rbegin(); it != versions.rend(); ++it) {
    absl::StatusOr<std::unique_ptr<ExportedModel>> model =
        ExportedModel::Load(env::JoinPath(options.export_base, absl::StrCat(*it)), options.session);
    if (model.ok()) {
      return std::unique_ptr<ModelManager>(new ModelManager(options, std::move(*model)));
    }
    LOG(WARNING) << "skipping version " << *it << " of " << options.export_base << ": "
                 << model.status();
    last_error = model.status();
  }
  return last_error;
}

namespace {

// options.model_name, else the signature's, else the export base's last path element.
std::string ServedName(const ModelManagerOptions& options, const Signature& signature) {
  if (!options.model_name.empty()) return options.model_name;
  if (!signature.model_name.empty()) return signature.model_name;
  std::string base = options.export_base;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  return base.substr(base.rfind('/') + 1);
}

}  // namespace

ModelManager::ModelManager(const ModelManagerOptions& options,
                           std::shared_ptr<const ExportedModel> first)
    : options_(options),
      name_(ServedName(options, first->signature())),
      current_(std::move(first)) {
  if (options_.file_system_poll_wait_seconds > 0) poller_ = std::thread([this] { PollLoop(); });
}

ModelManager::~ModelManager() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (poller_.joinable()) poller_.join();
}

std::shared_ptr<const ExportedModel> ModelManager::Current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

int64_t ModelManager::swaps() const {
  absl::MutexLock lock(&mu_);
  return swaps_;
}

int64_t ModelManager::load_failures() const {
  absl::MutexLock lock(&poll_mu_);
  return static_cast<int64_t>(failed_.size());
}

absl::StatusOr<bool> ModelManager::PollOnce() {
  absl::MutexLock poll_lock(&poll_mu_);
  TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> versions, ListVersions(options_.export_base));
  const int64_t served = Current()->version();
  // The newest version above the served one that has not failed before.
  int64_t candidate = -1;
  for (auto it = versions.rbegin(); it != versions.rend() && *it > served; ++it) {
    if (failed_.count(*it) == 0) {
      candidate = *it;
      break;
    }
  }
  if (candidate < 0) return false;
  const std::string dir = env::JoinPath(options_.export_base, absl::StrCat(candidate));
  absl::StatusOr<std::unique_ptr<ExportedModel>> model = ExportedModel::Load(dir, options_.session);
  if (!model.ok()) {
    failed_.insert(candidate);
    LOG(ERROR) << "model " << name_ << ": version " << candidate
               << " failed to load; still serving version " << served << ": " << model.status();
    return model.status();
  }
  std::shared_ptr<const ExportedModel> old;
  {
    absl::MutexLock lock(&mu_);
    old = std::exchange(current_, std::shared_ptr<const ExportedModel>(std::move(*model)));
    ++swaps_;
  }
  LOG(INFO) << "model " << name_ << ": serving version " << candidate << " from " << dir
            << " (was version " << old->version() << "; it is freed when its last request ends)";
  return true;
}

void ModelManager::PollLoop() {
  const absl::Duration wait = absl::Seconds(options_.file_system_poll_wait_seconds);
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), wait)) return;
    }
    absl::StatusOr<bool> polled = PollOnce();
    if (!polled.ok() && absl::IsNotFound(polled.status())) {
      LOG_EVERY_N(WARNING, 60) << "model " << name_ << ": " << polled.status();
    }
  }
}

}  // namespace tandem::serving

// serving/rest_model_manager.h
//
// ModelManager: the model a REST server serves, kept at the newest version of an
// export base directory (serving/signature.h's layout) without a restart, as
// TensorFlow Serving's "latest" version policy and --file_system_poll_wait_seconds do.
//
// Create loads the newest version that loads (trying older ones when the newest is
// broken). A poll thread lists the base every poll_wait_seconds; when a version newer
// than the served one appears it is loaded beside the served one and swapped in
// (a shared_ptr exchanged under a mutex). Requests hold the version they started on
// until they end, so the old version is freed when its last request finishes. A
// version that fails to load is logged once and skipped; the served version stays.
// Versions only move forward: a newer version deleted, or an older one added, changes
// nothing until a version newer than the served one appears.
//
// The served name is options.model_name, or the first loaded signature's model_name
// (or, when that is empty, the export base's last path element).
//
// Thread safety: every method may be called from any thread.
#ifndef TANDEM_SERVING_REST_MODEL_MANAGER_H_
#define TANDEM_SERVING_REST_MODEL_MANAGER_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "framework/runtime/session.h"
#include "serving/exported_model.h"

namespace tandem::serving {

struct ModelManagerOptions {
  std::string export_base;  // Holds the numeric version directories.
  std::string model_name;   // Empty: the signature's model_name.
  // Seconds between polls of export_base; 0: never poll (serve the first version).
  double file_system_poll_wait_seconds = 1;
  SessionOptions session;  // For every version's DirectSession.
};

class ModelManager {
 public:
  // NOT_FOUND when export_base holds no version; the last load error when none loads.
  static absl::StatusOr<std::unique_ptr<ModelManager>> Create(const ModelManagerOptions& options);
  // Stops polling (waits for a load in progress).
  ~ModelManager();
  ModelManager(const ModelManager&) = delete;
  ModelManager& operator=(const ModelManager&) = delete;

  const std::string& name() const { return name_; }
  // The served version; never null.
  std::shared_ptr<const ExportedModel> Current() const;

  // One poll: loads and swaps in the newest version if it is newer than the served
  // one and has not failed before. Returns whether it swapped. The poll thread calls
  // it; tests may too.
  absl::StatusOr<bool> PollOnce();
  // Versions swapped in after the first.
  int64_t swaps() const;
  // Versions that failed to load since Create.
  int64_t load_failures() const;

 private:
  ModelManager(const ModelManagerOptions& options, std::shared_ptr<const ExportedModel> first);
  void PollLoop();
  absl::StatusOr<std::shared_ptr<const ExportedModel>> LoadVersion(int64_t version) const;

  const ModelManagerOptions options_;
  const std::string name_;
  mutable absl::Mutex poll_mu_;  // One PollOnce at a time.
  std::set<int64_t> failed_ ABSL_GUARDED_BY(poll_mu_);
  mutable absl::Mutex mu_;
  std::shared_ptr<const ExportedModel> current_ ABSL_GUARDED_BY(mu_);
  int64_t swaps_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread poller_;
};

}  // namespace tandem::serving

#endif  // TANDEM_SERVING_REST_MODEL_MANAGER_H_

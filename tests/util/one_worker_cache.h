// tests/util/one_worker_cache.h
//
// OneWorkerCache: a WorkerCacheInterface whose every task is one given worker, for
// tests and benchmarks that drive a WorkerRendezvous against a single peer.
//
// Thread safety: thread-safe; the worker must outlive the cache.
#ifndef TANDEM_TESTS_UTIL_ONE_WORKER_CACHE_H_
#define TANDEM_TESTS_UTIL_ONE_WORKER_CACHE_H_

#include <string>
#include <vector>

#include "framework/distributed/worker_interface.h"

namespace tandem::testing {

class OneWorkerCache : public WorkerCacheInterface {
 public:
  explicit OneWorkerCache(WorkerInterface* worker) : worker_(worker) {}
  absl::StatusOr<WorkerInterface*> GetWorker(const std::string&) override { return worker_; }
  std::vector<std::string> ListTasks() const override { return {}; }

 private:
  WorkerInterface* worker_;
};

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_UTIL_ONE_WORKER_CACHE_H_

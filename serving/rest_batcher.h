// serving/rest_batcher.h
//
// Batcher: server-side batching of predict requests, with TensorFlow Serving's
// --enable_batching parameters. A request's examples wait in a queue; a batch thread
// takes the oldest request, waits until the queued requests for the same model (and
// the same per-example shapes) add up to max_batch_size examples or until
// batch_timeout_micros have passed since that request arrived, concatenates their
// inputs along dimension 0, runs ExportedModel::Predict once and hands each request
// its rows of every output. Requests for different model versions are never merged.
//
// A request with more than max_batch_size examples, and every request when batching
// is disabled, runs at once on the calling thread. The queue holds at most
// max_enqueued_batches * max_batch_size examples; a request that does not fit is
// UNAVAILABLE (TensorFlow Serving's answer, HTTP 503) at once.
//
// Thread safety: Predict may be called from many threads at once. The destructor
// fails queued requests with UNAVAILABLE and joins the batch threads; no Predict may
// start after it has begun.
#ifndef TANDEM_SERVING_REST_BATCHER_H_
#define TANDEM_SERVING_REST_BATCHER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "serving/exported_model.h"

namespace tandem::serving {

struct BatchingOptions {
  bool enabled = true;
  int max_batch_size = 64;              // Examples per batch, >= 1.
  int64_t batch_timeout_micros = 1000;  // >= 0.
  int num_batch_threads = 2;            // >= 1.
  int max_enqueued_batches = 32;        // Queue bound, in full batches; >= 1.
};

struct BatcherStats {
  int64_t requests = 0;         // Predict calls.
  int64_t batches = 0;          // Predict runs of the batch threads.
  int64_t merged_batches = 0;   // Batches holding more than one request.
  int64_t merged_requests = 0;  // Requests that ran in a merged batch.
  int64_t max_batch_rows = 0;   // Most examples in one batch.
  int64_t direct = 0;           // Requests run on their own thread (too large, or disabled).
  int64_t rejected = 0;         // Requests refused because the queue was full.
};

class Batcher {
 public:
  // INVALID_ARGUMENT for options out of range.
  static absl::StatusOr<std::unique_ptr<Batcher>> Create(const BatchingOptions& options);
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Runs `model` on `inputs` (each with `rows` examples along dimension 0, as the
  // model's signature checked) and returns every output's rows for these inputs.
  absl::StatusOr<NamedTensors> Predict(std::shared_ptr<const ExportedModel> model,
                                       NamedTensors inputs, int64_t rows);

  BatcherStats stats() const;
  const BatchingOptions& options() const { return options_; }

 private:
  struct Task;
  explicit Batcher(const BatchingOptions& options);
  // Same model, and every input with the same dtype and per-example shape, so the
  // two requests' inputs can be concatenated.
  static bool Compatible(const Task& a, const Task& b);
  void BatchLoop();
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True when the queue's head can run: enough compatible rows, or stopping.
  bool HeadReady() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes from the queue the head and the later compatible tasks that fit.
  std::vector<std::shared_ptr<Task>> TakeBatch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RunBatch(const std::vector<std::shared_ptr<Task>>& batch);

  const BatchingOptions options_;
  mutable absl::Mutex mu_;
  std::deque<std::shared_ptr<Task>> queue_ ABSL_GUARDED_BY(mu_);
  int64_t queued_rows_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  BatcherStats stats_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace tandem::serving

#endif  // TANDEM_SERVING_REST_BATCHER_H_

#include "serving/rest_batcher.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "framework/tensor/tensor.h"

namespace tandem::serving {

struct Batcher::Task {
  std::shared_ptr<const ExportedModel> model;
  NamedTensors inputs;
  int64_t rows = 0;
  absl::Time deadline;  // When it runs even if its batch is not full.
  absl::StatusOr<NamedTensors> result;
  absl::Notification done;
};

namespace {

bool SameExampleShape(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.rank() != b.rank() || a.rank() < 1) return false;
  for (int d = 1; d < a.rank(); ++d) {
    if (a.dim(d) != b.dim(d)) return false;
  }
  return true;
}

}  // namespace

bool Batcher::Compatible(const Task& a, const Task& b) {
  if (a.model != b.model || a.inputs.size() != b.inputs.size()) return false;
  for (const auto& [name, t] : a.inputs) {
    auto it = b.inputs.find(name);
    if (it == b.inputs.end() || !SameExampleShape(t, it->second)) return false;
  }
  return true;
}

absl::StatusOr<std::unique_ptr<Batcher>> Batcher::Create(const BatchingOptions& options) {
  if (options.max_batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_batch_size must be at least 1, not ", options.max_batch_size));
  }
  if (options.batch_timeout_micros < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch_timeout_micros must not be negative, not ", options.batch_timeout_micros));
  }
  if (options.num_batch_threads < 1 || options.num_batch_threads > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_batch_threads must be in [1, 256], not ", options.num_batch_threads));
  }
  if (options.max_enqueued_batches < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_enqueued_batches must be at least 1, not ",
                                                   options.max_enqueued_batches));
  }
  return std::unique_ptr<Batcher>(new Batcher(options));
}

Batcher::Batcher(const BatchingOptions& options) : options_(options) {
  if (!options_.enabled) return;
  for (int i = 0; i < options_.num_batch_threads; ++i)
    threads_.emplace_back([this] { BatchLoop(); });
}

Batcher::~Batcher() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
  absl::MutexLock lock(&mu_);
  for (const std::shared_ptr<Task>& task : queue_) {
    task->result = absl::UnavailableError("the server is stopping");
    task->done.Notify();
  }
  queue_.clear();
}

absl::StatusOr<NamedTensors> Batcher::Predict(std::shared_ptr<const ExportedModel> model,
                                              NamedTensors inputs, int64_t rows) {
  if (!options_.enabled || rows > options_.max_batch_size) {
    {
      absl::MutexLock lock(&mu_);
      ++stats_.requests;
      ++stats_.direct;
    }
    return model->Predict(inputs);
  }
  auto task = std::make_shared<Task>();
  task->model = std::move(model);
  task->inputs = std::move(inputs);
  task->rows = rows;
  task->deadline = absl::Now() + absl::Microseconds(options_.batch_timeout_micros);
  {
    absl::MutexLock lock(&mu_);
    ++stats_.requests;
    if (stopping_) return absl::UnavailableError("the server is stopping");
    const int64_t capacity = int64_t{options_.max_enqueued_batches} * options_.max_batch_size;
    if (queued_rows_ + rows > capacity) {
      ++stats_.rejected;
      return absl::UnavailableError(
          absl::StrCat("The batch scheduling queue to which this task was submitted is full (",
                       queued_rows_, " examples queued, at most ", capacity, ")"));
    }
    queue_.push_back(task);
    queued_rows_ += rows;
  }
  task->done.WaitForNotification();
  return std::move(task->result);
}

BatcherStats Batcher::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

bool Batcher::HasWork() const { return stopping_ || !queue_.empty(); }

bool Batcher::HeadReady() const {
  if (stopping_) return true;
  if (queue_.empty()) return false;
  const Task& head = *queue_.front();
  int64_t rows = 0;
  for (const std::shared_ptr<Task>& t : queue_) {
    if (!Compatible(head, *t)) continue;
    rows += t->rows;
    if (rows >= options_.max_batch_size) return true;
  }
  return false;
}

std::vector<std::shared_ptr<Batcher::Task>> Batcher::TakeBatch() {
  std::vector<std::shared_ptr<Task>> batch = {queue_.front()};
  queue_.pop_front();
  int64_t rows = batch[0]->rows;
  for (auto it = queue_.begin(); it != queue_.end() && rows < options_.max_batch_size;) {
    if (Compatible(*batch[0], **it) && rows + (*it)->rows <= options_.max_batch_size) {
      rows += (*it)->rows;
      batch.push_back(*it);
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  queued_rows_ -= rows;
  ++stats_.batches;
  if (batch.size() > 1) {
    ++stats_.merged_batches;
    stats_.merged_requests += static_cast<int64_t>(batch.size());
  }
  stats_.max_batch_rows = std::max(stats_.max_batch_rows, rows);
  return batch;
}

void Batcher::BatchLoop() {
  while (true) {
    std::vector<std::shared_ptr<Task>> batch;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &Batcher::HasWork));
      if (stopping_) return;
      const std::shared_ptr<Task> head = queue_.front();
      mu_.AwaitWithDeadline(absl::Condition(this, &Batcher::HeadReady), head->deadline);
      if (stopping_) return;
      // Another batch thread may have taken the head meanwhile: wait for the new one.
      if (queue_.empty() || queue_.front() != head) continue;
      batch = TakeBatch();
    }
    RunBatch(batch);
  }
}

void Batcher::RunBatch(const std::vector<std::shared_ptr<Task>>& batch) {
  const Task& head = *batch[0];
  auto finish = [&](const absl::Status& status) {
    for (const std::shared_ptr<Task>& t : batch) {
      t->result = status;
      t->done.Notify();
    }
  };
  if (batch.size() == 1) {
    batch[0]->result = head.model->Predict(head.inputs);
    batch[0]->done.Notify();
    return;
  }
  int64_t total = 0;
  for (const std::shared_ptr<Task>& t : batch) total += t->rows;
  NamedTensors merged;
  for (const auto& [name, first] : head.inputs) {
    TensorShape shape = first.shape();
    shape.set_dim(0, total);
    Tensor all(first.dtype(), shape);
    int64_t offset = 0;
    for (const std::shared_ptr<Task>& t : batch) {
      const Tensor& part = t->inputs.at(name);
      CopyElements(part, 0, all, offset, part.NumElements());
      offset += part.NumElements();
    }
    merged.emplace(name, std::move(all));
  }
  absl::StatusOr<NamedTensors> outputs = head.model->Predict(merged);
  if (!outputs.ok()) return finish(outputs.status());
  for (const auto& [name, t] : *outputs) {
    if (t.rank() < 1 || t.dim(0) != total) {
      return finish(absl::InternalError(
          absl::StrCat("output '", name, "' has shape ", t.shape().DebugString(),
                       " for a batch of ", total, ": it cannot be split between requests")));
    }
  }
  int64_t start = 0;
  for (const std::shared_ptr<Task>& t : batch) {
    NamedTensors mine;
    for (const auto& [name, out] : *outputs) mine.emplace(name, out.Slice(start, start + t->rows));
    start += t->rows;
    t->result = std::move(mine);
    t->done.Notify();
  }
}

}  // namespace tandem::serving

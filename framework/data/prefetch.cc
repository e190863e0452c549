// Dataset::Prefetch: the upstream iterator runs on a background thread that keeps up
// to `buffer_size` results (elements, the end marker or an error) in a bounded queue.
// With kAutotune the depth is kDefaultPrefetchDepth, and there is no thread where no
// CPU is free for one: the consumer's thread produces each element when it asks. No
// CPU is free in a process that can run on one only (env::UsableCpus; fashion_mlp's
// Estimator pinned to one core of the EPYC: 12.6% slower than a bare loop with a
// producer thread, 3.4% without), nor where the steps' threads (ScopedStepCpuThreads)
// hold every usable CPU.
#include <algorithm>
#include <deque>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/data/dataset.h"

namespace tandem::data {
namespace {

using NextResult = absl::StatusOr<std::optional<Element>>;

// Depth used for kAutotune.
constexpr int64_t kDefaultPrefetchDepth = 4;

thread_local int step_cpu_threads = 0;  // ScopedStepCpuThreads' value; 0: not known.

// Whether a producer thread would have a CPU of its own (kAutotune): the steps' threads,
// or at least the consumer's own, leave one free.
bool CpuFreeForProducer() { return std::max(step_cpu_threads, 1) < env::UsableCpus(); }

class PrefetchIterator : public Iterator {
 public:
  PrefetchIterator(std::unique_ptr<Iterator> in, int64_t buffer_size)
      : in_(std::move(in)), buffer_size_(buffer_size) {
    thread_ = std::thread([this] { Produce(); });
  }

  ~PrefetchIterator() override {
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
    }
    thread_.join();  // The producer sees cancelled_ after at most one upstream GetNext.
  }

  NextResult GetNext() override {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &PrefetchIterator::HasResultOrDone));
    if (queue_.empty()) {  // The producer has exited after the end or an error.
      if (!last_error_.ok()) return last_error_;
      return std::nullopt;
    }
    NextResult r = std::move(queue_.front());
    queue_.pop_front();
    if (!r.ok()) last_error_ = r.status();
    return r;
  }

 private:
  bool HasResultOrDone() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() || producer_done_;
  }
  bool HasRoomOrCancelled() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return cancelled_ || static_cast<int64_t>(queue_.size()) < buffer_size_;
  }

  void Produce() {
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(this, &PrefetchIterator::HasRoomOrCancelled));
        if (cancelled_) return;
      }
      NextResult r = in_->GetNext();  // Only this thread touches in_ from here on.
      const bool last = !r.ok() || !r->has_value();
      absl::MutexLock lock(&mu_);
      queue_.push_back(std::move(r));
      if (last) {
        producer_done_ = true;
        return;
      }
    }
  }

  std::unique_ptr<Iterator> in_;
  const int64_t buffer_size_;
  absl::Mutex mu_;
  std::deque<NextResult> queue_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool producer_done_ ABSL_GUARDED_BY(mu_) = false;  // It pushed the end or an error.
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);     // Repeated after the producer ends.
  std::thread thread_;
};

class PrefetchDataset : public Dataset {
 public:
  PrefetchDataset(DatasetPtr input, int64_t buffer_size)
      : input_(std::move(input)), buffer_size_(buffer_size) {}
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator() const override {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Iterator> in, input_->MakeIterator());
    if (buffer_size_ == kAutotune && !CpuFreeForProducer()) return in;
    const int64_t depth = buffer_size_ == kAutotune ? kDefaultPrefetchDepth : buffer_size_;
    return std::unique_ptr<Iterator>(new PrefetchIterator(std::move(in), depth));
  }
  std::string DebugString() const override {
    return buffer_size_ == kAutotune ? "Prefetch(auto)"
                                     : absl::StrCat("Prefetch(", buffer_size_, ")");
  }

 private:
  DatasetPtr input_;
  int64_t buffer_size_;
};

}  // namespace

ScopedStepCpuThreads::ScopedStepCpuThreads(int cpu_threads) : saved_(step_cpu_threads) {
  step_cpu_threads = std::max(cpu_threads, 0);
}
ScopedStepCpuThreads::~ScopedStepCpuThreads() { step_cpu_threads = saved_; }
int ScopedStepCpuThreads::Current() { return step_cpu_threads; }

DatasetPtr Dataset::Prefetch(int64_t buffer_size) const {
  if (buffer_size < 1 && buffer_size != kAutotune) {
    return ErrorDataset(absl::InvalidArgumentError(
        absl::StrCat("Prefetch: buffer_size must be >= 1 or kAutotune, got ", buffer_size)));
  }
  return std::make_shared<PrefetchDataset>(self(), buffer_size);
}

}  // namespace tandem::data

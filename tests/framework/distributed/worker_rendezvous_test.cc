// Tests of WorkerRendezvous's remote receives of chunked tensors: the chunks after the
// first go out several at a time, their replies may come back in any order, and a
// reply that does not fit fails the receive once, even when the other replies arrive
// after the rendezvous is gone. Also the server side's stash, which keeps a chunked
// value until its last chunk is taken.
#include "framework/distributed/worker_rendezvous.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "framework/core/thread_pool.h"
#include "gtest/gtest.h"
#include "tests/util/one_worker_cache.h"

namespace tandem {
namespace {

const char kPsDevice[] = "/job:ps/replica:0/task:0/device:CPU:0";
const char kWorkerTask[] = "/job:worker/replica:0/task:0";

// Serves RecvTensor from one tensor in chunks, as Worker does, and answers each call
// from a pool after a random delay, so replies race and arrive out of order. The
// chunk at `bad_offset` (if any) comes back one byte short.
class ChunkServingWorker : public WorkerInterface {
 public:
  ChunkServingWorker(Tensor value, uint64_t chunk) : value_(value), chunk_(chunk) {}

  void RecvTensorAsync(CallOptions*, const WireMessage<proto::RecvTensorRequest>* request,
                       WireMessage<proto::RecvTensorResponse>* response,
                       StatusCallback done) override {
    const uint64_t offset = request->proto.offset();
    const uint64_t total = value_.TotalBytes();
    uint64_t n = std::min(chunk_, total - offset);
    if (offset == bad_offset) --n;
    proto::RecvTensorResponse& r = response->proto;
    r.set_chunked(true);
    r.set_offset(offset);
    r.set_total_bytes(total);
    r.set_dtype(static_cast<proto::DataType>(value_.dtype()));
    for (int64_t d : value_.shape().dims()) r.add_dim(d);
    response->tensors = {value_.ByteRange(offset, n)};
    int delay_us;
    {
      absl::MutexLock lock(&mu_);
      asked_.push_back(offset);
      max_in_flight_ = std::max(max_in_flight_, ++in_flight_);
      ++unanswered_;
      delay_us = static_cast<int>(rng_() % max_delay_us);
    }
    pool_.Schedule([this, delay_us, done = std::move(done)] {
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
      {
        absl::MutexLock lock(&mu_);
        --in_flight_;  // The caller may ask for the next chunk from `done`.
      }
      done(absl::OkStatus());
      absl::MutexLock lock(&mu_);
      --unanswered_;
    });
  }

#define TANDEM_NOT_SERVED(Name) \
  TANDEM_RPC_OVERRIDE(Name) { done(absl::UnimplementedError(#Name " is not served here")); }
  TANDEM_NOT_SERVED(GetStatus)
  TANDEM_NOT_SERVED(CreateWorkerSession)
  TANDEM_NOT_SERVED(DeleteWorkerSession)
  TANDEM_NOT_SERVED(RegisterGraph)
  TANDEM_NOT_SERVED(DeregisterGraph)
  TANDEM_NOT_SERVED(RunGraph)
  TANDEM_NOT_SERVED(CleanupGraph)
  TANDEM_NOT_SERVED(CleanupAll)
  TANDEM_NOT_SERVED(Shutdown)
  TANDEM_NOT_SERVED(CollectiveData)
  TANDEM_NOT_SERVED(CollectiveJoin)
#undef TANDEM_NOT_SERVED

  std::vector<uint64_t> asked() {
    absl::MutexLock lock(&mu_);
    return asked_;
  }
  int max_in_flight() {
    absl::MutexLock lock(&mu_);
    return max_in_flight_;
  }
  // Waits until every call has been answered.
  void Drain() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int* n) { return *n == 0; }, &in_flight_));
  }
  uint64_t bad_offset = ~uint64_t{0};
  int max_delay_us = 2000;

 private:
  const Tensor value_;
  const uint64_t chunk_;
  absl::Mutex mu_;
  std::vector<uint64_t> asked_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int max_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int unanswered_ ABSL_GUARDED_BY(mu_) = 0;  // Calls whose `done` has not returned.
  std::mt19937 rng_ ABSL_GUARDED_BY(mu_){7};
  ThreadPool pool_{"chunk_replies", 4};  // Last: joined before the rest goes.
};

struct Received {
  absl::Mutex mu;
  absl::Status status;
  Tensor value;
  int calls = 0;
};

// Receives the ps's "x:0" into a worker's step rendezvous, which is destroyed as soon
// as the receive is done (chunk calls may still be out, as when a step fails).
std::shared_ptr<Received> ReceiveFromPs(WorkerInterface* ps) {
  testing::OneWorkerCache cache(ps);
  auto rendezvous = std::make_unique<WorkerRendezvous>(kWorkerTask, 1, &cache);
  auto key = ParseRendezvousKey(
      CreateRendezvousKey(kPsDevice, 1, std::string(kWorkerTask) + "/device:CPU:0", "x:0"));
  EXPECT_TRUE(key.ok()) << key.status();
  auto got = std::make_shared<Received>();
  auto first = std::make_shared<absl::Notification>();
  rendezvous->RecvAsync(*key, [got, first](const absl::Status& s, const Tensor& v, bool) {
    absl::MutexLock lock(&got->mu);
    if (++got->calls == 1) {
      got->status = s;
      got->value = v;
      first->Notify();
    }
  });
  EXPECT_TRUE(first->WaitForNotificationWithTimeout(absl::Seconds(30)));
  return got;
}

Tensor Counting(int64_t n) {
  Tensor t(DType::kFloat, TensorShape({n}));
  for (int64_t i = 0; i < n; ++i) t.flat<float>()[i] = static_cast<float>(i);
  return t;
}

TEST(WorkerRendezvousTest, ChunksAfterTheFirstGoOutTogetherAndLandInPlace) {
  const int64_t n = (1 << 18) + 3;  // 1 MiB and 12 bytes of floats: a short last chunk.
  const uint64_t chunk = 64 << 10;
  Tensor value = Counting(n);
  ChunkServingWorker ps(value, chunk);
  std::shared_ptr<Received> got = ReceiveFromPs(&ps);
  ps.Drain();
  absl::MutexLock lock(&got->mu);
  ASSERT_TRUE(got->status.ok()) << got->status;
  EXPECT_EQ(got->calls, 1);
  ASSERT_EQ(got->value.NumElements(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got->value.flat<float>()[i], static_cast<float>(i));
  // Every chunk asked for once, the first alone and then up to kChunksInFlight at once.
  std::vector<uint64_t> asked = ps.asked();
  ASSERT_FALSE(asked.empty());
  EXPECT_EQ(asked[0], 0u);
  std::set<uint64_t> distinct(asked.begin(), asked.end());
  EXPECT_EQ(distinct.size(), asked.size());
  EXPECT_EQ(asked.size(), (value.TotalBytes() + chunk - 1) / chunk);
  EXPECT_EQ(ps.max_in_flight(), WorkerRendezvous::kChunksInFlight);
}

TEST(WorkerRendezvousTest, AChunkThatDoesNotFitFailsTheReceiveOnce) {
  Tensor value = Counting(1 << 18);
  ChunkServingWorker ps(value, 64 << 10);
  ps.bad_offset = 3 * (64 << 10);
  ps.max_delay_us = 20000;  // Other chunks are still out when the bad one fails.
  std::shared_ptr<Received> got = ReceiveFromPs(&ps);
  ps.Drain();  // Their replies reach a rendezvous that is gone, and must not call again.
  absl::MutexLock lock(&got->mu);
  EXPECT_EQ(got->status.code(), absl::StatusCode::kInternal) << got->status;
  EXPECT_NE(got->status.message().find("does not fit chunks of 65536"), std::string::npos)
      << got->status;
  EXPECT_NE(got->status.message().find("from /job:ps/replica:0/task:0"), std::string::npos);
  EXPECT_EQ(got->calls, 1);
}

TEST(WorkerRendezvousTest, AStashIsDroppedWhenItsLastChunkIsTaken) {
  testing::OneWorkerCache cache(nullptr);
  WorkerRendezvous r("/job:ps/replica:0/task:0", 1, &cache);
  Tensor value = Counting(10);
  r.Stash("k", value, 2);
  auto a = r.TakeChunk("k");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->SharesBufferWith(value));
  EXPECT_TRUE(r.TakeChunk("k").ok());
  EXPECT_EQ(r.TakeChunk("k").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.TakeChunk("never").status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(TensorTest, ByteRangeViewsBytesOfTheSameBuffer) {
  Tensor value = Counting(4);
  Tensor bytes = value.ByteRange(4, 8);
  EXPECT_EQ(bytes.dtype(), DType::kUInt8);
  EXPECT_EQ(bytes.NumElements(), 8);
  EXPECT_TRUE(bytes.SharesBufferWith(value));
  EXPECT_EQ(bytes.raw_data(), value.raw_data() + 4);
  Tensor again = value.Slice(1, 3).ByteRange(4, 4);  // Offsets add up.
  EXPECT_EQ(again.raw_data(), value.raw_data() + 8);
}

}  // namespace
}  // namespace tandem

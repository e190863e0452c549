// framework/distributed/collective/collective_algorithms.cc
//
// The collectives of CollectiveExecutor as continuation chains: each step posts its
// sends and asks for the piece it needs next; the piece's arrival runs the next step.
// No thread waits. A Run counts what is outstanding (sends not yet acknowledged,
// chains not yet at their end) and finishes when nothing is.
//
// Ring all-reduce on N members, rank r, left = r-1, right = r+1 (mod N); each lane of
// the buffer is cut into N segments:
//   reduce-scatter, phase p = 0..N-2: send segment (r-p) to the right; receive segment
//     (r-p-1) from the left and add it into ours. Afterwards segment (r+1) is complete.
//   all-gather, phase N-1+q, q = 0..N-2: send segment (r+1-q) to the right (q = 0: ours;
//     else the one just received); receive segment (r-q) from the left.
// A segment that was sent is never written while its send may be in flight: the
// all-gather's segments are copied into the buffer only once every send is
// acknowledged.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "framework/core/denormal.h"
#include "framework/distributed/collective/collective_executor.h"

namespace tandem {
namespace {

int Mod(int a, int n) { return ((a % n) + n) % n; }

// Runs on whichever thread received `src` (an RPC thread): flushes denormals as the
// kernels do.
void AddInto(float* __restrict dst, const float* __restrict src, int64_t n) {
  ScopedFlushDenormals flush;
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

void Scale(float* p, int64_t n, float scale) {
  if (scale == 1.0f) return;
  ScopedFlushDenormals flush;
  for (int64_t i = 0; i < n; ++i) p[i] *= scale;
}

// RecvFrom's expected size of a piece whose size only its sender knows.
constexpr size_t kAnyBytes = ~size_t{0};

// Phase of the result a folded-in rank of recursive doubling receives.
constexpr int kFoldResultPhase = 1000;

}  // namespace

class CollectiveExecutor::Run : public std::enable_shared_from_this<CollectiveExecutor::Run> {
 public:
  Run(CollectiveExecutor* ex, const CollectiveExecutor::Start& start, int64_t instance, Done done)
      : ex_(ex),
        generation_(start.generation),
        instance_(instance),
        sequence_(start.sequence),
        rank_(start.rank),
        size_(start.size),
        stop_snapshot_(ex->stop_requested_.load()),
        done_(std::move(done)) {}

  // What runs once nothing is outstanding, before `done` (only when every part succeeded).
  std::function<void()> on_success;
  // True when this member or a peer whose data reached it asked to stop.
  bool stop_known() const { return stop_snapshot_ || heard_stop_; }

  // Counts one outstanding part (a send or a chain).
  void Hold() { outstanding_.fetch_add(1); }
  // Ends one part; the last ends the run.
  void Release(const absl::Status& s) {
    if (!s.ok()) {
      absl::MutexLock lock(&mu_);
      if (status_.ok()) status_ = s;
    }
    if (outstanding_.fetch_sub(1) != 1) return;
    absl::Status final_status;
    {
      absl::MutexLock lock(&mu_);
      final_status = status_;
    }
    if (final_status.ok() && on_success) on_success();
    done_(final_status);
  }

  Key KeyFor(int phase, int piece, int src) const {
    return Key{generation_, instance_, sequence_, phase, piece, src};
  }
  void SendTo(int peer, int phase, int piece, Tensor bytes) {
    Hold();
    ex_->Send(KeyFor(phase, piece, rank_), peer, std::move(bytes), stop_known(),
              [self = shared_from_this()](const absl::Status& s) { self->Release(s); });
  }
  // Asks for (phase, piece) from `src`; `next` runs with its bytes, which must be
  // `expect_bytes` long (kAnyBytes: any length). Holds the run until `next` returns.
  void RecvFrom(int src, int phase, int piece, size_t expect_bytes,
                std::function<void(Tensor)> next) {
    Hold();
    ex_->Recv(KeyFor(phase, piece, src),
              [self = shared_from_this(), src, expect_bytes, next = std::move(next)](
                  const absl::Status& s, Tensor data, bool stop) {
                if (!s.ok()) {
                  self->Release(s);
                  return;
                }
                if (expect_bytes != kAnyBytes && data.TotalBytes() != expect_bytes) {
                  self->Release(absl::InternalError(absl::StrCat(
                      "collective: ", self->ex_->MemberName(src), " sent ", data.TotalBytes(),
                      " bytes where ", expect_bytes, " were expected (different graphs?)")));
                  return;
                }
                if (stop) self->heard_stop_ = true;
                next(std::move(data));
                self->Release(absl::OkStatus());
              });
  }

  CollectiveExecutor* ex() const { return ex_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  CollectiveExecutor* const ex_;
  const uint64_t generation_;
  const int64_t instance_;
  const int64_t sequence_;
  const int rank_;
  const int size_;
  const bool stop_snapshot_;
  std::atomic<bool> heard_stop_{false};
  const Done done_;
  std::atomic<int> outstanding_{0};
  absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

namespace {

// One lane of a ring all-reduce over floats [lo, hi) of `data`.
struct RingLane {
  Tensor data;
  int64_t lo = 0, hi = 0;
  int lane = 0;
  float scale = 1.0f;
  std::vector<Tensor> gathered;  // By segment: what the all-gather received.

  int64_t SegBegin(int seg, int n) const { return lo + (hi - lo) * seg / n; }
  size_t SegBytes(int seg, int n) const {
    return static_cast<size_t>(SegBegin(seg + 1, n) - SegBegin(seg, n)) * sizeof(float);
  }
  Tensor SegView(int seg, int n) const {
    return data.ByteRange(static_cast<size_t>(SegBegin(seg, n)) * sizeof(float), SegBytes(seg, n));
  }
  float* SegData(int seg, int n) const { return data.data<float>() + SegBegin(seg, n); }
};

}  // namespace

// The algorithms; a friend of CollectiveExecutor, for its Run.
struct CollectiveAlgorithms {
  using RunPtr = std::shared_ptr<CollectiveExecutor::Run>;

  static void Ring(RunPtr run, std::shared_ptr<RingLane> lane, int phase) {
    const int n = run->size(), r = run->rank();
    const int right = Mod(r + 1, n), left = Mod(r - 1, n);
    if (phase < n - 1) {
      const int send_seg = Mod(r - phase, n), recv_seg = Mod(r - phase - 1, n);
      run->SendTo(right, phase, lane->lane, lane->SegView(send_seg, n));
      run->RecvFrom(left, phase, lane->lane, lane->SegBytes(recv_seg, n),
                    [run, lane, phase, recv_seg, n](Tensor got) {
                      AddInto(lane->SegData(recv_seg, n),
                              reinterpret_cast<const float*>(got.raw_data()),
                              static_cast<int64_t>(got.TotalBytes() / sizeof(float)));
                      Ring(run, lane, phase + 1);
                    });
      return;
    }
    if (phase < 2 * n - 2) {
      const int q = phase - (n - 1);
      const int send_seg = Mod(r + 1 - q, n), recv_seg = Mod(r - q, n);
      // Segment r + 1 is complete here: scale it once, before anyone gets it.
      if (q == 0) {
        Scale(lane->SegData(send_seg, n), static_cast<int64_t>(lane->SegBytes(send_seg, n) / 4),
              lane->scale);
      }
      run->SendTo(right, phase, lane->lane,
                  q == 0 ? lane->SegView(send_seg, n) : lane->gathered[send_seg]);
      run->RecvFrom(left, phase, lane->lane, lane->SegBytes(recv_seg, n),
                    [run, lane, phase, recv_seg](Tensor got) {
                      lane->gathered[recv_seg] = std::move(got);
                      Ring(run, lane, phase + 1);
                    });
    }
  }

  static void StartRing(RunPtr run, Tensor data, uint64_t piece_bytes, float scale) {
    const int n = run->size();
    const int64_t count = data.NumElements();
    const int64_t lanes = std::max<int64_t>(
        1, std::min<int64_t>(count / n, (count * 4 + piece_bytes - 1) / piece_bytes));
    std::vector<std::shared_ptr<RingLane>> all;
    for (int64_t l = 0; l < lanes; ++l) {
      auto lane = std::make_shared<RingLane>();
      lane->data = data;
      lane->lo = count * l / lanes;
      lane->hi = count * (l + 1) / lanes;
      lane->lane = static_cast<int>(l);
      lane->scale = scale;
      lane->gathered.resize(n);
      all.push_back(lane);
    }
    run->on_success = [all, n, r = run->rank()] {
      for (const auto& lane : all) {
        for (int seg = 0; seg < n; ++seg) {
          if (seg == Mod(r + 1, n)) continue;  // Reduced here.
          const Tensor& got = lane->gathered[seg];
          if (got.TotalBytes() > 0)
            std::memcpy(lane->SegData(seg, n), got.raw_data(), got.TotalBytes());
        }
      }
    };
    run->Hold();
    for (const auto& lane : all) Ring(run, lane, 0);
    run->Release(absl::OkStatus());
  }

  // Recursive doubling; ranks below 2 * rem fold pairwise into the odd one first.
  struct Doubling : std::enable_shared_from_this<Doubling> {
    RunPtr run;
    Tensor data;
    float scale = 1.0f;
    int p2 = 1, rem = 0, new_rank = 0;

    int Real(int nr) const { return nr < rem ? 2 * nr + 1 : nr + rem; }
    Tensor Whole() const { return data.DeepCopy().ByteRange(0, data.TotalBytes()); }
    void Add(const Tensor& got) const {
      AddInto(data.data<float>(), reinterpret_cast<const float*>(got.raw_data()),
              data.NumElements());
    }
    // Level k exchanges with new_rank ^ (1 << k); after the last level the folded-in
    // partner gets the result.
    void Level(int k) {
      const int r = run->rank();
      if ((1 << k) >= p2) {
        Scale(data.data<float>(), data.NumElements(), scale);
        if (r < 2 * rem) run->SendTo(r - 1, kFoldResultPhase, 0, Whole());
        return;
      }
      const int partner = Real(new_rank ^ (1 << k));
      run->SendTo(partner, 1 + k, 0, Whole());
      run->RecvFrom(partner, 1 + k, 0, data.TotalBytes(),
                    [self = shared_from_this(), k](Tensor got) {
                      self->Add(got);
                      self->Level(k + 1);
                    });
    }
  };

  static void StartDoubling(RunPtr run, Tensor data, float scale) {
    const int n = run->size(), r = run->rank();
    auto d = std::make_shared<Doubling>();
    d->run = run;
    d->data = data;
    d->scale = scale;
    while (d->p2 * 2 <= n) d->p2 *= 2;
    d->rem = n - d->p2;
    run->Hold();
    if (r < 2 * d->rem && r % 2 == 0) {
      run->SendTo(r + 1, 0, 0, d->Whole());
      run->RecvFrom(r + 1, kFoldResultPhase, 0, data.TotalBytes(), [data](Tensor got) {
        std::memcpy(data.raw_data(), got.raw_data(), got.TotalBytes());
      });
    } else if (r < 2 * d->rem) {
      d->new_rank = r / 2;
      run->RecvFrom(r - 1, 0, 0, data.TotalBytes(), [d](Tensor got) {
        d->Add(got);
        d->Level(0);
      });
    } else {
      d->new_rank = r - d->rem;
      d->Level(0);
    }
    run->Release(absl::OkStatus());
  }
};

void CollectiveExecutor::AllReduceSum(int64_t instance_key, Tensor data, Done done, float scale) {
  if (data.dtype() != DType::kFloat) {
    done(absl::InvalidArgumentError("collective all-reduce: float32 data only"));
    return;
  }
  absl::StatusOr<Start> start = Begin(instance_key);
  if (start.ok() && start->size == 1) Scale(data.data<float>(), data.NumElements(), scale);
  if (!start.ok() || start->size == 1) {
    done(start.status());
    return;
  }
  auto run = std::make_shared<Run>(this, *start, instance_key, std::move(done));
  auto* raw = run.get();
  // The stop mark counts once the whole collective is through.
  auto agreed = [this, raw] {
    if (raw->stop_known()) stop_agreed_ = true;
  };
  if (data.TotalBytes() <= start->options.small_bytes || data.NumElements() < start->size) {
    run->on_success = agreed;
    CollectiveAlgorithms::StartDoubling(run, data, scale);
  } else {
    CollectiveAlgorithms::StartRing(run, data, start->options.piece_bytes, scale);
    std::function<void()> copy = run->on_success;
    run->on_success = [copy, agreed] {
      copy();
      agreed();
    };
  }
}

void CollectiveExecutor::Broadcast(int64_t instance_key, Tensor data, Done done) {
  absl::StatusOr<Start> start = Begin(instance_key);
  if (!start.ok() || start->size == 1) {
    done(start.status());
    return;
  }
  const int rank = start->rank, size = start->size, source = start->source;
  const uint64_t piece_bytes = start->options.piece_bytes;
  auto run = std::make_shared<Run>(this, *start, instance_key, std::move(done));
  const size_t total = data.TotalBytes();
  const int64_t pieces = std::max<int64_t>(1, (total + piece_bytes - 1) / piece_bytes);
  run->Hold();
  for (int64_t p = 0; p < pieces; ++p) {
    const size_t lo = total * p / pieces, hi = total * (p + 1) / pieces;
    if (rank == source) {
      for (int peer = 0; peer < size; ++peer) {
        if (peer != source) run->SendTo(peer, 0, static_cast<int>(p), data.ByteRange(lo, hi - lo));
      }
    } else {
      run->RecvFrom(source, 0, static_cast<int>(p), hi - lo, [data, lo](Tensor got) {
        std::memcpy(data.raw_data() + lo, got.raw_data(), got.TotalBytes());
      });
    }
  }
  run->Release(absl::OkStatus());
}

void CollectiveExecutor::AllGather(int64_t instance_key, Tensor data,
                                   std::function<void(absl::StatusOr<std::vector<Tensor>>)> done,
                                   bool same_size) {
  absl::StatusOr<Start> start = Begin(instance_key);
  if (!start.ok()) {
    done(start.status());
    return;
  }
  const int rank = start->rank, size = start->size;
  auto gathered = std::make_shared<std::vector<Tensor>>(size);
  const size_t bytes = data.TotalBytes();
  (*gathered)[rank] = data.ByteRange(0, bytes);
  auto run = std::make_shared<Run>(this, *start, instance_key,
                                   [gathered, done = std::move(done)](const absl::Status& s) {
                                     if (!s.ok()) {
                                       done(s);
                                       return;
                                     }
                                     done(std::move(*gathered));
                                   });
  auto* raw = run.get();
  run->on_success = [this, raw] {
    if (raw->stop_known()) stop_agreed_ = true;
  };
  run->Hold();
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    run->SendTo(peer, 0, 0, data.ByteRange(0, bytes));
    run->RecvFrom(peer, 0, 0, same_size ? bytes : kAnyBytes,
                  [gathered, peer](Tensor got) { (*gathered)[peer] = std::move(got); });
  }
  run->Release(absl::OkStatus());
}

}  // namespace tandem

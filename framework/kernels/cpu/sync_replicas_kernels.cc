// framework/kernels/cpu/sync_replicas_kernels.cc
//
// CPU kernels of the synchronous-replicas ops (framework/ops/sync_replicas.h): a
// GradientAccumulator per variable and one StepBarrier, both resources of the device
// they run on (a ps), found by the node's `shared_name` and created on first use.
//
//   GradientAccumulator: the sum of the gradients of its current step, the replicas
//     that sent them, its step, and counts of stale and duplicate gradients. Take
//     returns the mean, clears the sum and advances the step by one. A sparse one
//     (the Sparse* ops) sums rows: each row a gradient names is added to that row's
//     sum, and Take returns the rows any gradient named, ascending, each divided by the
//     number of gradients taken, so the mean equals the dense accumulator's on every
//     row (TensorFlow's SparseConditionalAccumulator divides a row by the number of
//     gradients that named it instead, which a dense mean does not).
//   StepBarrier: the global step of the last aggregated update; replicas wait on it
//     for the next one.
//
// The waiting ops (AccumulatorWait, SyncStepWait) are asynchronous: they park a
// callback, completed by the op that satisfies them or by a shared timer thread at
// their timeout, and hold no executor thread meanwhile.
#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/cpu_kernels.h"
#include "framework/kernels/kernel_registry.h"
#include "framework/kernels/op_kernel.h"
#include "framework/kernels/resource_mgr.h"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;

// One thread running callbacks at their deadlines (the timeouts of waiting ops).
class Timer {
 public:
  static Timer& Get() {
    static Timer* timer = new Timer;  // Never destroyed: waits may outlive main.
    return *timer;
  }
  // Runs `fn` at `when` unless Cancel(id) came first.
  int64_t Schedule(Clock::time_point when, std::function<void()> fn) {
    absl::MutexLock lock(&mu_);
    const int64_t id = next_id_++;
    queue_.emplace(std::make_pair(when, id), std::move(fn));
    cv_.Signal();
    return id;
  }
  // True if the callback was removed before it ran.
  bool Cancel(int64_t id) {
    absl::MutexLock lock(&mu_);
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (it->first.second == id) {
        queue_.erase(it);
        return true;
      }
    }
    return false;
  }

 private:
  Timer() {
    std::thread([this] { Loop(); }).detach();
  }
  void Loop() {
    absl::MutexLock lock(&mu_);
    while (true) {
      if (queue_.empty()) {
        cv_.Wait(&mu_);
        continue;
      }
      auto first = queue_.begin();
      const Clock::time_point now = Clock::now();
      if (now < first->first.first) {
        cv_.WaitWithTimeout(&mu_, absl::FromChrono(first->first.first - now));
        continue;
      }
      std::function<void()> fn = std::move(first->second);
      queue_.erase(first);
      mu_.Unlock();
      fn();
      mu_.Lock();
    }
  }

  absl::Mutex mu_;
  absl::CondVar cv_;
  std::map<std::pair<Clock::time_point, int64_t>, std::function<void()>> queue_
      ABSL_GUARDED_BY(mu_);
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
};

// A parked waiter: `ready` decides, under the resource's lock, whether it may
// complete; `finish` completes it (outside the lock). Completed exactly once: by the
// resource when ready, or by the timer.
struct Waiter {
  std::function<bool()> ready;
  std::function<void(bool timed_out)> finish;
  int64_t timer_id = -1;
  bool done = false;
};

// Waiters of one resource, completed when a change makes them ready.
class WaiterList {
 public:
  // Parks `w` (its timeout after `timeout_ms`), or completes it at once when ready.
  void Add(absl::Mutex* mu, std::shared_ptr<Waiter> w, int64_t timeout_ms) {
    {
      absl::MutexLock lock(mu);
      if (!w->ready()) {
        waiters_.push_back(w);
        w->timer_id =
            Timer::Get().Schedule(Clock::now() + std::chrono::milliseconds(timeout_ms), [mu, w] {
              {
                absl::MutexLock lock(mu);
                if (w->done) return;
                w->done = true;
              }
              w->finish(/*timed_out=*/true);
            });
        return;
      }
      w->done = true;
    }
    w->finish(false);
  }
  // Under the resource's lock: removes the waiters now ready and returns them; the
  // caller finishes them after unlocking.
  std::vector<std::shared_ptr<Waiter>> TakeReady() {
    std::vector<std::shared_ptr<Waiter>> ready;
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if ((*it)->done) {
        it = waiters_.erase(it);
      } else if ((*it)->ready()) {
        (*it)->done = true;
        Timer::Get().Cancel((*it)->timer_id);
        ready.push_back(*it);
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
    return ready;
  }

 private:
  std::vector<std::shared_ptr<Waiter>> waiters_;
};

void FinishAll(const std::vector<std::shared_ptr<Waiter>>& ready) {
  for (const auto& w : ready) w->finish(false);
}

class GradientAccumulator : public ResourceBase {
 public:
  explicit GradientAccumulator(TensorShape shape) : shape_(std::move(shape)) {}
  std::string DebugString() const override {
    return absl::StrCat("GradientAccumulator", shape_.DebugString());
  }
  const TensorShape& shape() const { return shape_; }

  absl::Mutex mu;
  int64_t step ABSL_GUARDED_BY(mu) = 0;
  int64_t count ABSL_GUARDED_BY(mu) = 0;
  int64_t stale ABSL_GUARDED_BY(mu) = 0;
  int64_t duplicates ABSL_GUARDED_BY(mu) = 0;
  std::set<int64_t> replicas ABSL_GUARDED_BY(mu);  // Those that sent a gradient at `step`.
  Tensor sum ABSL_GUARDED_BY(mu);
  // Sparse: row index -> its offset in row_sums (row_width floats each).
  absl::flat_hash_map<int64_t, int64_t> row_at ABSL_GUARDED_BY(mu);
  std::vector<float> row_sums ABSL_GUARDED_BY(mu);
  WaiterList waiters ABSL_GUARDED_BY(mu);

  // Forgets the gradients of the current step.
  void Clear() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    sum = Tensor();
    row_at.clear();
    row_sums.clear();
    count = 0;
    replicas.clear();
  }
  // Whether a gradient of `replica` at `local_step` counts (else it is counted as
  // stale or duplicate).
  bool Admit(int64_t local_step, int64_t replica) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (local_step < step) {
      ++stale;
      return false;
    }
    if (!replicas.insert(replica).second) {
      ++duplicates;
      return false;
    }
    return true;
  }

 private:
  const TensorShape shape_;
};

class StepBarrier : public ResourceBase {
 public:
  std::string DebugString() const override { return "StepBarrier"; }
  absl::Mutex mu;
  int64_t step ABSL_GUARDED_BY(mu) = -1;  // -1 until the chief sets it.
  WaiterList waiters ABSL_GUARDED_BY(mu);
};

absl::Status ScalarInput(const OpKernelContext& ctx, int i, DType dtype, const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.dtype() != dtype || t.NumElements() != 1) {
    return ctx.Error(absl::StrCat(what, " must be a ", DTypeName(dtype), " scalar, got ",
                                  DTypeName(t.dtype()), t.shape().DebugString()));
  }
  return absl::OkStatus();
}

// The GradientAccumulator a node names by its shared_name and shape attrs.
struct AccumulatorRef {
  std::string name;
  TensorShape shape;

  absl::Status Init(const Node& node) {
    TANDEM_ASSIGN_OR_RETURN(name, GetAttr<std::string>(node.attrs(), "shared_name"));
    TANDEM_ASSIGN_OR_RETURN(PartialShape partial, GetAttr<PartialShape>(node.attrs(), "shape"));
    if (!partial.IsFullyDefined()) {
      return absl::InvalidArgumentError(absl::StrCat(node.name(), ": the accumulator's shape ",
                                                     partial.DebugString(),
                                                     " is not fully defined"));
    }
    TANDEM_ASSIGN_OR_RETURN(shape, TensorShape::Create(partial.dims()));
    return absl::OkStatus();
  }
  absl::StatusOr<std::shared_ptr<GradientAccumulator>> Get(OpKernelContext& ctx) const {
    TANDEM_ASSIGN_OR_RETURN(
        auto acc, ctx.resources()->LookupOrCreate<GradientAccumulator>(
                      "", name, [this] { return std::make_shared<GradientAccumulator>(shape); }));
    if (acc->shape() != shape) {
      return ctx.Error(absl::StrCat("accumulator ", name, " has shape ", acc->shape().DebugString(),
                                    ", not ", shape.DebugString()));
    }
    return acc;
  }
};

class AccumulatorKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override { return ref_.Init(node); }

 protected:
  absl::StatusOr<std::shared_ptr<GradientAccumulator>> Get(OpKernelContext& ctx) const {
    return ref_.Get(ctx);
  }
  // The apply kernels' inputs 0 and 1: local_step and replica (int64 scalars).
  static absl::Status StepAndReplica(const OpKernelContext& ctx) {
    TANDEM_RETURN_IF_ERROR(ScalarInput(ctx, 0, DType::kInt64, "local_step"));
    return ScalarInput(ctx, 1, DType::kInt64, "replica");
  }
  // Adds one replica's gradient (`add`, under the lock) when the accumulator admits it
  // (inputs local_step and replica), then wakes the waiters that completes.
  template <typename Add>
  static void Accumulate(OpKernelContext& ctx, GradientAccumulator& acc, Add add) {
    std::vector<std::shared_ptr<Waiter>> ready;
    {
      absl::MutexLock lock(&acc.mu);
      if (acc.Admit(ctx.input(0).scalar<int64_t>(), ctx.input(1).scalar<int64_t>())) {
        add(acc);
        ++acc.count;
        ready = acc.waiters.TakeReady();
      }
    }
    FinishAll(ready);
  }
  // Runs `take` on the accumulator, under its lock, once it holds num_required (input
  // 0, int32; at least 1) gradients; FAILED_PRECONDITION naming the counts before.
  template <typename Take>
  absl::Status TakeWhenEnough(OpKernelContext& ctx, Take take) const {
    TANDEM_RETURN_IF_ERROR(ScalarInput(ctx, 0, DType::kInt32, "num_required"));
    const int64_t required = std::max<int64_t>(1, ctx.input(0).scalar<int32_t>());
    TANDEM_ASSIGN_OR_RETURN(auto acc, Get(ctx));
    absl::MutexLock lock(&acc->mu);
    if (acc->count < required) {
      return absl::FailedPreconditionError(absl::StrCat(ref_.name, ": ", acc->count,
                                                        " gradients accumulated at step ",
                                                        acc->step, ", ", required, " required"));
    }
    take(*acc);
    return absl::OkStatus();
  }
  AccumulatorRef ref_;
};

// Inputs: local_step (int64), replica (int64), gradient (float32).
class AccumulatorApplyGradientKernel : public AccumulatorKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_RETURN_IF_ERROR(StepAndReplica(ctx));
    const Tensor& grad = ctx.input(2);
    if (grad.dtype() != DType::kFloat || grad.shape() != ref_.shape) {
      return ctx.Error(absl::StrCat("gradient must be float32", ref_.shape.DebugString(), ", got ",
                                    DTypeName(grad.dtype()), grad.shape().DebugString()));
    }
    TANDEM_ASSIGN_OR_RETURN(auto acc, Get(ctx));
    Accumulate(ctx, *acc, [&](GradientAccumulator& a) {
      if (a.count == 0) {
        a.sum = grad.DeepCopy();
        return;
      }
      float* sum = a.sum.data<float>();
      const float* g = grad.data<float>();
      for (int64_t i = 0; i < grad.NumElements(); ++i) sum[i] += g[i];
    });
    return absl::OkStatus();
  }
};

// Input: num_required (int32). Output: the mean of the accumulated gradients; clears
// them and advances the accumulator's step. FAILED_PRECONDITION when fewer than
// num_required are there (the caller waits with AccumulatorWait first).
class AccumulatorTakeGradientKernel : public AccumulatorKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    return TakeWhenEnough(ctx, [&](GradientAccumulator& acc) {
      Tensor mean = std::move(acc.sum);
      float* m = mean.data<float>();
      const float scale = 1.0f / static_cast<float>(acc.count);
      for (int64_t i = 0; i < mean.NumElements(); ++i) m[i] *= scale;
      acc.Clear();
      ++acc.step;
      ctx.set_output(0, std::move(mean));
    });
  }
};

// Floats in one row of the accumulator's shape.
int64_t RowWidth(const TensorShape& shape) {
  return shape.dim(0) == 0 ? 0 : shape.num_elements() / shape.dim(0);
}

// Inputs: local_step (int64), replica (int64), indices (int32/int64 [n]), values
// (float32 [n, shape[1:]...]). Each row is added to its index's sum.
class SparseAccumulatorApplyGradientKernel : public AccumulatorKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_RETURN_IF_ERROR(StepAndReplica(ctx));
    const Tensor& indices = ctx.input(2);
    const Tensor& values = ctx.input(3);
    const int64_t width = RowWidth(ref_.shape);
    const int64_t n = indices.NumElements();
    if ((indices.dtype() != DType::kInt32 && indices.dtype() != DType::kInt64) ||
        indices.rank() != 1 || values.dtype() != DType::kFloat || values.rank() < 1 ||
        values.dim(0) != n || values.NumElements() != n * width) {
      return ctx.Error(absl::StrCat("a sparse gradient of ", ref_.shape.DebugString(),
                                    " needs int indices [n] and float32 values [n, row], got ",
                                    DTypeName(indices.dtype()), indices.shape().DebugString(),
                                    " and ", DTypeName(values.dtype()),
                                    values.shape().DebugString()));
    }
    auto index = [&](int64_t i) {
      return indices.dtype() == DType::kInt64 ? indices.data<int64_t>()[i]
                                              : int64_t{indices.data<int32_t>()[i]};
    };
    for (int64_t i = 0; i < n; ++i) {
      if (index(i) < 0 || index(i) >= ref_.shape.dim(0)) {
        return ctx.Error(absl::StrCat("indices[", i, "] = ", index(i), " is not in [0, ",
                                      ref_.shape.dim(0), ")"));
      }
    }
    TANDEM_ASSIGN_OR_RETURN(auto acc, Get(ctx));
    Accumulate(ctx, *acc, [&](GradientAccumulator& a) {
      const float* v = values.data<float>();
      for (int64_t i = 0; i < n; ++i) {
        auto [it, added] = a.row_at.try_emplace(index(i), a.row_sums.size());
        if (added) {
          a.row_sums.insert(a.row_sums.end(), v + i * width, v + (i + 1) * width);
        } else {
          float* sum = a.row_sums.data() + it->second;
          for (int64_t k = 0; k < width; ++k) sum[k] += v[i * width + k];
        }
      }
    });
    return absl::OkStatus();
  }
};

// Input: num_required (int32). Outputs: the indices any accumulated gradient named
// (int64, ascending) and their rows' means; clears them and advances the step, as
// AccumulatorTakeGradient.
class SparseAccumulatorTakeGradientKernel : public AccumulatorKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    return TakeWhenEnough(ctx, [&](GradientAccumulator& acc) {
      std::vector<std::pair<int64_t, int64_t>> rows(acc.row_at.begin(), acc.row_at.end());
      std::sort(rows.begin(), rows.end());
      const int64_t width = RowWidth(ref_.shape);
      const int64_t m = static_cast<int64_t>(rows.size());
      Tensor indices(DType::kInt64, TensorShape({m}));
      std::vector<int64_t> dims = ref_.shape.dims();
      dims[0] = m;
      Tensor values(DType::kFloat, TensorShape(dims));
      const float scale = 1.0f / static_cast<float>(acc.count);
      for (int64_t r = 0; r < m; ++r) {
        indices.data<int64_t>()[r] = rows[r].first;
        const float* sum = acc.row_sums.data() + rows[r].second;
        float* out = values.data<float>() + r * width;
        for (int64_t k = 0; k < width; ++k) out[k] = sum[k] * scale;
      }
      acc.Clear();
      ++acc.step;
      ctx.set_output(0, std::move(indices));
      ctx.set_output(1, std::move(values));
    });
  }
};

// Input: num_required (int32). Output: the number accumulated (int64) once it reaches
// num_required, or at the `timeout_ms` attr, whichever comes first.
class AccumulatorWaitKernel : public AsyncOpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_RETURN_IF_ERROR(acc_.Init(node));
    TANDEM_ASSIGN_OR_RETURN(timeout_ms_, GetAttr<int64_t>(node.attrs(), "timeout_ms"));
    return absl::OkStatus();
  }
  void ComputeAsync(OpKernelContext& ctx, DoneCallback done) override {
    absl::Status s = ScalarInput(ctx, 0, DType::kInt32, "num_required");
    if (!s.ok()) return done(s);
    absl::StatusOr<std::shared_ptr<GradientAccumulator>> acc = acc_.Get(ctx);
    if (!acc.ok()) return done(acc.status());
    const int64_t required = ctx.input(0).scalar<int32_t>();
    auto w = std::make_shared<Waiter>();
    GradientAccumulator* a = acc->get();
    w->ready = [a, required] { return a->count >= required; };
    w->finish = [&ctx, done, acc = *acc](bool) {
      int64_t count;
      {
        absl::MutexLock lock(&acc->mu);
        count = acc->count;
      }
      ctx.set_output(0, Tensor::Scalar<int64_t>(count));
      done(absl::OkStatus());
    };
    a->waiters.Add(&a->mu, w, timeout_ms_);
  }

 private:
  AccumulatorRef acc_;
  int64_t timeout_ms_ = 1000;
};

// Input: step (int64). Sets the accumulator's step; the gradients it holds are kept
// when the step is unchanged (a restarted chief) and dropped otherwise.
class AccumulatorSetGlobalStepKernel : public AccumulatorKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_RETURN_IF_ERROR(ScalarInput(ctx, 0, DType::kInt64, "step"));
    TANDEM_ASSIGN_OR_RETURN(auto acc, Get(ctx));
    absl::MutexLock lock(&acc->mu);
    const int64_t step = ctx.input(0).scalar<int64_t>();
    if (step != acc->step) {
      acc->step = step;
      acc->Clear();
    }
    return absl::OkStatus();
  }
};

// Output: int64 [4]: {step, accumulated, stale gradients dropped, duplicates ignored}.
class AccumulatorStatsKernel : public AccumulatorKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_ASSIGN_OR_RETURN(auto acc, Get(ctx));
    Tensor out(DType::kInt64, TensorShape({4}));
    absl::MutexLock lock(&acc->mu);
    int64_t* o = out.data<int64_t>();
    o[0] = acc->step;
    o[1] = acc->count;
    o[2] = acc->stale;
    o[3] = acc->duplicates;
    ctx.set_output(0, std::move(out));
    return absl::OkStatus();
  }
};

absl::StatusOr<std::shared_ptr<StepBarrier>> GetBarrier(OpKernelContext& ctx,
                                                        const std::string& name) {
  return ctx.resources()->LookupOrCreate<StepBarrier>(
      "", name, [] { return std::make_shared<StepBarrier>(); });
}

// Input: step (int64). Sets the barrier's step and releases the replicas waiting for
// a step past theirs. Output: the step.
class SyncStepAdvanceKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(name_, GetAttr<std::string>(node.attrs(), "shared_name"));
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_RETURN_IF_ERROR(ScalarInput(ctx, 0, DType::kInt64, "step"));
    TANDEM_ASSIGN_OR_RETURN(auto barrier, GetBarrier(ctx, name_));
    std::vector<std::shared_ptr<Waiter>> ready;
    {
      absl::MutexLock lock(&barrier->mu);
      barrier->step = ctx.input(0).scalar<int64_t>();
      ready = barrier->waiters.TakeReady();
    }
    FinishAll(ready);
    ctx.set_output(0, ctx.input(0));
    return absl::OkStatus();
  }

 private:
  std::string name_;
};

// Input: local_step (int64). Output: the barrier's step once it passes local_step, or
// at the `timeout_ms` attr whatever it is then (a replica then sends its gradient
// again, or, behind, catches up).
class SyncStepWaitKernel : public AsyncOpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(name_, GetAttr<std::string>(node.attrs(), "shared_name"));
    TANDEM_ASSIGN_OR_RETURN(timeout_ms_, GetAttr<int64_t>(node.attrs(), "timeout_ms"));
    return absl::OkStatus();
  }
  void ComputeAsync(OpKernelContext& ctx, DoneCallback done) override {
    absl::Status s = ScalarInput(ctx, 0, DType::kInt64, "local_step");
    if (!s.ok()) return done(s);
    absl::StatusOr<std::shared_ptr<StepBarrier>> barrier = GetBarrier(ctx, name_);
    if (!barrier.ok()) return done(barrier.status());
    const int64_t local_step = ctx.input(0).scalar<int64_t>();
    StepBarrier* b = barrier->get();
    auto w = std::make_shared<Waiter>();
    w->ready = [b, local_step] { return b->step > local_step; };
    w->finish = [&ctx, done, barrier = *barrier](bool) {
      int64_t step;
      {
        absl::MutexLock lock(&barrier->mu);
        step = barrier->step;
      }
      ctx.set_output(0, Tensor::Scalar<int64_t>(step));
      done(absl::OkStatus());
    };
    b->waiters.Add(&b->mu, w, timeout_ms_);
  }

 private:
  std::string name_;
  int64_t timeout_ms_ = 1000;
};

}  // namespace

void RegisterCpuSyncReplicasKernels(KernelRegistry* r) {
  r->Register<AccumulatorApplyGradientKernel>("AccumulatorApplyGradient", kDeviceCpu);
  r->Register<AccumulatorTakeGradientKernel>("AccumulatorTakeGradient", kDeviceCpu);
  r->Register<SparseAccumulatorApplyGradientKernel>("SparseAccumulatorApplyGradient", kDeviceCpu);
  r->Register<SparseAccumulatorTakeGradientKernel>("SparseAccumulatorTakeGradient", kDeviceCpu);
  r->Register<AccumulatorWaitKernel>("AccumulatorWait", kDeviceCpu);
  r->Register<AccumulatorSetGlobalStepKernel>("AccumulatorSetGlobalStep", kDeviceCpu);
  r->Register<AccumulatorStatsKernel>("AccumulatorStats", kDeviceCpu);
  r->Register<SyncStepAdvanceKernel>("SyncStepAdvance", kDeviceCpu);
  r->Register<SyncStepWaitKernel>("SyncStepWait", kDeviceCpu);
}

}  // namespace tandem

#include "framework/runtime/executor.h"

#include <omp.h>
#include <pthread.h>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "framework/core/denormal.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/runtime/rendezvous.h"
#include "glog/logging.h"

namespace tandem {
namespace {

// omp_set_num_threads sets the calling thread's own default only, and kernels run on
// pool threads, RPC threads and inline on callers: each sets it before its first
// kernel (and again only if a session with another count uses the thread).
// The first time, and whenever the count changes, it also sets flushing of denormals
// on every thread of the calling thread's OpenMP team (core/denormal.h): oneDNN's
// parallel regions run on that team too, and a team created before the caller flushed
// would not have inherited it.
void UseOmpThreads(int n) {
  thread_local int current = 0;
  if (current != n) {
    omp_set_num_threads(n);
    current = n;
#pragma omp parallel num_threads(n)
    FlushDenormals();
  }
}

// True when `a` and `b` have the same op and attributes.
bool SameDefinition(const Node& a, const Node& b) {
  if (a.op() != b.op() || a.attrs().size() != b.attrs().size()) return false;
  for (auto ia = a.attrs().begin(), ib = b.attrs().begin(); ia != a.attrs().end(); ++ia, ++ib) {
    if (ia->first != ib->first ||
        AttrValueDebugString(ia->second) != AttrValueDebugString(ib->second)) {
      return false;
    }
  }
  return true;
}

// Kernels that keep state across steps are shared by the executors of a session.
// _Send and _Recv are stateful (never pruned or merged) but keep none: each carries its
// partition's rendezvous key, and partitions of different plans may give an edge the
// same node name with another key, so each gets its own kernel.
bool SharesKernel(const Node& node) {
  static const absl::flat_hash_set<std::string>* const kUnshared =
      new absl::flat_hash_set<std::string>{"_Arg", "_Retval", "_Send", "_Recv"};
  return node.op_def().stateful && !kUnshared->contains(node.op());
}

// Brackets a burst of nodes run on one thread for ExecutorArgs::recv_batching.
class RecvBatchScope {
 public:
  explicit RecvBatchScope(RecvBatching* b) : b_(b) {
    if (b_ != nullptr) b_->BeginRecvBatch();
  }
  ~RecvBatchScope() {
    if (b_ != nullptr) b_->EndRecvBatch();
  }
  RecvBatchScope(const RecvBatchScope&) = delete;
  RecvBatchScope& operator=(const RecvBatchScope&) = delete;

 private:
  RecvBatching* const b_;
};

}  // namespace

// The state of one Run: output slots, pending counts, and completion.
class Executor::StepState : public std::enable_shared_from_this<Executor::StepState> {
 public:
  // With `done`, the step calls it when it ends; without, RunAndWait waits for the end.
  StepState(const Executor* exec, const ExecutorArgs& args,
            std::function<void(const absl::Status&)> done = nullptr)
      : exec_(exec),
        args_(args),
        done_callback_(std::move(done)),
        slots_(exec->num_slots_),
        pending_(new std::atomic<int>[exec->items_.size()]),
        uses_(new std::atomic<int>[exec->num_slots_]),
        remaining_(static_cast<int>(exec->items_.size())) {
    for (size_t i = 0; i < exec->items_.size(); ++i) {
      pending_[i].store(exec->items_[i].initial_pending, std::memory_order_relaxed);
    }
    for (int s = 0; s < exec->num_slots_; ++s) {
      uses_[s].store(exec->slot_uses_[s], std::memory_order_relaxed);
    }
    step_.step_id = args.step_id;
    step_.resources = exec->device_->resource_manager();
    step_.intra_op_pool = args.intra_op_pool;
    step_.ops_one_at_a_time = args.ops_one_at_a_time;
    step_.rendezvous = args.rendezvous;
    step_.collective = args.collective;
    step_.device_name = &exec->device_->name();
    step_.device_allocator = exec->device_->device_allocator();
    step_.gpu = exec->device_->gpu();
    step_.traced = args.stats != nullptr;
    step_.args = args.args;
    step_.retvals = args.retvals;
  }

  absl::Status RunAndWait() {
    if (exec_->items_.empty()) return absl::OkStatus();
    std::vector<int> roots = exec_->roots_;
    Dispatch(roots);
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
    return status_;
  }

  // Starts the step; done_callback_ reports its end.
  void Start() {
    if (exec_->items_.empty()) {
      done_callback_(absl::OkStatus());
      return;
    }
    std::vector<int> roots = exec_->roots_;
    Dispatch(roots, /*expensive_inline=*/false);
  }

 private:
  // Runs `ready` nodes: expensive ones go to the pool (but the last, when
  // `expensive_inline`), the rest inline.
  void Dispatch(std::vector<int>& ready, bool expensive_inline = true) {
    // Pool threads flush denormals for good; a caller's or RPC thread only here.
    ScopedFlushDenormals flush;
    RecvBatchScope batch(args_.recv_batching);
    while (!ready.empty()) {
      int id = ready.back();
      ready.pop_back();
      const Item& item = exec_->items_[id];
      if (!item.cheap && (!ready.empty() || !expensive_inline) && args_.inter_op_pool != nullptr) {
        args_.inter_op_pool->Schedule([self = shared_from_this(), id] {
          RecvBatchScope batch(self->args_.recv_batching);
          std::vector<int> more;
          self->Process(id, &more);
          self->Dispatch(more);
        });
        continue;
      }
      Process(id, &ready);
    }
  }

  // Runs node `id` (unless the step failed) and appends the successors it readies.
  void Process(int id, std::vector<int>* ready) {
    const Item& item = exec_->items_[id];
    // A cancelled step fails (it never ends OK with its nodes skipped).
    if (args_.cancelled != nullptr && args_.cancelled->load(std::memory_order_acquire) &&
        !failed_.load(std::memory_order_acquire)) {
      Fail(absl::CancelledError(
          absl::StrCat("step cancelled before node '", item.kernel->name(), "' could run")));
    }
    const bool skip = failed_.load(std::memory_order_acquire);
    std::vector<Tensor> inputs(item.input_slots.size());
    for (size_t i = 0; i < item.input_slots.size(); ++i) {
      int slot = item.input_slots[i];
      if (!skip) inputs[i] = slots_[slot];
      if (uses_[slot].fetch_sub(1, std::memory_order_acq_rel) == 1) slots_[slot] = Tensor();
    }
    if (!skip) {
      if (args_.deadline_micros > 0 && env::NowMicros() > args_.deadline_micros) {
        Fail(absl::DeadlineExceededError(
            absl::StrCat("step timed out before node '", item.kernel->name(), "' could run")));
      } else if (item.async != nullptr) {
        RunAsyncKernel(item, std::move(inputs));
        return;  // Its callback propagates.
      } else {
        RunKernel(item, std::move(inputs));
      }
    }
    Propagate(item, ready);
  }

  // Marks `item` done: appends the successors it readies.
  void Propagate(const Item& item, std::vector<int>* ready) {
    for (int succ : item.successors) {
      if (pending_[succ].fetch_sub(1, std::memory_order_acq_rel) == 1) ready->push_back(succ);
    }
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) Finish();
  }

  // The last node has run: reports the step's status.
  void Finish() {
    absl::Status status;
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
      status = status_;
    }
    if (done_callback_) done_callback_(status);
  }

  void RunKernel(const Item& item, std::vector<Tensor> inputs) {
    if (args_.intra_op_threads > 0) UseOmpThreads(args_.intra_op_threads);
    OpKernel* kernel = item.kernel.get();
    OpKernelContext ctx(kernel, &step_, std::move(inputs));
    int64_t start = args_.stats ? env::NowMicros() : 0;
    absl::Status s;
    try {
      s = kernel->Compute(ctx);
    } catch (const std::exception& e) {
      s = ctx.Annotate(absl::InternalError(absl::StrCat("kernel threw: ", e.what())));
    }
    FinishKernel(item, ctx, s, start);
  }

  // The context lives until the kernel calls back; successors then run on the
  // inter-op pool (or inline without one), not on the thread that called back.
  void RunAsyncKernel(const Item& item, std::vector<Tensor> inputs) {
    auto ctx = std::make_shared<OpKernelContext>(item.kernel.get(), &step_, std::move(inputs));
    int64_t start = args_.stats ? env::NowMicros() : 0;
    item.async->ComputeAsync(
        *ctx, [self = shared_from_this(), &item, ctx, start](const absl::Status& s) {
          self->FinishKernel(item, *ctx, s, start);
          std::vector<int> more;
          self->Propagate(item, &more);
          if (more.empty()) return;
          if (self->args_.inter_op_pool != nullptr) {
            self->args_.inter_op_pool->Schedule(
                [self, more = std::move(more)]() mutable { self->Dispatch(more); });
          } else {
            self->Dispatch(more);
          }
        });
  }

  void FinishKernel(const Item& item, OpKernelContext& ctx, const absl::Status& s, int64_t start) {
    const Node& node = item.kernel->node();
    if (args_.stats) {
      NodeExecStats st{node.name(), node.op(),        exec_->device_->name(),
                       start,       env::NowMicros(), static_cast<uint64_t>(pthread_self())};
      absl::MutexLock lock(&mu_);
      args_.stats->nodes.push_back(std::move(st));
    }
    if (!s.ok()) {
      Fail(s);
      return;
    }
    std::vector<Tensor>& outs = ctx.outputs();
    for (int k = 0; k < node.num_outputs(); ++k) {
      if (outs[k].dtype() != node.output_dtype(k)) {
        Fail(ctx.Annotate(absl::InternalError(
            absl::StrCat("kernel produced ", DTypeName(outs[k].dtype()), " for output ", k,
                         ", expected ", DTypeName(node.output_dtype(k))))));
        return;
      }
      slots_[item.first_slot + k] = std::move(outs[k]);
    }
  }

  // Records the step's first error. The step's rendezvous is aborted with it, as
  // TensorFlow's executor does: a _Recv waiting for a tensor that will now never be
  // sent (another task's update that waited on this partition) fails instead of
  // holding the step until its deadline.
  void Fail(const absl::Status& s) {
    bool first = false;
    {
      absl::MutexLock lock(&mu_);
      if (status_.ok()) {
        status_ = s;
        first = true;
      }
      failed_.store(true, std::memory_order_release);
    }
    if (first && args_.rendezvous != nullptr) args_.rendezvous->StartAbort(s);
  }

  const Executor* exec_;
  const ExecutorArgs args_;
  const std::function<void(const absl::Status&)> done_callback_;
  StepContext step_;
  std::vector<Tensor> slots_;
  std::unique_ptr<std::atomic<int>[]> pending_;
  std::unique_ptr<std::atomic<int>[]> uses_;
  std::atomic<int> remaining_;
  std::atomic<bool> failed_{false};
  absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

absl::StatusOr<std::shared_ptr<OpKernel>> KernelCache::GetOrCreate(const Node& node,
                                                                   const DeviceType& device,
                                                                   const KernelRegistry* registry) {
  absl::MutexLock lock(&mu_);
  auto it = kernels_.find(node.name());
  if (it != kernels_.end()) {
    if (!SameDefinition(it->second->node(), node)) {
      return absl::InternalError(absl::StrCat(
          "stateful node '", node.name(), "' (", node.op(),
          ") was registered before in this session with another op or other attributes; "
          "its kernel cannot be shared"));
    }
    return it->second;
  }
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> k, registry->Create(node, device));
  std::shared_ptr<OpKernel> shared(std::move(k));
  kernels_.emplace(node.name(), shared);
  return shared;
}

absl::StatusOr<std::unique_ptr<Executor>> Executor::Create(std::unique_ptr<Graph> graph,
                                                           Device* device,
                                                           const KernelRegistry* registry,
                                                           KernelCache* shared) {
  std::unique_ptr<Executor> exec(new Executor);
  exec->device_ = device;
  const int n = graph->num_nodes();
  exec->items_.resize(n);
  int slots = 0;
  for (int id = 0; id < n; ++id) {
    exec->items_[id].first_slot = slots;
    slots += graph->nodes()[id]->num_outputs();
  }
  exec->num_slots_ = slots;
  exec->slot_uses_.assign(slots, 0);
  for (int id = 0; id < n; ++id) {
    const Node& node = *graph->nodes()[id];
    Item& item = exec->items_[id];
    if (shared != nullptr && SharesKernel(node)) {
      TANDEM_ASSIGN_OR_RETURN(item.kernel, shared->GetOrCreate(node, device->type(), registry));
    } else {
      TANDEM_ASSIGN_OR_RETURN(item.kernel, registry->Create(node, device->type()));
    }
    item.cheap = node.op_def().cheap;
    item.async = dynamic_cast<AsyncOpKernel*>(item.kernel.get());
    for (const Output& in : node.inputs()) {
      int slot = exec->items_[in.node->id()].first_slot + in.index;
      item.input_slots.push_back(slot);
      ++exec->slot_uses_[slot];
    }
    item.initial_pending = static_cast<int>(node.inputs().size() + node.control_inputs().size());
    for (const auto& [consumer, slot] : node.out_edges()) item.successors.push_back(consumer->id());
    for (Node* c : node.out_control_edges()) item.successors.push_back(c->id());
    if (item.initial_pending == 0) exec->roots_.push_back(id);
    if (node.op() == "_Arg") ++exec->num_args_;
    if (node.op() == "_Retval") ++exec->num_retvals_;
  }
  exec->graph_ = std::move(graph);
  return exec;
}

Executor::~Executor() = default;

absl::Status Executor::Run(const ExecutorArgs& args) const {
  if (args.retvals != nullptr) args.retvals->assign(num_retvals_, Tensor());
  // Shared with pool closures, so the state outlives the last of them.
  auto state = std::make_shared<StepState>(this, args);
  return state->RunAndWait();
}

void Executor::RunAsync(const ExecutorArgs& args,
                        std::function<void(const absl::Status&)> done) const {
  if (args.retvals != nullptr) args.retvals->assign(num_retvals_, Tensor());
  auto state = std::make_shared<StepState>(this, args, std::move(done));
  state->Start();
}

}  // namespace tandem

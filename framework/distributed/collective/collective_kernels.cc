// framework/distributed/collective/collective_kernels.cc
//
// CPU kernels of the collective ops (framework/ops/collective_ops.h). Both are
// asynchronous: they pack their inputs into one buffer, hand it to the step's
// CollectiveExecutor and finish when it calls back; no thread waits for the peers.
// Inputs are packed at 64-byte aligned offsets, so the all-reduce's outputs are
// aligned views of the one reduced buffer (no copy out).
#include "framework/distributed/collective/collective_kernels.h"

#include <cstring>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "framework/core/status.h"
#include "framework/distributed/collective/collective_executor.h"
#include "framework/graph/device_spec.h"

namespace tandem {
namespace {

constexpr size_t kAlignBytes = 64;

size_t AlignUp(size_t n) { return (n + kAlignBytes - 1) / kAlignBytes * kAlignBytes; }

// Byte offsets of the inputs in the packed buffer, and its size.
std::vector<size_t> PackOffsets(const OpKernelContext& ctx, size_t* total) {
  std::vector<size_t> offsets;
  size_t at = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    offsets.push_back(at);
    at += AlignUp(ctx.input(i).TotalBytes());
  }
  *total = at;
  return offsets;
}

void Pack(const OpKernelContext& ctx, const std::vector<size_t>& offsets, char* dst, size_t total) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const size_t n = ctx.input(i).TotalBytes();
    if (n > 0) std::memcpy(dst + offsets[i], ctx.input(i).raw_data(), n);
    const size_t end = i + 1 < ctx.num_inputs() ? offsets[i + 1] : total;
    std::memset(dst + offsets[i] + n, 0, end - offsets[i] - n);
  }
}

// What both kernels share: the instance key, the step's group, the packed inputs.
class CollectiveKernel : public AsyncOpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(instance_key_, GetAttr<int64_t>(node.attrs(), "instance_key"));
    return absl::OkStatus();
  }

 protected:
  // The step's group, or null after failing `done` with FAILED_PRECONDITION.
  static CollectiveExecutor* Group(OpKernelContext& ctx, DoneCallback& done) {
    CollectiveExecutor* ex = ctx.step().collective;
    if (ex == nullptr) {
      done(ctx.Annotate(absl::FailedPreconditionError(
          "this session has no collective group (SessionOptions::collective): collective ops "
          "run only with [distribute] strategy = \"collective\"")));
    }
    return ex;
  }
  // The collective's completion: a failure ends the kernel with the error annotated with
  // the node; success runs `set_outputs`, then ends it.
  template <typename SetOutputs>
  static CollectiveExecutor::Done Finish(OpKernelContext& ctx, DoneCallback done,
                                         SetOutputs set_outputs) {
    return [&ctx, done = std::move(done),
            set_outputs = std::move(set_outputs)](const absl::Status& s) {
      if (!s.ok()) {
        done(ctx.Annotate(s));
        return;
      }
      set_outputs();
      done(absl::OkStatus());
    };
  }
  // The inputs packed into one `dtype` buffer; `offsets` gets their byte offsets. The
  // last step's buffer is used again once nothing else holds it (its outputs are views
  // of it), so steady-state steps allocate none.
  Tensor Packed(const OpKernelContext& ctx, DType dtype, std::vector<size_t>* offsets) {
    size_t total = 0;
    *offsets = PackOffsets(ctx, &total);
    const int64_t n = static_cast<int64_t>(total / DTypeSize(dtype));
    Tensor packed;
    {
      absl::MutexLock lock(&mu_);
      if (buffer_.IsInitialized() && buffer_.dtype() == dtype && buffer_.NumElements() == n &&
          buffer_.BufferIsUnique()) {
        packed = buffer_;
      } else {
        packed = Tensor(dtype, TensorShape({n}));
        buffer_ = packed;
      }
    }
    Pack(ctx, *offsets, packed.raw_data(), total);
    return packed;
  }

  int64_t instance_key_ = 0;

 private:
  absl::Mutex mu_;
  Tensor buffer_ ABSL_GUARDED_BY(mu_);  // The last packed buffer.
};

class CollectiveAllReduceKernel : public CollectiveKernel {
 public:
  absl::Status Init(const Node& node) override {
    average_ = GetAttrOr<bool>(node.attrs(), "average", true);
    return CollectiveKernel::Init(node);
  }

  void ComputeAsync(OpKernelContext& ctx, DoneCallback done) override {
    CollectiveExecutor* ex = Group(ctx, done);
    if (ex == nullptr) return;
    std::vector<size_t> offsets;
    Tensor packed = Packed(ctx, DType::kFloat, &offsets);
    const float scale = average_ ? 1.0f / static_cast<float>(ex->size()) : 1.0f;
    ex->AllReduceSum(
        instance_key_, packed,
        Finish(ctx, std::move(done),
               [&ctx, packed, offsets = std::move(offsets)] {
                 for (int i = 0; i < ctx.num_inputs(); ++i) {
                   const int64_t begin = static_cast<int64_t>(offsets[i] / sizeof(float));
                   const int64_t count = ctx.input(i).NumElements();
                   ctx.set_output(
                       i, packed.Slice(begin, begin + count).Reshaped(ctx.input(i).shape()));
                 }
               }),
        scale);
  }

 private:
  bool average_ = true;
};

class CollectiveBroadcastKernel : public CollectiveKernel {
 public:
  void ComputeAsync(OpKernelContext& ctx, DoneCallback done) override {
    CollectiveExecutor* ex = Group(ctx, done);
    if (ex == nullptr) return;
    std::vector<size_t> offsets;
    Tensor packed = Packed(ctx, DType::kUInt8, &offsets);
    ex->Broadcast(instance_key_, packed,
                  Finish(ctx, std::move(done), [&ctx, packed, offsets = std::move(offsets)] {
                    for (int i = 0; i < ctx.num_inputs(); ++i) {
                      Tensor out(ctx.input(i).dtype(), ctx.input(i).shape());
                      if (out.TotalBytes() > 0) {
                        std::memcpy(out.raw_data(), packed.raw_data() + offsets[i],
                                    out.TotalBytes());
                      }
                      ctx.set_output(i, std::move(out));
                    }
                  }));
  }
};

}  // namespace

void RegisterCollectiveKernels(KernelRegistry* r) {
  r->Register<CollectiveAllReduceKernel>("CollectiveAllReduce", kDeviceCpu);
  r->Register<CollectiveBroadcastKernel>("CollectiveBroadcast", kDeviceCpu);
}

}  // namespace tandem

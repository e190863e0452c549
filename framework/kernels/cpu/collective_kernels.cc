// framework/kernels/cpu/collective_kernels.cc
//
// CPU kernels of the collective ops (framework/ops/collective_ops.h). All are
// asynchronous: they pack their inputs into one buffer, hand it to the step's
// Collectives (kernels/collectives.h) and finish when it calls back; no thread waits
// for the peers.
// Inputs are packed at 64-byte aligned offsets, so the all-reduce's outputs are
// aligned views of the one reduced buffer (no copy out).

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "framework/core/denormal.h"
#include "framework/core/status.h"
#include "framework/graph/device_spec.h"
#include "framework/kernels/collectives.h"
#include "framework/kernels/cpu/cpu_kernels.h"
#include "framework/kernels/op_kernel.h"

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
  static Collectives* Group(OpKernelContext& ctx, DoneCallback& done) {
    Collectives* ex = ctx.step().collective;
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
  static Collectives::Done Finish(OpKernelContext& ctx, DoneCallback done, SetOutputs set_outputs) {
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

// The kernels with an "average" attr: the sum times 1 / group size when set.
class AveragingKernel : public CollectiveKernel {
 public:
  absl::Status Init(const Node& node) override {
    average_ = GetAttrOr<bool>(node.attrs(), "average", true);
    return CollectiveKernel::Init(node);
  }

 protected:
  float Scale(const Collectives& ex) const {
    return average_ ? 1.0f / static_cast<float>(ex.size()) : 1.0f;
  }

 private:
  bool average_ = true;
};

class CollectiveAllReduceKernel : public AveragingKernel {
 public:
  void ComputeAsync(OpKernelContext& ctx, DoneCallback done) override {
    Collectives* ex = Group(ctx, done);
    if (ex == nullptr) return;
    std::vector<size_t> offsets;
    Tensor packed = Packed(ctx, DType::kFloat, &offsets);
    const float scale = Scale(*ex);
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
};

class CollectiveBroadcastKernel : public CollectiveKernel {
 public:
  void ComputeAsync(OpKernelContext& ctx, DoneCallback done) override {
    Collectives* ex = Group(ctx, done);
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

// Each replica's rows travel as one byte buffer: int64 n, int64 row_elems, n int64
// indices, n * row_elems floats. Every replica sums the gathered rows the same way (rank
// order, then the order within a replica) into ascending unique rows, so all of them
// hold the same bits.
class CollectiveAllGatherRowsKernel : public AveragingKernel {
 public:
  void ComputeAsync(OpKernelContext& ctx, DoneCallback done) override {
    Collectives* ex = Group(ctx, done);
    if (ex == nullptr) return;
    const Tensor& indices = ctx.input(0);
    const Tensor& values = ctx.input(1);
    const int64_t n = indices.NumElements();
    if (values.shape().rank() < 1 || values.shape().dim(0) != n) {
      done(ctx.Annotate(absl::InvalidArgumentError(absl::StrCat(
          "values ", values.shape().DebugString(), " need one row per index (", n, ")"))));
      return;
    }
    const int64_t row = n > 0 ? values.NumElements() / n : RowElems(values.shape());
    Tensor mine(
        DType::kUInt8,
        TensorShape({static_cast<int64_t>((2 + n) * sizeof(int64_t) + n * row * sizeof(float))}));
    auto* head = reinterpret_cast<int64_t*>(mine.raw_data());
    head[0] = n;
    head[1] = row;
    for (int64_t i = 0; i < n; ++i) {
      head[2 + i] = indices.dtype() == DType::kInt64
                        ? indices.data<int64_t>()[i]
                        : static_cast<int64_t>(indices.data<int32_t>()[i]);
    }
    if (n * row > 0) {
      std::memcpy(head + 2 + n, values.data<float>(), n * row * sizeof(float));
    }
    const float scale = Scale(*ex);
    ex->AllGather(
        instance_key_, std::move(mine),
        [&ctx, done = std::move(done), scale, row,
         self = this](absl::StatusOr<std::vector<Tensor>> all) {
          if (!all.ok()) {
            done(ctx.Annotate(all.status()));
            return;
          }
          done(ctx.Annotate(self->SumRows(ctx, *all, row, scale)));
        },
        /*same_size=*/false);
  }

 private:
  static int64_t RowElems(const TensorShape& shape) {
    int64_t row = 1;
    for (int d = 1; d < shape.rank(); ++d) row *= shape.dim(d);
    return row;
  }

  // Sets the outputs from every replica's buffer, or says which replica sent a bad one.
  absl::Status SumRows(OpKernelContext& ctx, const std::vector<Tensor>& all, int64_t row,
                       float scale) {
    struct Part {
      const int64_t* ids;
      const float* values;
      int64_t n;
    };
    std::vector<Part> parts;
    std::vector<int64_t> ids;
    for (size_t r = 0; r < all.size(); ++r) {
      const size_t bytes = all[r].TotalBytes();
      const auto* head = reinterpret_cast<const int64_t*>(all[r].raw_data());
      const size_t max_n = bytes / sizeof(int64_t);
      if (bytes < 2 * sizeof(int64_t) || head[0] < 0 || static_cast<size_t>(head[0]) > max_n ||
          head[1] != row ||
          bytes != (2 + head[0]) * sizeof(int64_t) + head[0] * row * sizeof(float)) {
        return absl::InternalError(
            absl::StrCat("collective: replica ", r, " sent rows that do not match this replica's (",
                         bytes, " bytes; rows of ", row, " elements expected; different graphs?)"));
      }
      parts.push_back({head + 2, reinterpret_cast<const float*>(head + 2 + head[0]), head[0]});
      ids.insert(ids.end(), head + 2, head + 2 + head[0]);
    }
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    absl::flat_hash_map<int64_t, int64_t> slot;
    slot.reserve(ids.size());
    for (size_t k = 0; k < ids.size(); ++k) slot[ids[k]] = static_cast<int64_t>(k);
    const int64_t m = static_cast<int64_t>(ids.size());
    TensorShape out_shape = ctx.input(1).shape();
    out_shape.set_dim(0, m);
    Tensor values(DType::kFloat, out_shape);
    float* out = values.data<float>();
    std::fill(out, out + m * row, 0.0f);
    {
      ScopedFlushDenormals flush;
      for (const Part& p : parts) {
        for (int64_t i = 0; i < p.n; ++i) {
          float* dst = out + slot[p.ids[i]] * row;
          const float* src = p.values + i * row;
          for (int64_t e = 0; e < row; ++e) dst[e] += src[e];
        }
      }
      if (scale != 1.0f) {
        for (int64_t e = 0; e < m * row; ++e) out[e] *= scale;
      }
    }
    Tensor indices(ctx.input(0).dtype(), TensorShape({m}));
    for (int64_t k = 0; k < m; ++k) {
      if (indices.dtype() == DType::kInt64) {
        indices.data<int64_t>()[k] = ids[k];
      } else {
        indices.data<int32_t>()[k] = static_cast<int32_t>(ids[k]);
      }
    }
    ctx.set_output(0, std::move(indices));
    ctx.set_output(1, std::move(values));
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterCpuCollectiveKernels(KernelRegistry* r) {
  r->Register<CollectiveAllReduceKernel>("CollectiveAllReduce", kDeviceCpu);
  r->Register<CollectiveBroadcastKernel>("CollectiveBroadcast", kDeviceCpu);
  r->Register<CollectiveAllGatherRowsKernel>("CollectiveAllGatherRows", kDeviceCpu);
}

}  // namespace tandem

// framework/kernels/cpu/partition_kernels.cc
//
// CPU kernels of PartitionIds and StitchRows (framework/ops/embedding_ops.h): ids split
// by the table part that holds them, and rows put back in the ids' order. Every id and
// position is checked; anything out of range is INVALID_ARGUMENT naming it.
#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/cpu_kernels.h"

namespace tandem {
namespace {

class PartitionIdsKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(rows_, GetAttr<std::vector<int64_t>>(node.attrs(), "part_rows"));
    TANDEM_ASSIGN_OR_RETURN(std::string strategy, GetAttr<std::string>(node.attrs(), "strategy"));
    mod_ = strategy == "mod";
    starts_.push_back(0);
    for (int64_t r : rows_) starts_.push_back(starts_.back() + r);
    return absl::OkStatus();
  }

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& ids = ctx.input(0);
    const int64_t n = ids.NumElements();
    const int64_t k = static_cast<int64_t>(rows_.size());
    const int64_t total = starts_.back();
    std::vector<int32_t> part(n);
    std::vector<int64_t> local(n), count(k, 0);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t id = ids.dtype() == DType::kInt32 ? int64_t{ids.data<int32_t>()[i]}
                                                     : ids.data<int64_t>()[i];
      if (id < 0 || id >= total) {
        return ctx.Error(absl::StrCat("ids[", i, "] = ", id, " is not in [0, ", total, ")"));
      }
      int64_t p;
      if (mod_) {
        p = id % k;
        local[i] = id / k;
      } else {
        p = std::upper_bound(starts_.begin(), starts_.end(), id) - starts_.begin() - 1;
        local[i] = id - starts_[p];
      }
      if (local[i] >= rows_[p]) {
        return ctx.Error(absl::StrCat("ids[", i, "] = ", id, " maps to row ", local[i],
                                      " of part ", p, ", which has ", rows_[p],
                                      " rows (the parts do not follow the \"",
                                      mod_ ? "mod" : "div", "\" layout)"));
      }
      part[i] = static_cast<int32_t>(p);
      ++count[p];
    }
    std::vector<Tensor*> locals(k), positions(k);
    std::vector<int64_t> next(k, 0);
    for (int64_t p = 0; p < k; ++p) {
      locals[p] = ctx.allocate_output(static_cast<int>(p), TensorShape({count[p]}));
      positions[p] = ctx.allocate_output(static_cast<int>(k + p), TensorShape({count[p]}));
    }
    for (int64_t i = 0; i < n; ++i) {
      const int p = part[i];
      const int64_t j = next[p]++;
      if (ids.dtype() == DType::kInt32) {
        locals[p]->data<int32_t>()[j] = static_cast<int32_t>(local[i]);
      } else {
        locals[p]->data<int64_t>()[j] = local[i];
      }
      positions[p]->data<int32_t>()[j] = static_cast<int32_t>(i);
    }
    return absl::OkStatus();
  }

 private:
  std::vector<int64_t> rows_, starts_;
  bool mod_ = true;
};

class StitchRowsKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    const int k = ctx.num_inputs() / 2;
    const Tensor& first = ctx.input(k);
    if (first.dtype() == DType::kString || DTypeSize(first.dtype()) == 0) {
      return ctx.Error(absl::StrCat("cannot stitch ", DTypeName(first.dtype()), " rows"));
    }
    int64_t n = 0;
    for (int p = 0; p < k; ++p) {
      const Tensor& rows = ctx.input(k + p);
      if (rows.rank() < 1 || rows.dim(0) != ctx.input(p).NumElements() ||
          rows.NumElements() * first.dim(0) != first.NumElements() * rows.dim(0)) {
        return ctx.Error(absl::StrCat("part ", p, ": ", ctx.input(p).NumElements(),
                                      " positions for rows of shape ", rows.shape().DebugString(),
                                      " (part 0's rows: ", first.shape().DebugString(), ")"));
      }
      n += rows.dim(0);
    }
    TensorShape shape = first.shape();
    shape.set_dim(0, n);
    Tensor* out = ctx.allocate_output(0, shape);
    const size_t row_bytes =
        n == 0 ? 0 : static_cast<size_t>(shape.num_elements() / n) * DTypeSize(first.dtype());
    std::vector<bool> filled(n, false);
    for (int p = 0; p < k; ++p) {
      const Tensor& pos = ctx.input(p);
      const char* src = ctx.input(k + p).raw_data();
      for (int64_t i = 0; i < pos.NumElements(); ++i) {
        const int32_t at = pos.data<int32_t>()[i];
        if (at < 0 || at >= n || filled[at]) {
          return ctx.Error(absl::StrCat("part ", p, " position ", i, " = ", at,
                                        " is outside [0, ", n, ") or given twice"));
        }
        filled[at] = true;
        if (row_bytes > 0) std::memcpy(out->raw_data() + at * row_bytes, src + i * row_bytes, row_bytes);
      }
    }
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterCpuPartitionKernels(KernelRegistry* r) {
  r->Register<PartitionIdsKernel>("PartitionIds", kDeviceCpu);
  r->Register<StitchRowsKernel>("StitchRows", kDeviceCpu);
}

}  // namespace tandem

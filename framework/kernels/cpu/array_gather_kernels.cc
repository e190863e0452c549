// framework/kernels/cpu/array_gather_kernels.cc
//
// CPU kernels that index by value: GatherV2 (dtype-agnostic row copies),
// UnsortedSegmentSum (float32/int32/int64 sums; the dense gradient of Gather), Unique
// (first-occurrence order, as TensorFlow's) and OneHot. Indices are int32 or int64; an index
// outside its range is an INVALID_ARGUMENT naming the position and the value.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/array_util.h"

namespace tandem::array_kernels {
namespace {

// Reads an int32/int64 tensor of any shape as int64 values.
absl::StatusOr<std::vector<int64_t>> ReadIndices(const OpKernelContext& ctx, int i,
                                                 absl::string_view what) {
  const Tensor& t = ctx.input(i);
  std::vector<int64_t> v(t.NumElements());
  if (t.dtype() == DType::kInt32) {
    for (size_t k = 0; k < v.size(); ++k) v[k] = t.flat<int32_t>()[k];
  } else if (t.dtype() == DType::kInt64) {
    for (size_t k = 0; k < v.size(); ++k) v[k] = t.flat<int64_t>()[k];
  } else {
    return ctx.Error(absl::StrCat(what, " must be int32 or int64, got ", DTypeName(t.dtype())));
  }
  return v;
}

int64_t Product(const std::vector<int64_t>& dims, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t d = from; d < to; ++d) p *= dims[d];
  return p;
}

class GatherKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    if (GetAttrOr<int64_t>(node.attrs(), "batch_dims", 0) != 0) {
      return absl::UnimplementedError("GatherV2 with batch_dims != 0 is not supported");
    }
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& params = ctx.input(0);
    if (DTypeSize(params.dtype()) == 0 || params.rank() == 0) {
      return ctx.Error(absl::StrCat("params must be a data tensor of rank >= 1, got ",
                                    DTypeName(params.dtype()), params.shape().DebugString()));
    }
    TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadIndices(ctx, 1, "indices"));
    TANDEM_ASSIGN_OR_RETURN(int64_t axis, ReadIndexScalar(ctx, 2, "axis"));
    const int rank = params.rank();
    if (axis < -rank || axis >= rank) {
      return ctx.Error(absl::StrCat("axis ", axis, " is out of range for params of shape ",
                                    params.shape().DebugString()));
    }
    if (axis < 0) axis += rank;
    const std::vector<int64_t>& p = params.shape().dims();
    const int64_t outer = Product(p, 0, axis), n = p[axis], inner = Product(p, axis + 1, rank);
    for (size_t j = 0; j < idx.size(); ++j) {
      if (idx[j] < 0 || idx[j] >= n) {
        return ctx.Error(absl::StrCat("indices[", j, "] = ", idx[j], " is not in [0, ", n,
                                      ") (params shape ", params.shape().DebugString(), ", axis ",
                                      axis, ")"));
      }
    }
    std::vector<int64_t> dims(p.begin(), p.begin() + axis);
    const std::vector<int64_t>& idims = ctx.input(1).shape().dims();
    dims.insert(dims.end(), idims.begin(), idims.end());
    dims.insert(dims.end(), p.begin() + axis + 1, p.end());
    auto shape = TensorShape::Create(dims);
    if (!shape.ok()) return ctx.Annotate(shape.status());
    Tensor* out = ctx.allocate_output(0, *shape);
    const size_t row = static_cast<size_t>(inner) * DTypeSize(params.dtype());
    const int64_t m = static_cast<int64_t>(idx.size());
    const char* src = params.raw_data();
    char* dst = out->raw_data();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < m; ++j) {
        std::memcpy(dst + (o * m + j) * row, src + (o * n + idx[j]) * row, row);
      }
    }
    return absl::OkStatus();
  }
};

template <typename T>
class UnsortedSegmentSumKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& data = ctx.input(0);
    const Tensor& ids_t = ctx.input(1);
    if (data.dtype() != DTypeOf<T>()) {
      return ctx.Error(absl::StrCat("data must be ", DTypeName(DTypeOf<T>())));
    }
    TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> ids, ReadIndices(ctx, 1, "segment_ids"));
    TANDEM_ASSIGN_OR_RETURN(int64_t num, ReadIndexScalar(ctx, 2, "num_segments"));
    const std::vector<int64_t>& d = data.shape().dims();
    bool prefix = ids_t.rank() <= data.rank();
    for (int k = 0; prefix && k < ids_t.rank(); ++k) prefix = ids_t.dim(k) == d[k];
    if (!prefix) {
      return ctx.Error(absl::StrCat("segment_ids shape ", ids_t.shape().DebugString(),
                                    " is not a prefix of data shape ", data.shape().DebugString()));
    }
    if (num < 0) return ctx.Error(absl::StrCat("num_segments = ", num, " is negative"));
    std::vector<int64_t> dims{num};
    dims.insert(dims.end(), d.begin() + ids_t.rank(), d.end());
    auto shape = TensorShape::Create(dims);
    if (!shape.ok()) return ctx.Annotate(shape.status());
    Tensor* out = ctx.allocate_output(0, *shape);
    T* o = out->data<T>();
    std::fill(o, o + out->NumElements(), T(0));
    const int64_t inner = Product(d, ids_t.rank(), d.size());
    const T* in = data.data<T>();
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= num) {
        return ctx.Error(
            absl::StrCat("segment_ids[", i, "] = ", ids[i], " is not in [0, ", num, ")"));
      }
      T* row = o + ids[i] * inner;
      const T* src = in + static_cast<int64_t>(i) * inner;
      for (int64_t k = 0; k < inner; ++k) row[k] += src[k];
    }
    return absl::OkStatus();
  }
};

// Unique(x) -> (y, idx) over a vector of T; idx is int32 or int64 (the node's output 1).
template <typename T>
class UniqueKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DTypeOf<T>() || x.rank() != 1) {
      return ctx.Error(absl::StrCat("x must be a ", DTypeName(DTypeOf<T>()), " vector, got ",
                                    DTypeName(x.dtype()), x.shape().DebugString()));
    }
    const DType idx_dtype = ctx.output_dtype(1);
    if (idx_dtype != DType::kInt32 && idx_dtype != DType::kInt64) {
      return ctx.Error(absl::StrCat("out_idx must be int32 or int64, got ", DTypeName(idx_dtype)));
    }
    const int64_t n = x.NumElements();
    if (idx_dtype == DType::kInt32 && n > std::numeric_limits<int32_t>::max()) {
      return ctx.Error(absl::StrCat("x has ", n, " elements, too many for int32 out_idx"));
    }
    const T* in = x.data<T>();
    std::unordered_map<T, int64_t> position;
    position.reserve(static_cast<size_t>(n));
    std::vector<T> unique;
    Tensor* idx = ctx.allocate_output(1, x.shape());
    for (int64_t i = 0; i < n; ++i) {
      auto [it, inserted] = position.try_emplace(in[i], static_cast<int64_t>(unique.size()));
      if (inserted) unique.push_back(in[i]);
      if (idx_dtype == DType::kInt32) {
        idx->data<int32_t>()[i] = static_cast<int32_t>(it->second);
      } else {
        idx->data<int64_t>()[i] = it->second;
      }
    }
    Tensor* y = ctx.allocate_output(0, TensorShape({static_cast<int64_t>(unique.size())}));
    std::copy(unique.begin(), unique.end(), y->data<T>());
    return absl::OkStatus();
  }
};

class OneHotKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    axis_ = GetAttrOr<int64_t>(node.attrs(), "axis", -1);
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadIndices(ctx, 0, "indices"));
    TANDEM_ASSIGN_OR_RETURN(int64_t depth, ReadIndexScalar(ctx, 1, "depth"));
    const Tensor& on = ctx.input(2);
    const Tensor& off = ctx.input(3);
    if (depth < 0) return ctx.Error(absl::StrCat("depth = ", depth, " is negative"));
    if (on.NumElements() != 1 || off.NumElements() != 1 || on.dtype() != off.dtype() ||
        DTypeSize(on.dtype()) == 0) {
      return ctx.Error("on_value and off_value must be scalars of one data type");
    }
    std::vector<int64_t> dims = ctx.input(0).shape().dims();
    const int rank = static_cast<int>(dims.size());
    if (axis_ < -1 || axis_ > rank) {
      return ctx.Error(absl::StrCat("axis ", axis_, " is out of range [-1, ", rank, "]"));
    }
    const int axis = axis_ == -1 ? rank : static_cast<int>(axis_);
    const int64_t suffix = Product(dims, axis, rank);
    dims.insert(dims.begin() + axis, depth);
    auto shape = TensorShape::Create(dims);
    if (!shape.ok()) return ctx.Annotate(shape.status());
    Tensor* out = ctx.allocate_output(0, *shape);
    const size_t elem = DTypeSize(on.dtype());
    char* dst = out->raw_data();
    for (int64_t k = 0; k < out->NumElements(); ++k) {
      std::memcpy(dst + k * elem, off.raw_data(), elem);
    }
    // Index i = (p, s) with p over dims before `axis` and s over the rest.
    for (size_t i = 0; i < idx.size(); ++i) {
      if (idx[i] < 0 || idx[i] >= depth) continue;  // TensorFlow: a row of off_value.
      const int64_t p = static_cast<int64_t>(i) / suffix, s = static_cast<int64_t>(i) % suffix;
      std::memcpy(dst + ((p * depth + idx[i]) * suffix + s) * elem, on.raw_data(), elem);
    }
    return absl::OkStatus();
  }

 private:
  int64_t axis_ = -1;
};

}  // namespace

void RegisterCpuArrayGatherKernels(KernelRegistry* r) {
  r->Register<GatherKernel>("GatherV2", kDeviceCpu, DType::kInvalid, "Tparams");
  r->Register<UnsortedSegmentSumKernel<float>>("UnsortedSegmentSum", kDeviceCpu, DType::kFloat);
  r->Register<UnsortedSegmentSumKernel<int32_t>>("UnsortedSegmentSum", kDeviceCpu, DType::kInt32);
  r->Register<UnsortedSegmentSumKernel<int64_t>>("UnsortedSegmentSum", kDeviceCpu, DType::kInt64);
  r->Register<UniqueKernel<float>>("Unique", kDeviceCpu, DType::kFloat);
  r->Register<UniqueKernel<int32_t>>("Unique", kDeviceCpu, DType::kInt32);
  r->Register<UniqueKernel<int64_t>>("Unique", kDeviceCpu, DType::kInt64);
  r->Register<OneHotKernel>("OneHot", kDeviceCpu);
}

}  // namespace tandem::array_kernels

// framework/kernels/cpu/array_kernels.cc
//
// CPU kernels of the basic structural ops: Const, Placeholder(WithDefault), Identity,
// StopGradient, NoOp, ZerosLike, OnesLike, Shape, Size, Rank, Reshape, Fill, Squeeze,
// ExpandDims, InvertPermutation; plus the helpers of array_util.h and the family's
// registration. Ops that only change the shape share the input buffer.
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/array_util.h"
#include "framework/kernels/cpu/cpu_kernels.h"

namespace tandem {
namespace array_kernels {

absl::StatusOr<std::vector<int64_t>> ReadIndexVector(const OpKernelContext& ctx, int i,
                                                     absl::string_view what) {
  const Tensor& t = ctx.input(i);
  if ((t.dtype() != DType::kInt32 && t.dtype() != DType::kInt64) || t.rank() > 1) {
    return ctx.Error(absl::StrCat(what, " must be an int32 or int64 vector, got ",
                                  DTypeName(t.dtype()), t.shape().DebugString()));
  }
  std::vector<int64_t> v(t.NumElements());
  if (t.dtype() == DType::kInt32) {
    for (size_t k = 0; k < v.size(); ++k) v[k] = t.flat<int32_t>()[k];
  } else {
    for (size_t k = 0; k < v.size(); ++k) v[k] = t.flat<int64_t>()[k];
  }
  return v;
}

absl::StatusOr<int64_t> ReadIndexScalar(const OpKernelContext& ctx, int i, absl::string_view what) {
  const Tensor& t = ctx.input(i);
  if ((t.dtype() != DType::kInt32 && t.dtype() != DType::kInt64) || t.NumElements() != 1 ||
      t.rank() > 1) {
    return ctx.Error(absl::StrCat(what, " must be an int32 or int64 scalar, got ",
                                  DTypeName(t.dtype()), t.shape().DebugString()));
  }
  return t.dtype() == DType::kInt32 ? int64_t{t.flat<int32_t>()[0]} : t.flat<int64_t>()[0];
}

absl::StatusOr<TensorShape> FillShape(const OpKernelContext& ctx) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ReadIndexVector(ctx, 0, "dims"));
  auto shape = TensorShape::Create(dims);
  if (!shape.ok()) return ctx.Annotate(shape.status());
  const Tensor& value = ctx.input(1);
  if (value.rank() != 0) {
    return ctx.Error(
        absl::StrCat("value must be a scalar, got shape ", value.shape().DebugString()));
  }
  return *shape;
}

absl::StatusOr<std::vector<bool>> ReducedAxes(const OpKernelContext& ctx, int rank) {
  std::vector<bool> reduced(rank, ctx.num_inputs() < 2);
  if (ctx.num_inputs() < 2) return reduced;
  const Tensor& axes = ctx.input(1);
  if (axes.rank() > 1) {
    return ctx.Error(
        absl::StrCat("axes must be a scalar or vector, got shape ", axes.shape().DebugString()));
  }
  if (axes.dtype() != DType::kInt32 && axes.dtype() != DType::kInt64) {
    return ctx.Error(absl::StrCat("axes must be int32 or int64, got ", DTypeName(axes.dtype())));
  }
  for (int64_t i = 0; i < axes.NumElements(); ++i) {
    int64_t a = axes.dtype() == DType::kInt32 ? axes.data<int32_t>()[i] : axes.data<int64_t>()[i];
    if (a < -rank || a >= rank) {
      return ctx.Error(absl::StrCat("axis ", a, " is out of range for input of shape ",
                                    ctx.input(0).shape().DebugString()));
    }
    reduced[a < 0 ? a + rank : a] = true;
  }
  return reduced;
}

std::vector<int64_t> RowMajorStrides(absl::Span<const int64_t> dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int d = static_cast<int>(dims.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * dims[d + 1];
  return s;
}

namespace {

template <typename T>
void CopyRowTyped(const char* in, char* out, int64_t n, int64_t is, int64_t os) {
  const T* src = reinterpret_cast<const T*>(in);
  T* dst = reinterpret_cast<T*>(out);
  for (int64_t k = 0; k < n; ++k) dst[k * os] = src[k * is];
}

void CopyRow(const char* in, char* out, size_t elem, int64_t n, int64_t is, int64_t os) {
  if (is == 1 && os == 1) {
    std::memcpy(out, in, static_cast<size_t>(n) * elem);
    return;
  }
  switch (elem) {
    case 1:
      return CopyRowTyped<uint8_t>(in, out, n, is, os);
    case 2:
      return CopyRowTyped<uint16_t>(in, out, n, is, os);
    case 4:
      return CopyRowTyped<uint32_t>(in, out, n, is, os);
    case 8:
      return CopyRowTyped<uint64_t>(in, out, n, is, os);
    default:
      for (int64_t k = 0; k < n; ++k) {
        std::memcpy(out + k * os * static_cast<int64_t>(elem),
                    in + k * is * static_cast<int64_t>(elem), elem);
      }
  }
}

}  // namespace

void StridedCopy(const char* in, char* out, size_t elem, absl::Span<const int64_t> dims,
                 absl::Span<const int64_t> in_strides, absl::Span<const int64_t> out_strides) {
  const int rank = static_cast<int>(dims.size());
  if (rank == 0) {
    std::memcpy(out, in, elem);
    return;
  }
  int64_t total = 1;
  for (int64_t d : dims) total *= d;
  if (total == 0) return;
  const int64_t inner = dims[rank - 1];
  const int64_t e = static_cast<int64_t>(elem);
  std::vector<int64_t> idx(rank, 0);
  int64_t in_off = 0, out_off = 0;
  for (int64_t o = total / inner; o > 0; --o) {
    CopyRow(in + in_off * e, out + out_off * e, elem, inner, in_strides[rank - 1],
            out_strides[rank - 1]);
    for (int d = rank - 2; d >= 0; --d) {
      in_off += in_strides[d];
      out_off += out_strides[d];
      if (++idx[d] < dims[d]) break;
      in_off -= in_strides[d] * dims[d];
      out_off -= out_strides[d] * dims[d];
      idx[d] = 0;
    }
  }
}

}  // namespace array_kernels

namespace {

using array_kernels::FillShape;
using array_kernels::ReadIndexScalar;
using array_kernels::ReadIndexVector;

class ConstKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(value_, GetAttr<Tensor>(node.attrs(), "value"));
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    ctx.set_output(0, value_);
    return absl::OkStatus();
  }

 private:
  Tensor value_;
};

class PlaceholderKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    PartialShape shape = GetAttrOr<PartialShape>(node().attrs(), "shape", PartialShape());
    return ctx.Error(absl::StrCat("You must feed a value for placeholder tensor '", name(),
                                  "' with dtype ", DTypeName(ctx.output_dtype(0)), " and shape ",
                                  shape.DebugString()));
  }
};

// Identity, StopGradient, PlaceholderWithDefault (unfed).
class ForwardKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    ctx.set_output(0, ctx.release_input(0));
    return absl::OkStatus();
  }
};

class NoOpKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext&) override { return absl::OkStatus(); }
};

template <int kValue>
class FilledLikeKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (DTypeSize(x.dtype()) == 0) return ctx.Error("input must be a data tensor");
    ctx.set_output(0, Tensor::Filled(x.dtype(), x.shape(), kValue));
    return absl::OkStatus();
  }
};

absl::Status SetIndex(OpKernelContext& ctx, Tensor* out, int64_t k, int64_t value) {
  if (out->dtype() == DType::kInt64) {
    out->flat<int64_t>()[k] = value;
    return absl::OkStatus();
  }
  if (value > std::numeric_limits<int32_t>::max()) {
    return ctx.Error(absl::StrCat("value ", value, " does not fit in int32; use out_type int64"));
  }
  out->flat<int32_t>()[k] = static_cast<int32_t>(value);
  return absl::OkStatus();
}

class ShapeKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    const TensorShape& s = ctx.input(0).shape();
    Tensor* out = ctx.allocate_output(0, TensorShape({s.rank()}));
    for (int d = 0; d < s.rank(); ++d) TANDEM_RETURN_IF_ERROR(SetIndex(ctx, out, d, s.dim(d)));
    return absl::OkStatus();
  }
};

class SizeKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    Tensor* out = ctx.allocate_output(0, TensorShape());
    return SetIndex(ctx, out, 0, ctx.input(0).NumElements());
  }
};

class RankKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    Tensor* out = ctx.allocate_output(0, TensorShape());
    return SetIndex(ctx, out, 0, ctx.input(0).rank());
  }
};

class ReshapeKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ReadIndexVector(ctx, 1, "shape"));
    const int64_t n = ctx.input(0).NumElements();
    int unknown = -1;
    int64_t product = 1;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] == -1 && unknown < 0) {
        unknown = static_cast<int>(i);
      } else if (dims[i] < 0) {
        return ctx.Error(absl::StrCat("bad shape [", absl::StrJoin(dims, ","),
                                      "]: only one -1 and no other negative dimension"));
      } else if (dims[i] != 0 && product > TensorShape::kMaxElements / dims[i]) {
        return ctx.Error(absl::StrCat("shape [", absl::StrJoin(dims, ","), "] is too large"));
      } else {
        product *= dims[i];
      }
    }
    if (unknown >= 0) {
      if (product == 0 || n % product != 0) {
        return ctx.Error(absl::StrCat("cannot reshape a tensor with ", n, " elements to shape [",
                                      absl::StrJoin(dims, ","), "]"));
      }
      dims[unknown] = n / product;
    } else if (product != n) {
      return ctx.Error(absl::StrCat(
          "cannot reshape a tensor of shape ", ctx.input(0).shape().DebugString(), " (", n,
          " elements) to shape [", absl::StrJoin(dims, ","), "] (", product, " elements)"));
    }
    TANDEM_ASSIGN_OR_RETURN(TensorShape shape, TensorShape::Create(dims));
    ctx.set_output(0, ctx.release_input(0).Reshaped(shape));
    return absl::OkStatus();
  }
};

class FillKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_ASSIGN_OR_RETURN(TensorShape shape, FillShape(ctx));
    const Tensor& value = ctx.input(1);
    Tensor* out = ctx.allocate_output(0, shape);
    const size_t elem = DTypeSize(value.dtype());
    char* dst = out->raw_data();
    for (int64_t k = 0; k < out->NumElements(); ++k) {
      std::memcpy(dst + k * elem, value.raw_data(), elem);
    }
    return absl::OkStatus();
  }
};

class SqueezeKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    axes_ = GetAttrOr<std::vector<int64_t>>(node.attrs(), "squeeze_dims", {});
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    const TensorShape& in = ctx.input(0).shape();
    std::vector<bool> drop(in.rank(), axes_.empty());
    for (int64_t a : axes_) {
      if (a < -in.rank() || a >= in.rank()) {
        return ctx.Error(
            absl::StrCat("squeeze dimension ", a, " is out of range for shape ", in.DebugString()));
      }
      int d = static_cast<int>(a < 0 ? a + in.rank() : a);
      if (in.dim(d) != 1) {
        return ctx.Error(absl::StrCat("cannot squeeze dimension ", d, " of shape ",
                                      in.DebugString(), ": its size is not 1"));
      }
      drop[d] = true;
    }
    std::vector<int64_t> dims;
    for (int d = 0; d < in.rank(); ++d) {
      if (!(drop[d] && in.dim(d) == 1)) dims.push_back(in.dim(d));
    }
    ctx.set_output(0, ctx.release_input(0).Reshaped(TensorShape(dims)));
    return absl::OkStatus();
  }

 private:
  std::vector<int64_t> axes_;
};

class ExpandDimsKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_ASSIGN_OR_RETURN(int64_t axis, ReadIndexScalar(ctx, 1, "axis"));
    const TensorShape& in = ctx.input(0).shape();
    const int64_t limit = in.rank() + 1;
    if (axis < -limit || axis >= limit) {
      return ctx.Error(absl::StrCat("axis ", axis, " is out of range [", -limit, ", ", limit,
                                    ") for shape ", in.DebugString()));
    }
    if (axis < 0) axis += limit;
    std::vector<int64_t> dims = in.dims();
    dims.insert(dims.begin() + axis, 1);
    TANDEM_ASSIGN_OR_RETURN(TensorShape shape, TensorShape::Create(dims));
    ctx.set_output(0, ctx.release_input(0).Reshaped(shape));
    return absl::OkStatus();
  }
};

class InvertPermutationKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> perm, ReadIndexVector(ctx, 0, "x"));
    const int64_t n = static_cast<int64_t>(perm.size());
    std::vector<int64_t> inv(n, -1);
    for (int64_t i = 0; i < n; ++i) {
      if (perm[i] < 0 || perm[i] >= n || inv[perm[i]] >= 0) {
        return ctx.Error(absl::StrCat("[", absl::StrJoin(perm, ","), "] is not a permutation"));
      }
      inv[perm[i]] = i;
    }
    Tensor* out = ctx.allocate_output(0, ctx.input(0).shape());
    for (int64_t i = 0; i < n; ++i) TANDEM_RETURN_IF_ERROR(SetIndex(ctx, out, i, inv[i]));
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterDeviceAgnosticArrayKernelsOn(KernelRegistry* r, const DeviceType& device) {
  for (DType d : {DType::kInt32, DType::kInt64, DType::kBool}) {
    r->Register<ConstKernel>("Const", device, d, "dtype");
  }
  r->Register<ForwardKernel>("Identity", device);
  r->Register<ReshapeKernel>("Reshape", device);
  r->Register<SqueezeKernel>("Squeeze", device);
  r->Register<ExpandDimsKernel>("ExpandDims", device);
}

void RegisterCpuArrayKernels(KernelRegistry* r) {
  // Structural kernels move bytes, so one registration serves every dtype.
  r->Register<ConstKernel>("Const", kDeviceCpu);
  r->Register<PlaceholderKernel>("Placeholder", kDeviceCpu);
  r->Register<ForwardKernel>("PlaceholderWithDefault", kDeviceCpu);
  r->Register<ForwardKernel>("Identity", kDeviceCpu);
  r->Register<ForwardKernel>("StopGradient", kDeviceCpu);
  r->Register<NoOpKernel>("NoOp", kDeviceCpu);
  r->Register<FilledLikeKernel<0>>("ZerosLike", kDeviceCpu);
  r->Register<FilledLikeKernel<1>>("OnesLike", kDeviceCpu);
  r->Register<ShapeKernel>("Shape", kDeviceCpu);
  r->Register<SizeKernel>("Size", kDeviceCpu);
  r->Register<RankKernel>("Rank", kDeviceCpu);
  r->Register<ReshapeKernel>("Reshape", kDeviceCpu);
  r->Register<FillKernel>("Fill", kDeviceCpu);
  r->Register<SqueezeKernel>("Squeeze", kDeviceCpu);
  r->Register<ExpandDimsKernel>("ExpandDims", kDeviceCpu);
  r->Register<InvertPermutationKernel>("InvertPermutation", kDeviceCpu);
  array_kernels::RegisterCpuArraySliceKernels(r);
  array_kernels::RegisterCpuArrayGatherKernels(r);
}

}  // namespace tandem

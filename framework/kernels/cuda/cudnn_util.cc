// framework/kernels/cuda/cudnn_util.cc
#include "framework/kernels/cuda/cudnn_util.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/status.h"

namespace tandem::gpu {
namespace {

constexpr int64_t kIntMax = std::numeric_limits<int>::max();

// UNIMPLEMENTED unless every size and their product fit cuDNN's int.
absl::Status CheckIntSizes(absl::string_view what, std::initializer_list<int64_t> sizes) {
  int64_t product = 1;
  bool fits = true;
  for (int64_t s : sizes) {
    if (s < 0 || s > kIntMax) {
      fits = false;
      break;
    }
    if (s != 0 && product > kIntMax / s) fits = false;
    product *= s;
  }
  if (fits && product <= kIntMax) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat("the cuDNN kernel handles ", what,
                                               " of at most 2^31-1 elements, got sizes [",
                                               absl::StrJoin(sizes, ","), "]"));
}

absl::StatusOr<std::vector<int64_t>> FourInts(const Node& node, const std::string& name) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> v,
                          GetAttr<std::vector<int64_t>>(node.attrs(), name));
  if (v.size() != 4 || v[0] != 1 || v[3] != 1 || v[1] < 1 || v[2] < 1) {
    return absl::InvalidArgumentError(absl::StrCat("attr '", name,
                                                   "' must be 4 positive ints [1, h, w, 1], got [",
                                                   absl::StrJoin(v, ","), "]"));
  }
  return v;
}

}  // namespace

absl::Status SetNhwcTensor(TensorDescriptor* d, int64_t n, int64_t h, int64_t w, int64_t c) {
  TANDEM_RETURN_IF_ERROR(CheckIntSizes("NHWC tensors", {n, h, w, c}));
  TANDEM_RETURN_IF_ERROR(d->Create());
  return CudnnStatus(
      cudnnSetTensor4dDescriptor(d->get(), CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, static_cast<int>(n),
                                 static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)),
      absl::StrCat("cudnnSetTensor4dDescriptor NHWC [", n, ",", h, ",", w, ",", c, "]"));
}

absl::Status SetOhwiFilter(FilterDescriptor* d, int64_t o, int64_t kh, int64_t kw, int64_t c) {
  TANDEM_RETURN_IF_ERROR(CheckIntSizes("filters", {o, kh, kw, c}));
  TANDEM_RETURN_IF_ERROR(d->Create());
  return CudnnStatus(
      cudnnSetFilter4dDescriptor(d->get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, static_cast<int>(o),
                                 static_cast<int>(c), static_cast<int>(kh), static_cast<int>(kw)),
      absl::StrCat("cudnnSetFilter4dDescriptor OHWI [", o, ",", kh, ",", kw, ",", c, "]"));
}

absl::StatusOr<WindowAttrs> ParseWindowAttrs(const Node& node, const std::string& second) {
  WindowAttrs a;
  TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> strides, FourInts(node, "strides"));
  TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> other, FourInts(node, second));
  a.stride_h = strides[1];
  a.stride_w = strides[2];
  a.second_h = other[1];
  a.second_w = other[2];
  TANDEM_ASSIGN_OR_RETURN(std::string padding, GetAttr<std::string>(node.attrs(), "padding"));
  if (padding != "SAME" && padding != "VALID") {
    return absl::InvalidArgumentError(
        absl::StrCat("padding must be SAME or VALID, got '", padding, "'"));
  }
  a.same = padding == "SAME";
  const std::string format = GetAttrOr<std::string>(node.attrs(), "data_format", "NHWC");
  if (format != "NHWC") {
    return absl::UnimplementedError(
        absl::StrCat("only data_format NHWC is supported, got '", format, "'"));
  }
  // cuDNN takes these as int.
  for (int64_t v : {a.stride_h, a.stride_w, a.second_h, a.second_w}) {
    if (v > kIntMax) {
      return absl::UnimplementedError(
          absl::StrCat("the cuDNN kernel takes strides and '", second, "' below 2^31, got ", v));
    }
  }
  return a;
}

absl::StatusOr<WindowDim> ComputeWindowDim(int64_t in, int64_t k, int64_t stride, int64_t dilation,
                                           bool same) {
  WindowDim w;
  const int64_t eff = (k - 1) * dilation + 1;
  if (same) {
    w.out = (in + stride - 1) / stride;
    const int64_t total = std::max<int64_t>((w.out - 1) * stride + eff - in, 0);
    w.pad_before = total / 2;
    w.pad_after = total - w.pad_before;
  } else {
    if (in < eff) {
      return absl::InvalidArgumentError(absl::StrCat("window of effective size ", eff,
                                                     " is larger than the input dimension ", in,
                                                     " with VALID padding"));
    }
    w.out = (in - eff) / stride + 1;
  }
  return w;
}

absl::Status ExpectDeviceFloat(const OpKernelContext& ctx, int i) {
  return ExpectDeviceInput(ctx, i, DType::kFloat);
}

absl::Status ExpectFloatOutput(const OpKernelContext& ctx, int i) {
  if (ctx.output_dtype(i) == DType::kFloat) return absl::OkStatus();
  return ctx.Annotate(absl::UnimplementedError(absl::StrCat(
      "the cuDNN kernel writes float32 only; output ", i, " is ", DTypeName(ctx.output_dtype(i)))));
}

absl::StatusOr<TensorShape> ShapeFromHostInput(const OpKernelContext& ctx, int i) {
  const Tensor& t = ctx.input(i);
  if ((t.dtype() != DType::kInt32 && t.dtype() != DType::kInt64) || t.rank() != 1 ||
      t.NumElements() != 4) {
    return ctx.Error(absl::StrCat("input ", i, " must be an int32/int64 vector of 4 sizes, got ",
                                  DTypeName(t.dtype()), t.shape().DebugString()));
  }
  if (!t.on_host()) {
    return ctx.Error(absl::StrCat("input ", i, " (sizes) must be in host memory"));
  }
  std::vector<int64_t> dims;
  for (int k = 0; k < 4; ++k) dims.push_back(static_cast<int64_t>(t.ValueAsDouble(k)));
  auto shape = TensorShape::Create(dims);
  if (!shape.ok()) return ctx.Annotate(shape.status());
  return *shape;
}

std::string InputShapes(const OpKernelContext& ctx) {
  std::vector<std::string> shapes;
  for (int i = 0; i < ctx.num_inputs(); ++i) shapes.push_back(ctx.input(i).shape().DebugString());
  return absl::StrJoin(shapes, " x ");
}

absl::Status ZeroOnDevice(GpuContext& gpu, Tensor* t) {
  if (t->TotalBytes() == 0) return absl::OkStatus();
  return CudaStatus(cudaMemsetAsync(t->raw_data(), 0, t->TotalBytes(), gpu.stream()),
                    "cudaMemsetAsync");
}

absl::StatusOr<Tensor> AllocateWorkspace(OpKernelContext& ctx, size_t bytes) {
  if (bytes == 0) return Tensor();
  const int64_t floats = static_cast<int64_t>((bytes + sizeof(float) - 1) / sizeof(float));
  return AllocateTemp(ctx, DType::kFloat, TensorShape({floats}));
}

}  // namespace tandem::gpu

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
  TANDEM_ASSIGN_OR_RETURN(WindowAttrs a, nn::ParseWindowAttrs(node, second));
  // cuDNN takes these as int.
  for (int64_t v : {a.stride_h, a.stride_w, a.second_h, a.second_w}) {
    if (v > kIntMax) {
      return absl::UnimplementedError(
          absl::StrCat("the cuDNN kernel takes strides and '", second, "' below 2^31, got ", v));
    }
  }
  return a;
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

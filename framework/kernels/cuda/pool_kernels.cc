// framework/kernels/cuda/pool_kernels.cc
//
// MaxPool, MaxPoolGrad(orig_input, orig_output, grad), AvgPool and
// AvgPoolGrad(orig_input_shape, grad) in float32 on cuDNN pooling over packed NHWC
// tensors, with TensorFlow's SAME/VALID windows as the CPU kernels compute them.
//
// cuDNN pads both sides equally; where SAME pads one pixel more after than before, the
// input is copied with that extra row/column at its end (conv_layout.h): -inf for max
// pooling, which never picks it, and zeros for average pooling. cuDNN's max pooling
// never picks its own padding either. Average pooling runs as
// CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING (sum / window size) rescaled per output
// by window size / pixels inside the input, which gives TensorFlow's average over the
// window's pixels inside the input; its gradient scales the incoming gradient the same
// way before cuDNN spreads it. Gradients of a padded input are cropped.
//
// MaxPoolGrad uses CUDNN_POOLING_MAX, as the forward: each window's gradient goes to
// one maximal element found from orig_input and orig_output. When a window holds its
// maximum more than once, the element cuDNN picks may differ from the CPU kernel's
// (the first in row-major order); the sum of the gradient is the same.
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "framework/core/status.h"
#include "framework/kernels/cuda/conv_layout.h"
#include "framework/kernels/cuda/cudnn_util.h"
#include "framework/kernels/cuda/gpu_context.h"

namespace tandem::gpu {
namespace {

// Input [n,h,w,c] -> output [n,oh,ow,c].
struct PoolGeometry {
  int64_t n, h, w, c, oh, ow;
  WindowDim dim_h, dim_w;

  TensorShape output_shape() const { return TensorShape({n, oh, ow, c}); }
  // The input as cuDNN sees it: extended at the bottom/right by what SAME pads after
  // beyond what it pads before (see conv_kernels.cc).
  int64_t padded_h() const { return h + dim_h.pad_after - dim_h.pad_before; }
  int64_t padded_w() const { return w + dim_w.pad_after - dim_w.pad_before; }
  bool padded() const { return padded_h() != h || padded_w() != w; }
  TensorShape padded_input_shape() const { return TensorShape({n, padded_h(), padded_w(), c}); }
};

absl::StatusOr<PoolGeometry> MakePoolGeometry(const OpKernelContext& ctx, const WindowAttrs& a,
                                              const TensorShape& input) {
  if (input.rank() != 4) {
    return ctx.Error(absl::StrCat("input must be NHWC (rank 4), got ", input.DebugString()));
  }
  PoolGeometry g{input.dim(0), input.dim(1), input.dim(2), input.dim(3), 0, 0, {}, {}};
  auto dh = ComputeWindowDim(g.h, a.second_h, a.stride_h, 1, a.same);
  auto dw = ComputeWindowDim(g.w, a.second_w, a.stride_w, 1, a.same);
  if (!dh.ok() || !dw.ok()) {
    return ctx.Error(
        absl::StrCat((dh.ok() ? dw : dh).status().message(), " (input ", input.DebugString(), ")"));
  }
  g.dim_h = *dh;
  g.dim_w = *dw;
  g.oh = dh->out;
  g.ow = dw->out;
  return g;
}

struct PoolDescriptors {
  TensorDescriptor x, y;  // input, output
  PoolingDescriptor pool;
};

// Describes `g` with `mode` to cuDNN, with the input as padded_input_shape() (x).
// Errors are annotated.
absl::Status MakePoolDescriptors(const OpKernelContext& ctx, const WindowAttrs& a,
                                 const PoolGeometry& g, cudnnPoolingMode_t mode,
                                 PoolDescriptors* d) {
  absl::Status s = [&]() -> absl::Status {
    TANDEM_RETURN_IF_ERROR(SetNhwcTensor(&d->x, g.n, g.padded_h(), g.padded_w(), g.c));
    TANDEM_RETURN_IF_ERROR(SetNhwcTensor(&d->y, g.n, g.oh, g.ow, g.c));
    TANDEM_RETURN_IF_ERROR(d->pool.Create());
    // The pads are below the window size, which ParseWindowAttrs kept below 2^31.
    TANDEM_RETURN_IF_ERROR(CudnnStatus(
        cudnnSetPooling2dDescriptor(d->pool.get(), mode, CUDNN_NOT_PROPAGATE_NAN,
                                    static_cast<int>(a.second_h), static_cast<int>(a.second_w),
                                    static_cast<int>(g.dim_h.pad_before),
                                    static_cast<int>(g.dim_w.pad_before),
                                    static_cast<int>(a.stride_h), static_cast<int>(a.stride_w)),
        "cudnnSetPooling2dDescriptor"));
    int n = 0, c = 0, h = 0, w = 0;
    TANDEM_RETURN_IF_ERROR(
        CudnnStatus(cudnnGetPooling2dForwardOutputDim(d->pool.get(), d->x.get(), &n, &c, &h, &w),
                    "cudnnGetPooling2dForwardOutputDim"));
    if (n != g.n || c != g.c || h != g.oh || w != g.ow) {
      return absl::InternalError(absl::StrCat("cuDNN computes output [", n, ",", h, ",", w, ",", c,
                                              "] where TensorFlow's rule gives ",
                                              g.output_shape().DebugString()));
    }
    return absl::OkStatus();
  }();
  return ctx.Annotate(s);
}

// The input as cuDNN sees it: `input` itself, or `*scratch` holding it extended at the
// bottom/right with `fill`.
absl::StatusOr<const float*> PaddedInput(OpKernelContext& ctx, GpuContext& gpu,
                                         const PoolGeometry& g, const Tensor& input, float fill,
                                         Tensor* scratch) {
  if (!g.padded()) return static_cast<const float*>(input.data<float>());
  TANDEM_ASSIGN_OR_RETURN(*scratch, AllocateTemp(ctx, DType::kFloat, g.padded_input_shape()));
  TANDEM_RETURN_IF_ERROR(ctx.Annotate(
      CudaStatus(LaunchPadNhwcEnd(input.data<float>(), scratch->data<float>(), g.n, g.h, g.w, g.c,
                                  g.padded_h(), g.padded_w(), fill, gpu.stream()),
                 "padding the pooling input")));
  return static_cast<const float*>(scratch->data<float>());
}

// Where cuDNN writes the input gradient: the output itself, or `*scratch` (the padded
// input's shape), which CropGradient then copies from.
absl::StatusOr<float*> GradientTarget(OpKernelContext& ctx, const PoolGeometry& g, Tensor* out,
                                      Tensor* scratch) {
  if (!g.padded()) return out->data<float>();
  TANDEM_ASSIGN_OR_RETURN(*scratch, AllocateTemp(ctx, DType::kFloat, g.padded_input_shape()));
  return scratch->data<float>();
}

absl::Status CropGradient(OpKernelContext& ctx, GpuContext& gpu, const PoolGeometry& g,
                          const float* dx, Tensor* out) {
  if (!g.padded()) return absl::OkStatus();
  return ctx.Annotate(CudaStatus(LaunchCropNhwcEnd(dx, out->data<float>(), g.n, g.h, g.w, g.c,
                                                   g.padded_h(), g.padded_w(), gpu.stream()),
                                 "cropping the padded input gradient"));
}

// Scales [n, oh, ow, c] `src` into `dst` by window size / window pixels inside the
// input (TensorFlow's average from cuDNN's include-padding one).
absl::Status ScaleByWindowCount(OpKernelContext& ctx, GpuContext& gpu, const WindowAttrs& a,
                                const PoolGeometry& g, const float* src, float* dst) {
  const PoolWindow win{g.h,        g.w,        a.second_h,         a.second_w,
                       a.stride_h, a.stride_w, g.dim_h.pad_before, g.dim_w.pad_before};
  return ctx.Annotate(
      CudaStatus(LaunchScaleByWindowCount(src, dst, g.n, g.oh, g.ow, g.c, win, gpu.stream()),
                 "average pooling window-count scaling"));
}

// Reads "ksize", "strides", "padding" at Init.
class PoolKernelBase : public GpuOpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(attrs_, ParseWindowAttrs(node, "ksize"));
    return absl::OkStatus();
  }

 protected:
  WindowAttrs attrs_;
};

// MaxPool(input) and AvgPool(input).
template <bool kMax>
class PoolKernel : public PoolKernelBase {
 public:
  absl::Status ComputeGpu(OpKernelContext& ctx, GpuContext& gpu) override {
    TANDEM_RETURN_IF_ERROR(ExpectDeviceFloat(ctx, 0));
    TANDEM_RETURN_IF_ERROR(ExpectFloatOutput(ctx, 0));
    const Tensor& input = ctx.input(0);
    TANDEM_ASSIGN_OR_RETURN(PoolGeometry g, MakePoolGeometry(ctx, attrs_, input.shape()));
    TANDEM_ASSIGN_OR_RETURN(Tensor * out, AllocateOutput(ctx, 0, g.output_shape()));
    // A non-empty output has a non-empty input: oh > 0 needs h > 0 (likewise w).
    if (out->NumElements() == 0) return absl::OkStatus();
    PoolDescriptors d;
    TANDEM_RETURN_IF_ERROR(MakePoolDescriptors(
        ctx, attrs_, g, kMax ? CUDNN_POOLING_MAX : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
        &d));
    Tensor padded;
    const float fill = kMax ? -std::numeric_limits<float>::infinity() : 0.0f;
    TANDEM_ASSIGN_OR_RETURN(const float* x, PaddedInput(ctx, gpu, g, input, fill, &padded));
    float* y = out->data<float>();
    const float one = 1.0f, zero = 0.0f;
    {
      absl::MutexLock lock(gpu.library_mu());
      TANDEM_RETURN_IF_ERROR(ctx.Annotate(CudnnStatus(
          cudnnPoolingForward(gpu.cudnn(), d.pool.get(), &one, d.x.get(), x, &zero, d.y.get(), y),
          "cudnnPoolingForward")));
    }
    if (kMax) return absl::OkStatus();
    return ScaleByWindowCount(ctx, gpu, attrs_, g, y, y);
  }
};

// MaxPoolGrad(orig_input, orig_output, grad).
class MaxPoolGradKernel : public PoolKernelBase {
 public:
  absl::Status ComputeGpu(OpKernelContext& ctx, GpuContext& gpu) override {
    for (int i = 0; i < 3; ++i) TANDEM_RETURN_IF_ERROR(ExpectDeviceFloat(ctx, i));
    TANDEM_RETURN_IF_ERROR(ExpectFloatOutput(ctx, 0));
    const Tensor& input = ctx.input(0);
    const Tensor& orig_output = ctx.input(1);
    const Tensor& grad = ctx.input(2);
    TANDEM_ASSIGN_OR_RETURN(PoolGeometry g, MakePoolGeometry(ctx, attrs_, input.shape()));
    if (grad.shape() != g.output_shape() || orig_output.shape() != g.output_shape()) {
      return ctx.Error(absl::StrCat("orig_output and grad must have the pooled shape ",
                                    g.output_shape().DebugString(), ": ", InputShapes(ctx)));
    }
    TANDEM_ASSIGN_OR_RETURN(Tensor * out, AllocateOutput(ctx, 0, input.shape()));
    if (out->NumElements() == 0) return absl::OkStatus();
    // Every pooled dimension is positive when the input is non-empty (SAME: ceil(h/s);
    // VALID: the window fits), so grad is non-empty here.
    PoolDescriptors d;
    TANDEM_RETURN_IF_ERROR(MakePoolDescriptors(ctx, attrs_, g, CUDNN_POOLING_MAX, &d));
    Tensor padded_x, padded_dx;
    TANDEM_ASSIGN_OR_RETURN(
        const float* x,
        PaddedInput(ctx, gpu, g, input, -std::numeric_limits<float>::infinity(), &padded_x));
    TANDEM_ASSIGN_OR_RETURN(float* dx, GradientTarget(ctx, g, out, &padded_dx));
    const float one = 1.0f, zero = 0.0f;
    {
      absl::MutexLock lock(gpu.library_mu());
      TANDEM_RETURN_IF_ERROR(ctx.Annotate(
          CudnnStatus(cudnnPoolingBackward(gpu.cudnn(), d.pool.get(), &one, d.y.get(),
                                           orig_output.data<float>(), d.y.get(), grad.data<float>(),
                                           d.x.get(), x, &zero, d.x.get(), dx),
                      "cudnnPoolingBackward (max)")));
    }
    return CropGradient(ctx, gpu, g, dx, out);
  }
};

// AvgPoolGrad(orig_input_shape, grad); orig_input_shape in host memory.
class AvgPoolGradKernel : public PoolKernelBase {
 public:
  absl::Status ComputeGpu(OpKernelContext& ctx, GpuContext& gpu) override {
    TANDEM_ASSIGN_OR_RETURN(TensorShape input_shape, ShapeFromHostInput(ctx, 0));
    TANDEM_RETURN_IF_ERROR(ExpectDeviceFloat(ctx, 1));
    TANDEM_RETURN_IF_ERROR(ExpectFloatOutput(ctx, 0));
    const Tensor& grad = ctx.input(1);
    TANDEM_ASSIGN_OR_RETURN(PoolGeometry g, MakePoolGeometry(ctx, attrs_, input_shape));
    if (grad.shape() != g.output_shape()) {
      return ctx.Error(absl::StrCat("grad has shape ", grad.shape().DebugString(), " but pooling ",
                                    input_shape.DebugString(), " gives ",
                                    g.output_shape().DebugString()));
    }
    TANDEM_ASSIGN_OR_RETURN(Tensor * out, AllocateOutput(ctx, 0, input_shape));
    if (out->NumElements() == 0) return absl::OkStatus();
    PoolDescriptors d;
    TANDEM_RETURN_IF_ERROR(
        MakePoolDescriptors(ctx, attrs_, g, CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, &d));
    // d(sum / count) = d(scale * sum / window size): cuDNN spreads grad * scale / size.
    TANDEM_ASSIGN_OR_RETURN(Tensor scaled, AllocateTemp(ctx, DType::kFloat, g.output_shape()));
    TANDEM_RETURN_IF_ERROR(
        ScaleByWindowCount(ctx, gpu, attrs_, g, grad.data<float>(), scaled.data<float>()));
    Tensor padded_dx;
    TANDEM_ASSIGN_OR_RETURN(float* dx, GradientTarget(ctx, g, out, &padded_dx));
    // Average pooling's backward reads neither y nor x; cuDNN still takes them, so
    // they name the scaled gradient (shaped like y) and dx (shaped like x).
    const float one = 1.0f, zero = 0.0f;
    {
      absl::MutexLock lock(gpu.library_mu());
      TANDEM_RETURN_IF_ERROR(ctx.Annotate(
          CudnnStatus(cudnnPoolingBackward(gpu.cudnn(), d.pool.get(), &one, d.y.get(),
                                           scaled.data<float>(), d.y.get(), scaled.data<float>(),
                                           d.x.get(), dx, &zero, d.x.get(), dx),
                      "cudnnPoolingBackward (average)")));
    }
    return CropGradient(ctx, gpu, g, dx, out);
  }
};

}  // namespace

void RegisterCudaPoolKernels(KernelRegistry* registry) {
  registry->Register<PoolKernel</*kMax=*/true>>("MaxPool", kDeviceGpu, DType::kFloat);
  registry->Register<MaxPoolGradKernel>("MaxPoolGrad", kDeviceGpu, DType::kFloat);
  registry->Register<PoolKernel</*kMax=*/false>>("AvgPool", kDeviceGpu, DType::kFloat);
  registry->Register<AvgPoolGradKernel>("AvgPoolGrad", kDeviceGpu, DType::kFloat);
}

}  // namespace tandem::gpu

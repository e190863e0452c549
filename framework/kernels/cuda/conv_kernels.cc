// framework/kernels/cuda/conv_kernels.cc
//
// Conv2D, _FusedConv2D, Conv2DBackpropInput and Conv2DBackpropFilter in float32 on
// cuDNN's legacy convolution API, and RegisterCudaConvKernels (these and the pooling
// kernels of pool_kernels.cc).
//
// Activations are packed NHWC tensors, described to cuDNN as they are. tandem's
// filters are HWIO, which cuDNN has no format for: each step transposes the filter to
// OHWI (cuDNN's NHWC filter format) in a scratch buffer (conv_layout.h), and the filter
// gradient is computed in OHWI and transposed back. Padding is TensorFlow's SAME/VALID
// as the CPU kernels compute it. cuDNN pads both sides equally; where SAME pads one
// pixel more after than before, the input is copied with that extra row/column of
// zeros at its end (conv_layout.h) and cuDNN pads the rest (the input gradient is
// computed for the padded input and cropped).
//
// Math is float32 FMA only (CUDNN_FMA_MATH: no TF32 tensor cores, whose 10-bit
// mantissa would miss the CPU results by far more than 1e-4). Each kernel object picks
// an algorithm per input/filter shape once, from cuDNN's heuristics (the first that is
// supported in FMA math with a workspace of at most 256 MiB), and keeps it. _FusedConv2D runs the
// convolution, then adds the bias (cudnnAddTensor) and applies the ReLU
// (cudnnActivationForward) in place.
#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "framework/core/status.h"
#include "framework/kernels/cuda/conv_layout.h"
#include "framework/kernels/cuda/cuda_kernels.h"
#include "framework/kernels/cuda/cudnn_util.h"
#include "framework/kernels/cuda/gpu_context.h"

namespace tandem {
namespace gpu {
namespace {

constexpr size_t kMaxWorkspaceBytes = size_t{256} << 20;

// Input [n,h,w,c], filter [kh,kw,c,o], output [n,oh,ow,o].
struct ConvGeometry {
  int64_t n, h, w, c, kh, kw, o, oh, ow;
  WindowDim dim_h, dim_w;

  TensorShape input_shape() const { return TensorShape({n, h, w, c}); }
  TensorShape filter_shape() const { return TensorShape({kh, kw, c, o}); }
  TensorShape output_shape() const { return TensorShape({n, oh, ow, o}); }
  // The input as cuDNN sees it: extended at the bottom/right by what SAME pads after
  // beyond what it pads before, so that cuDNN's equal padding on both sides (of
  // pad_before) gives TensorFlow's windows. The same as the input unless padded().
  int64_t padded_h() const { return h + dim_h.pad_after - dim_h.pad_before; }
  int64_t padded_w() const { return w + dim_w.pad_after - dim_w.pad_before; }
  bool padded() const { return padded_h() != h || padded_w() != w; }
  TensorShape padded_input_shape() const { return TensorShape({n, padded_h(), padded_w(), c}); }
  // The attrs are fixed per kernel object, so the shapes identify the problem.
  std::array<int64_t, 7> Key() const { return {n, h, w, c, kh, kw, o}; }
};

absl::StatusOr<ConvGeometry> MakeConvGeometry(const OpKernelContext& ctx, const WindowAttrs& a,
                                              const TensorShape& input, const TensorShape& filter) {
  if (input.rank() != 4 || filter.rank() != 4) {
    return ctx.Error(absl::StrCat("input must be NHWC and filter HWIO (rank 4), got input ",
                                  input.DebugString(), " and filter ", filter.DebugString()));
  }
  if (input.dim(3) != filter.dim(2)) {
    return ctx.Error(absl::StrCat("input channels ", input.dim(3),
                                  " differ from filter in-channels ", filter.dim(2), " (input ",
                                  input.DebugString(), ", filter ", filter.DebugString(), ")"));
  }
  if (filter.dim(0) < 1 || filter.dim(1) < 1) {
    return ctx.Error(
        absl::StrCat("filter height and width must be positive, got ", filter.DebugString()));
  }
  ConvGeometry g{input.dim(0),
                 input.dim(1),
                 input.dim(2),
                 input.dim(3),
                 filter.dim(0),
                 filter.dim(1),
                 filter.dim(3),
                 0,
                 0,
                 {},
                 {}};
  auto dh = ComputeWindowDim(g.h, g.kh, a.stride_h, a.second_h, a.same);
  auto dw = ComputeWindowDim(g.w, g.kw, a.stride_w, a.second_w, a.same);
  if (!dh.ok() || !dw.ok()) {
    return ctx.Error(absl::StrCat((dh.ok() ? dw : dh).status().message(), " (input ",
                                  input.DebugString(), ", filter ", filter.DebugString(), ")"));
  }
  g.dim_h = *dh;
  g.dim_w = *dw;
  g.oh = dh->out;
  g.ow = dw->out;
  return g;
}

// Checks out_backprop has the shape the forward convolution would produce.
absl::Status CheckOutBackprop(const OpKernelContext& ctx, const ConvGeometry& g,
                              const Tensor& out_backprop) {
  if (out_backprop.shape() == g.output_shape()) return absl::OkStatus();
  return ctx.Error(absl::StrCat("out_backprop has shape ", out_backprop.shape().DebugString(),
                                " but the convolution of ", g.input_shape().DebugString(), " by ",
                                g.filter_shape().DebugString(), " gives ",
                                g.output_shape().DebugString()));
}

struct ConvDescriptors {
  TensorDescriptor x, y;  // input, output
  FilterDescriptor w;     // OHWI
  ConvolutionDescriptor conv;
};

// Describes `g` to cuDNN, with the input as padded_input_shape() (x). Errors are
// annotated.
absl::Status MakeConvDescriptors(const OpKernelContext& ctx, const WindowAttrs& a,
                                 const ConvGeometry& g, ConvDescriptors* d) {
  absl::Status s = [&]() -> absl::Status {
    TANDEM_RETURN_IF_ERROR(SetNhwcTensor(&d->x, g.n, g.padded_h(), g.padded_w(), g.c));
    TANDEM_RETURN_IF_ERROR(SetNhwcTensor(&d->y, g.n, g.oh, g.ow, g.o));
    TANDEM_RETURN_IF_ERROR(SetOhwiFilter(&d->w, g.o, g.kh, g.kw, g.c));
    // Pads are below the effective window, which fits the (int) input when VALID and
    // exceeds it by less than a stride when SAME; still, check before narrowing.
    if (g.dim_h.pad_before > (int64_t{1} << 30) || g.dim_w.pad_before > (int64_t{1} << 30)) {
      return absl::UnimplementedError("padding too large for cuDNN");
    }
    TANDEM_RETURN_IF_ERROR(d->conv.Create());
    TANDEM_RETURN_IF_ERROR(CudnnStatus(
        cudnnSetConvolution2dDescriptor(d->conv.get(), static_cast<int>(g.dim_h.pad_before),
                                        static_cast<int>(g.dim_w.pad_before),
                                        static_cast<int>(a.stride_h), static_cast<int>(a.stride_w),
                                        static_cast<int>(a.second_h), static_cast<int>(a.second_w),
                                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
        "cudnnSetConvolution2dDescriptor"));
    TANDEM_RETURN_IF_ERROR(CudnnStatus(cudnnSetConvolutionMathType(d->conv.get(), CUDNN_FMA_MATH),
                                       "cudnnSetConvolutionMathType"));
    int n = 0, c = 0, h = 0, w = 0;
    TANDEM_RETURN_IF_ERROR(CudnnStatus(cudnnGetConvolution2dForwardOutputDim(
                                           d->conv.get(), d->x.get(), d->w.get(), &n, &c, &h, &w),
                                       "cudnnGetConvolution2dForwardOutputDim"));
    if (n != g.n || c != g.o || h != g.oh || w != g.ow) {
      return absl::InternalError(absl::StrCat("cuDNN computes output [", n, ",", h, ",", w, ",", c,
                                              "] where TensorFlow's rule gives ",
                                              g.output_shape().DebugString()));
    }
    return absl::OkStatus();
  }();
  return ctx.Annotate(s);
}

template <typename Algo>
struct AlgoChoice {
  Algo algo;
  size_t workspace_bytes = 0;
};

// Algorithms picked so far, by shape (one cache per kernel object and direction).
template <typename Algo>
class AlgoCache {
 public:
  std::optional<AlgoChoice<Algo>> Find(const std::array<int64_t, 7>& key) const {
    absl::MutexLock lock(&mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return std::nullopt;
    return it->second;
  }
  void Insert(const std::array<int64_t, 7>& key, const AlgoChoice<Algo>& choice) {
    absl::MutexLock lock(&mu_);
    map_[key] = choice;
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::array<int64_t, 7>, AlgoChoice<Algo>> map_ ABSL_GUARDED_BY(mu_);
};

// The first of `perf` (cuDNN's heuristic order, as PyTorch takes it without
// benchmarking) that cuDNN supports, that is not tensor-op (TF32) math, and whose
// workspace (workspace_of(algo, &bytes)) fits.
template <typename Algo, typename Perf, typename WorkspaceFn>
absl::StatusOr<AlgoChoice<Algo>> FirstUsable(const std::vector<Perf>& perf, int returned,
                                             const WorkspaceFn& workspace_of,
                                             absl::string_view what) {
  const int count = std::min(returned, static_cast<int>(perf.size()));
  for (int i = 0; i < count; ++i) {
    const Perf& p = perf[i];
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    if (p.mathType == CUDNN_TENSOR_OP_MATH || p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) {
      continue;
    }
    size_t bytes = 0;
    if (workspace_of(p.algo, &bytes) != CUDNN_STATUS_SUCCESS) continue;
    if (bytes > kMaxWorkspaceBytes) continue;
    return AlgoChoice<Algo>{p.algo, bytes};
  }
  return absl::UnimplementedError(
      absl::StrCat("cuDNN offers no ", what,
                   " algorithm for this convolution in float32 FMA math with at most 256 MiB "
                   "of workspace (",
                   returned, " candidates)"));
}

// The cached algorithm of `key`, or pick(), cached. Errors are annotated.
template <typename Algo, typename PickFn>
absl::StatusOr<AlgoChoice<Algo>> CachedAlgo(const OpKernelContext& ctx, AlgoCache<Algo>* cache,
                                            const std::array<int64_t, 7>& key, const PickFn& pick) {
  if (auto hit = cache->Find(key)) return *hit;
  absl::StatusOr<AlgoChoice<Algo>> choice = pick();
  if (!choice.ok()) return ctx.Annotate(choice.status());
  cache->Insert(key, *choice);
  return *choice;
}

absl::StatusOr<AlgoChoice<cudnnConvolutionFwdAlgo_t>> PickForward(GpuContext& gpu,
                                                                  const ConvDescriptors& d) {
  absl::MutexLock lock(gpu.library_mu());
  std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
  int returned = 0;
  TANDEM_RETURN_IF_ERROR(CudnnStatus(cudnnGetConvolutionForwardAlgorithm_v7(
                                         gpu.cudnn(), d.x.get(), d.w.get(), d.conv.get(), d.y.get(),
                                         static_cast<int>(perf.size()), &returned, perf.data()),
                                     "cudnnGetConvolutionForwardAlgorithm_v7"));
  return FirstUsable<cudnnConvolutionFwdAlgo_t>(
      perf, returned,
      [&](cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
        return cudnnGetConvolutionForwardWorkspaceSize(gpu.cudnn(), d.x.get(), d.w.get(),
                                                       d.conv.get(), d.y.get(), algo, bytes);
      },
      "forward");
}

absl::StatusOr<AlgoChoice<cudnnConvolutionBwdDataAlgo_t>> PickBackwardData(
    GpuContext& gpu, const ConvDescriptors& d) {
  absl::MutexLock lock(gpu.library_mu());
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
  int returned = 0;
  TANDEM_RETURN_IF_ERROR(CudnnStatus(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                                         gpu.cudnn(), d.w.get(), d.y.get(), d.conv.get(), d.x.get(),
                                         static_cast<int>(perf.size()), &returned, perf.data()),
                                     "cudnnGetConvolutionBackwardDataAlgorithm_v7"));
  return FirstUsable<cudnnConvolutionBwdDataAlgo_t>(
      perf, returned,
      [&](cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(gpu.cudnn(), d.w.get(), d.y.get(),
                                                            d.conv.get(), d.x.get(), algo, bytes);
      },
      "backward-data");
}

absl::StatusOr<AlgoChoice<cudnnConvolutionBwdFilterAlgo_t>> PickBackwardFilter(
    GpuContext& gpu, const ConvDescriptors& d) {
  absl::MutexLock lock(gpu.library_mu());
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
  int returned = 0;
  TANDEM_RETURN_IF_ERROR(CudnnStatus(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                                         gpu.cudnn(), d.x.get(), d.y.get(), d.conv.get(), d.w.get(),
                                         static_cast<int>(perf.size()), &returned, perf.data()),
                                     "cudnnGetConvolutionBackwardFilterAlgorithm_v7"));
  return FirstUsable<cudnnConvolutionBwdFilterAlgo_t>(
      perf, returned,
      [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(gpu.cudnn(), d.x.get(), d.y.get(),
                                                              d.conv.get(), d.w.get(), algo, bytes);
      },
      "backward-filter");
}

// The HWIO filter `filter` of `g` as a new OHWI device tensor.
absl::StatusOr<Tensor> FilterToOhwi(OpKernelContext& ctx, GpuContext& gpu, const ConvGeometry& g,
                                    const Tensor& filter) {
  TANDEM_ASSIGN_OR_RETURN(Tensor ohwi,
                          AllocateTemp(ctx, DType::kFloat, TensorShape({g.o, g.kh, g.kw, g.c})));
  TANDEM_RETURN_IF_ERROR(
      ctx.Annotate(CudaStatus(LaunchTransposeFloat(filter.data<float>(), ohwi.data<float>(),
                                                   g.kh * g.kw * g.c, g.o, gpu.stream()),
                              "HWIO->OHWI filter transpose")));
  return ohwi;
}

// The input as cuDNN sees it (ConvGeometry::padded_input_shape): `input` itself, or
// `*scratch` holding it padded with zeros at the bottom/right.
absl::StatusOr<const float*> PaddedInput(OpKernelContext& ctx, GpuContext& gpu,
                                         const ConvGeometry& g, const Tensor& input,
                                         Tensor* scratch) {
  if (!g.padded()) return input.data<float>();
  TANDEM_ASSIGN_OR_RETURN(*scratch, AllocateTemp(ctx, DType::kFloat, g.padded_input_shape()));
  TANDEM_RETURN_IF_ERROR(ctx.Annotate(
      CudaStatus(LaunchPadNhwcEnd(input.data<float>(), scratch->data<float>(), g.n, g.h, g.w, g.c,
                                  g.padded_h(), g.padded_w(), 0.0f, gpu.stream()),
                 "padding the convolution input")));
  return static_cast<const float*>(scratch->data<float>());
}

// Adds `bias` ([o]) to every pixel of the output `y` (described by `y_desc`), then
// applies ReLU when `relu`, in place. REQUIRES: gpu.library_mu() held.
absl::Status AddBiasAndRelu(GpuContext& gpu, const TensorDescriptor& y_desc, float* y,
                            const Tensor& bias, int64_t o, bool relu) {
  const float one = 1.0f, zero = 0.0f;
  TensorDescriptor bias_desc;
  TANDEM_RETURN_IF_ERROR(SetNhwcTensor(&bias_desc, 1, 1, 1, o));
  TANDEM_RETURN_IF_ERROR(CudnnStatus(
      cudnnAddTensor(gpu.cudnn(), &one, bias_desc.get(), bias.data<float>(), &one, y_desc.get(), y),
      "cudnnAddTensor (bias)"));
  if (!relu) return absl::OkStatus();
  ActivationDescriptor act;
  TANDEM_RETURN_IF_ERROR(act.Create());
  TANDEM_RETURN_IF_ERROR(CudnnStatus(
      cudnnSetActivationDescriptor(act.get(), CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0),
      "cudnnSetActivationDescriptor"));
  return CudnnStatus(
      cudnnActivationForward(gpu.cudnn(), act.get(), &one, y_desc.get(), y, &zero, y_desc.get(), y),
      "cudnnActivationForward (relu)");
}

class ConvKernelBase : public GpuOpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(attrs_, ParseWindowAttrs(node, "dilations"));
    return absl::OkStatus();
  }

 protected:
  WindowAttrs attrs_;
};

// Conv2D(input, filter), and _FusedConv2D(input, filter, bias) with attr activation
// "none" or "relu".
class Conv2DKernel : public ConvKernelBase {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_RETURN_IF_ERROR(ConvKernelBase::Init(node));
    fused_ = node.op() == "_FusedConv2D";
    if (fused_) {
      const std::string act = GetAttrOr<std::string>(node.attrs(), "activation", "none");
      if (act != "none" && act != "relu") {
        return absl::InvalidArgumentError(
            absl::StrCat("activation must be \"none\" or \"relu\", got \"", act, "\""));
      }
      relu_ = act == "relu";
    }
    return absl::OkStatus();
  }

  absl::Status ComputeGpu(OpKernelContext& ctx, GpuContext& gpu) override {
    TANDEM_RETURN_IF_ERROR(ExpectDeviceFloat(ctx, 0));
    TANDEM_RETURN_IF_ERROR(ExpectDeviceFloat(ctx, 1));
    TANDEM_RETURN_IF_ERROR(ExpectFloatOutput(ctx, 0));
    const Tensor& input = ctx.input(0);
    const Tensor& filter = ctx.input(1);
    TANDEM_ASSIGN_OR_RETURN(ConvGeometry g,
                            MakeConvGeometry(ctx, attrs_, input.shape(), filter.shape()));
    if (fused_) {
      if (ctx.num_inputs() != 3) return ctx.Error("_FusedConv2D takes (input, filter, bias)");
      TANDEM_RETURN_IF_ERROR(ExpectDeviceFloat(ctx, 2));
      const Tensor& bias = ctx.input(2);
      if (bias.rank() != 1 || bias.dim(0) != g.o) {
        return ctx.Error(absl::StrCat("bias must be a float32 vector of ", g.o,
                                      " (the output channels): ", InputShapes(ctx)));
      }
    }
    TANDEM_ASSIGN_OR_RETURN(Tensor * out, AllocateOutput(ctx, 0, g.output_shape()));
    if (out->NumElements() == 0) return absl::OkStatus();
    float* y = out->data<float>();
    if (g.c == 0) {
      // An empty sum: zeros, then act(bias) for the fused op.
      TANDEM_RETURN_IF_ERROR(ctx.Annotate(ZeroOnDevice(gpu, out)));
      if (!fused_) return absl::OkStatus();
      TensorDescriptor y_desc;
      TANDEM_RETURN_IF_ERROR(ctx.Annotate(SetNhwcTensor(&y_desc, g.n, g.oh, g.ow, g.o)));
      absl::MutexLock lock(gpu.library_mu());
      return ctx.Annotate(AddBiasAndRelu(gpu, y_desc, y, ctx.input(2), g.o, relu_));
    }
    ConvDescriptors d;
    TANDEM_RETURN_IF_ERROR(MakeConvDescriptors(ctx, attrs_, g, &d));
    TANDEM_ASSIGN_OR_RETURN(auto algo,
                            CachedAlgo(ctx, &algos_, g.Key(), [&] { return PickForward(gpu, d); }));
    TANDEM_ASSIGN_OR_RETURN(Tensor ohwi, FilterToOhwi(ctx, gpu, g, filter));
    Tensor padded;
    TANDEM_ASSIGN_OR_RETURN(const float* x, PaddedInput(ctx, gpu, g, input, &padded));
    TANDEM_ASSIGN_OR_RETURN(Tensor workspace, AllocateWorkspace(ctx, algo.workspace_bytes));
    const float one = 1.0f, zero = 0.0f;
    absl::MutexLock lock(gpu.library_mu());
    TANDEM_RETURN_IF_ERROR(ctx.Annotate(CudnnStatus(
        cudnnConvolutionForward(gpu.cudnn(), &one, d.x.get(), x, d.w.get(), ohwi.data<float>(),
                                d.conv.get(), algo.algo, WorkspacePtr(workspace),
                                algo.workspace_bytes, &zero, d.y.get(), y),
        "cudnnConvolutionForward")));
    if (!fused_) return absl::OkStatus();
    return ctx.Annotate(AddBiasAndRelu(gpu, d.y, y, ctx.input(2), g.o, relu_));
  }

 private:
  bool fused_ = false;
  bool relu_ = false;
  AlgoCache<cudnnConvolutionFwdAlgo_t> algos_;
};

// Conv2DBackpropInput(input_sizes, filter, out_backprop); input_sizes in host memory.
class Conv2DBackpropInputKernel : public ConvKernelBase {
 public:
  absl::Status ComputeGpu(OpKernelContext& ctx, GpuContext& gpu) override {
    TANDEM_ASSIGN_OR_RETURN(TensorShape input_shape, ShapeFromHostInput(ctx, 0));
    TANDEM_RETURN_IF_ERROR(ExpectDeviceFloat(ctx, 1));
    TANDEM_RETURN_IF_ERROR(ExpectDeviceFloat(ctx, 2));
    TANDEM_RETURN_IF_ERROR(ExpectFloatOutput(ctx, 0));
    const Tensor& filter = ctx.input(1);
    const Tensor& grad = ctx.input(2);
    TANDEM_ASSIGN_OR_RETURN(ConvGeometry g,
                            MakeConvGeometry(ctx, attrs_, input_shape, filter.shape()));
    TANDEM_RETURN_IF_ERROR(CheckOutBackprop(ctx, g, grad));
    TANDEM_ASSIGN_OR_RETURN(Tensor * out, AllocateOutput(ctx, 0, input_shape));
    if (out->NumElements() == 0) return absl::OkStatus();
    if (grad.NumElements() == 0) return ctx.Annotate(ZeroOnDevice(gpu, out));  // o == 0
    ConvDescriptors d;
    TANDEM_RETURN_IF_ERROR(MakeConvDescriptors(ctx, attrs_, g, &d));
    TANDEM_ASSIGN_OR_RETURN(
        auto algo, CachedAlgo(ctx, &algos_, g.Key(), [&] { return PickBackwardData(gpu, d); }));
    TANDEM_ASSIGN_OR_RETURN(Tensor ohwi, FilterToOhwi(ctx, gpu, g, filter));
    // With end padding, cuDNN writes the padded input's gradient, cropped afterwards.
    Tensor padded;
    float* dx = out->data<float>();
    if (g.padded()) {
      TANDEM_ASSIGN_OR_RETURN(padded, AllocateTemp(ctx, DType::kFloat, g.padded_input_shape()));
      dx = padded.data<float>();
    }
    TANDEM_ASSIGN_OR_RETURN(Tensor workspace, AllocateWorkspace(ctx, algo.workspace_bytes));
    const float one = 1.0f, zero = 0.0f;
    {
      absl::MutexLock lock(gpu.library_mu());
      TANDEM_RETURN_IF_ERROR(ctx.Annotate(
          CudnnStatus(cudnnConvolutionBackwardData(gpu.cudnn(), &one, d.w.get(), ohwi.data<float>(),
                                                   d.y.get(), grad.data<float>(), d.conv.get(),
                                                   algo.algo, WorkspacePtr(workspace),
                                                   algo.workspace_bytes, &zero, d.x.get(), dx),
                      "cudnnConvolutionBackwardData")));
    }
    if (!g.padded()) return absl::OkStatus();
    return ctx.Annotate(CudaStatus(LaunchCropNhwcEnd(dx, out->data<float>(), g.n, g.h, g.w, g.c,
                                                     g.padded_h(), g.padded_w(), gpu.stream()),
                                   "cropping the padded input gradient"));
  }

 private:
  AlgoCache<cudnnConvolutionBwdDataAlgo_t> algos_;
};

// Conv2DBackpropFilter(input, filter_sizes, out_backprop); filter_sizes in host
// memory. The gradient is computed in OHWI, then transposed into the HWIO output.
class Conv2DBackpropFilterKernel : public ConvKernelBase {
 public:
  absl::Status ComputeGpu(OpKernelContext& ctx, GpuContext& gpu) override {
    TANDEM_RETURN_IF_ERROR(ExpectDeviceFloat(ctx, 0));
    TANDEM_ASSIGN_OR_RETURN(TensorShape filter_shape, ShapeFromHostInput(ctx, 1));
    TANDEM_RETURN_IF_ERROR(ExpectDeviceFloat(ctx, 2));
    TANDEM_RETURN_IF_ERROR(ExpectFloatOutput(ctx, 0));
    const Tensor& input = ctx.input(0);
    const Tensor& grad = ctx.input(2);
    TANDEM_ASSIGN_OR_RETURN(ConvGeometry g,
                            MakeConvGeometry(ctx, attrs_, input.shape(), filter_shape));
    TANDEM_RETURN_IF_ERROR(CheckOutBackprop(ctx, g, grad));
    TANDEM_ASSIGN_OR_RETURN(Tensor * out, AllocateOutput(ctx, 0, filter_shape));
    if (out->NumElements() == 0) return absl::OkStatus();
    // No pixels (n, h or w zero): an empty sum.
    if (input.NumElements() == 0 || grad.NumElements() == 0) {
      return ctx.Annotate(ZeroOnDevice(gpu, out));
    }
    ConvDescriptors d;
    TANDEM_RETURN_IF_ERROR(MakeConvDescriptors(ctx, attrs_, g, &d));
    TANDEM_ASSIGN_OR_RETURN(
        auto algo, CachedAlgo(ctx, &algos_, g.Key(), [&] { return PickBackwardFilter(gpu, d); }));
    TANDEM_ASSIGN_OR_RETURN(Tensor ohwi,
                            AllocateTemp(ctx, DType::kFloat, TensorShape({g.o, g.kh, g.kw, g.c})));
    Tensor padded;
    TANDEM_ASSIGN_OR_RETURN(const float* x, PaddedInput(ctx, gpu, g, input, &padded));
    TANDEM_ASSIGN_OR_RETURN(Tensor workspace, AllocateWorkspace(ctx, algo.workspace_bytes));
    const float one = 1.0f, zero = 0.0f;
    {
      absl::MutexLock lock(gpu.library_mu());
      TANDEM_RETURN_IF_ERROR(ctx.Annotate(
          CudnnStatus(cudnnConvolutionBackwardFilter(gpu.cudnn(), &one, d.x.get(), x, d.y.get(),
                                                     grad.data<float>(), d.conv.get(), algo.algo,
                                                     WorkspacePtr(workspace), algo.workspace_bytes,
                                                     &zero, d.w.get(), ohwi.data<float>()),
                      "cudnnConvolutionBackwardFilter")));
    }
    // OHWI [o, kh*kw*c] -> HWIO [kh*kw*c, o], queued after the gradient on the stream.
    return ctx.Annotate(CudaStatus(LaunchTransposeFloat(ohwi.data<float>(), out->data<float>(), g.o,
                                                        g.kh * g.kw * g.c, gpu.stream()),
                                   "OHWI->HWIO filter gradient transpose"));
  }

 private:
  AlgoCache<cudnnConvolutionBwdFilterAlgo_t> algos_;
};

}  // namespace
}  // namespace gpu

void RegisterCudaConvKernels(KernelRegistry* registry) {
  registry->Register<gpu::Conv2DKernel>("Conv2D", kDeviceGpu, DType::kFloat);
  registry->Register<gpu::Conv2DKernel>("_FusedConv2D", kDeviceGpu, DType::kFloat);
  registry->Register<gpu::Conv2DBackpropInputKernel>("Conv2DBackpropInput", kDeviceGpu,
                                                     DType::kFloat);
  registry->Register<gpu::Conv2DBackpropFilterKernel>("Conv2DBackpropFilter", kDeviceGpu,
                                                      DType::kFloat);
  gpu::RegisterCudaPoolKernels(registry);
}

}  // namespace tandem

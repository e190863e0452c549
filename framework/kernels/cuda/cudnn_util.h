// framework/kernels/cuda/cudnn_util.h
//
// What the cuDNN kernels (conv_kernels.cc, pool_kernels.cc) share, not for use
// elsewhere: owning wrappers of cuDNN descriptors, float32 NHWC tensor and OHWI filter
// descriptors from tandem's int64 sizes, TensorFlow's SAME/VALID window geometry (as
// the CPU kernels compute it, framework/kernels/cpu/nn_kernel_util.h), the window
// attrs read at Init, input checks, and the pooling registration that
// RegisterCudaConvKernels calls.
//
// cuDNN's legacy API pads both sides of a dimension equally; TensorFlow's SAME puts
// the odd pixel of an odd total padding after. The kernels extend such inputs at the
// end themselves (conv_layout.h) and let cuDNN pad pad_before on both sides.
//
// Thread safety: descriptors are per call; the functions are pure or take a context.
#ifndef TANDEM_FRAMEWORK_KERNELS_CUDA_CUDNN_UTIL_H_
#define TANDEM_FRAMEWORK_KERNELS_CUDA_CUDNN_UTIL_H_

#include <cudnn.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "framework/core/status.h"
#include "framework/graph/graph.h"
#include "framework/kernels/cpu/nn_kernel_util.h"
#include "framework/kernels/cuda/gpu_context.h"
#include "framework/kernels/kernel_registry.h"
#include "framework/kernels/op_kernel.h"
#include "framework/tensor/tensor.h"

namespace tandem::gpu {

// An owned cuDNN descriptor: null until Create succeeds, destroyed with its owner.
template <typename T, cudnnStatus_t (*kCreate)(T*), cudnnStatus_t (*kDestroy)(T)>
class CudnnDescriptor {
 public:
  CudnnDescriptor() = default;
  ~CudnnDescriptor() {
    if (d_ != nullptr) kDestroy(d_);
  }
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;

  absl::Status Create() {
    if (d_ != nullptr) return absl::OkStatus();
    T d = nullptr;
    TANDEM_RETURN_IF_ERROR(CudnnStatus(kCreate(&d), "cudnnCreate*Descriptor"));
    d_ = d;
    return absl::OkStatus();
  }
  T get() const { return d_; }

 private:
  T d_ = nullptr;
};

using TensorDescriptor = CudnnDescriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor,
                                         cudnnDestroyTensorDescriptor>;
using FilterDescriptor = CudnnDescriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor,
                                         cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor =
    CudnnDescriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                    cudnnDestroyConvolutionDescriptor>;
using PoolingDescriptor = CudnnDescriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor,
                                          cudnnDestroyPoolingDescriptor>;
using ActivationDescriptor =
    CudnnDescriptor<cudnnActivationDescriptor_t, cudnnCreateActivationDescriptor,
                    cudnnDestroyActivationDescriptor>;

// Creates `d` as a packed float32 NHWC tensor [n, h, w, c]. UNIMPLEMENTED when a size
// or the element count does not fit cuDNN's int.
absl::Status SetNhwcTensor(TensorDescriptor* d, int64_t n, int64_t h, int64_t w, int64_t c);
// Creates `d` as a float32 OHWI filter (cuDNN's NHWC filter format, KRSC): `o` output
// channels of [kh, kw, c].
absl::Status SetOhwiFilter(FilterDescriptor* d, int64_t o, int64_t kh, int64_t kw, int64_t c);

// Window attrs and geometry are the CPU kernels' (nn_kernel_util.h: TensorFlow's
// SAME/VALID rule); ParseWindowAttrs adds cuDNN's int limits.
using nn::ComputeWindowDim;
using nn::WindowAttrs;
using nn::WindowDim;
absl::StatusOr<WindowAttrs> ParseWindowAttrs(const Node& node, const std::string& second);

// Checks input i is float32 (UNIMPLEMENTED otherwise) and, when it has elements, in
// the GPU's memory (INVALID_ARGUMENT otherwise).
absl::Status ExpectDeviceFloat(const OpKernelContext& ctx, int i);
// UNIMPLEMENTED unless output i is float32.
absl::Status ExpectFloatOutput(const OpKernelContext& ctx, int i);

// The shape held by input i, a host int32/int64 vector of 4 sizes (input_sizes,
// filter_sizes, orig_input_shape).
absl::StatusOr<TensorShape> ShapeFromHostInput(const OpKernelContext& ctx, int i);

using nn::InputShapes;  // "[2,3] x [4,5]"-style list of the input shapes.

// Sets every byte of `t` (a device tensor) to 0, which is 0.0f, on the GPU's stream.
absl::Status ZeroOnDevice(GpuContext& gpu, Tensor* t);

// A device scratch of at least `bytes` bytes (a float32 tensor, since only float types
// live on the GPU); an uninitialized Tensor, with no buffer, when bytes == 0.
absl::StatusOr<Tensor> AllocateWorkspace(OpKernelContext& ctx, size_t bytes);
// The workspace's device pointer (null when it has no buffer).
inline void* WorkspacePtr(const Tensor& t) { return t.raw_data(); }

// MaxPool, MaxPoolGrad, AvgPool, AvgPoolGrad (pool_kernels.cc).
void RegisterCudaPoolKernels(KernelRegistry* registry);

}  // namespace tandem::gpu

#endif  // TANDEM_FRAMEWORK_KERNELS_CUDA_CUDNN_UTIL_H_

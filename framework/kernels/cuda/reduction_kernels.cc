// framework/kernels/cuda/reduction_kernels.cc
//
// GPU kernels of Sum and Mean over float32, with the CPU kernels' attrs (keep_dims),
// axes (input 1, int32 or int64 in host memory; absent means every axis), checks and
// empty-input results (Sum 0, Mean NaN). As on the CPU, the input's dimensions are
// merged into alternating runs of kept and reduced dimensions with size-1 dimensions
// dropped. One reduced run, [outer, reduce, inner] (reduce-all, a bias gradient, Mean
// over the batch, a row sum, ...), is one two-kernel sum (reduction_kernels.cu); with
// several reduced runs ([R, K, R] ...) the last run is summed away first and the
// result reduced again, pass by pass. Sums accumulate in float32.
#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/array_util.h"
#include "framework/kernels/cuda/cuda_launchers.h"
#include "framework/kernels/cuda/gpu_context.h"
#include "framework/kernels/kernel_registry.h"

namespace tandem::gpu {
namespace {

template <bool kMean>
class ReductionKernel : public GpuOpKernel {
 public:
  absl::Status Init(const Node& node) override {
    keep_dims_ = GetAttrOr<bool>(node.attrs(), "keep_dims", false);
    return absl::OkStatus();
  }

  absl::Status ComputeGpu(OpKernelContext& ctx, GpuContext& gpu) override {
    const Tensor& in = ctx.input(0);
    TANDEM_RETURN_IF_ERROR(ExpectDeviceInput(ctx, 0, DType::kFloat));
    const int rank = in.rank();
    TANDEM_ASSIGN_OR_RETURN(std::vector<bool> reduced, array_kernels::ReducedAxes(ctx, rank));
    TensorShape out_shape;
    int64_t count = 1;  // Input elements per output element.
    Dims dims;          // Merged runs, size-1 dimensions dropped.
    std::vector<bool> dim_reduced;
    for (int i = 0; i < rank; ++i) {
      const int64_t d = in.dim(i);
      if (reduced[i]) {
        count *= d;
        if (keep_dims_) out_shape.AddDim(1);
      } else {
        out_shape.AddDim(d);
      }
      if (d == 1) continue;
      if (!dims.empty() && dim_reduced.back() == reduced[i]) {
        dims.back() *= d;
      } else {
        dims.push_back(d);
        dim_reduced.push_back(reduced[i]);
      }
    }
    TANDEM_ASSIGN_OR_RETURN(Tensor * out, AllocateOutput(ctx, 0, out_shape));
    const int64_t n_out = out_shape.num_elements();
    if (n_out == 0) return absl::OkStatus();
    float* o = out->data<float>();
    if (in.NumElements() == 0) {
      // The sum of nothing; Mean divides it by a zero count.
      const float value = kMean ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
      return CudaStatus(LaunchFill(o, n_out, value, gpu.stream()), node().op());
    }
    if (std::find(dim_reduced.begin(), dim_reduced.end(), true) == dim_reduced.end()) {
      // Nothing reduced but size-1 dimensions: a copy (count is 1).
      return CudaStatus(cudaMemcpyAsync(o, in.data<float>(), in.TotalBytes(),
                                        cudaMemcpyDeviceToDevice, gpu.stream()),
                        node().op());
    }
    // Pass by pass, the last reduced run is summed away: x viewed as [outer, reduce,
    // inner] becomes [outer, inner], the remaining runs merged again. One pass when the
    // reduced dimensions are one run; the last pass writes the output (and divides).
    const float divisor = kMean ? static_cast<float>(count) : 1.0f;
    const float* src = in.data<float>();
    Tensor intermediate;  // The previous pass's result, when there was one.
    while (true) {
      const int nd = static_cast<int>(dims.size());
      int run = nd - 1;
      while (!dim_reduced[run]) --run;  // There is a reduced run.
      int64_t outer = 1, inner = 1;
      for (int d = 0; d < run; ++d) outer *= dims[d];
      for (int d = run + 1; d < nd; ++d) inner *= dims[d];
      const int64_t reduce = dims[run];
      Dims next_dims;
      std::vector<bool> next_reduced;
      for (int d = 0; d < nd; ++d) {
        if (d == run) continue;
        if (!next_dims.empty() && next_reduced.back() == dim_reduced[d]) {
          next_dims.back() *= dims[d];
        } else {
          next_dims.push_back(dims[d]);
          next_reduced.push_back(dim_reduced[d]);
        }
      }
      const bool last =
          std::find(next_reduced.begin(), next_reduced.end(), true) == next_reduced.end();
      Tensor next;
      if (!last) {
        TANDEM_ASSIGN_OR_RETURN(next,
                                AllocateTemp(ctx, DType::kFloat, TensorShape({outer * inner})));
      }
      const int64_t chunks = ReduceChunks(outer, reduce, inner);
      TANDEM_ASSIGN_OR_RETURN(
          Tensor partial, AllocateTemp(ctx, DType::kFloat, TensorShape({outer * chunks * inner})));
      TANDEM_RETURN_IF_ERROR(CudaStatus(
          LaunchReduceSum(src, partial.data<float>(), last ? o : next.data<float>(), outer, reduce,
                          inner, chunks, last ? divisor : 1.0f, gpu.stream()),
          node().op()));
      if (last) return absl::OkStatus();
      // Buffers released here are reused only by work queued later on the stream.
      intermediate = std::move(next);
      src = intermediate.data<float>();
      dims = std::move(next_dims);
      dim_reduced = std::move(next_reduced);
    }
  }

 private:
  bool keep_dims_ = false;
};

}  // namespace

// Called by RegisterCudaMathKernels (cwise_kernels.cc).
void RegisterCudaReductionKernels(KernelRegistry* r) {
  r->Register<ReductionKernel<false>>("Sum", kDeviceGpu, DType::kFloat);
  r->Register<ReductionKernel<true>>("Mean", kDeviceGpu, DType::kFloat);
}

}  // namespace tandem::gpu

// framework/kernels/cuda/matmul_kernels.cc
//
// GPU kernels of MatMul and _FusedMatMul on cuBLAS (cublasGemmEx, float32 compute and
// the default math mode: no TF32, so float32 products match the CPU's to rounding).
//   float32 x float32 -> float32;
//   bfloat16 x bfloat16 -> bfloat16, or float32 with attr Tout = float32 (MatMul only);
// float32 accumulation in every case. Tandem tensors are row-major and cuBLAS is
// column-major, so C = op(A) op(B) runs as C^T = op(B)^T op(A)^T on the same bytes.
// _FusedMatMul (the remapper's MatMul + BiasAdd [+ Relu], attrs as MatMul's plus
// "activation" = "none" or "relu", inputs a, b, bias) adds the bias and the ReLU in a
// second kernel (nn_kernels.cu); for bfloat16 the product stays float32 until that
// kernel rounds it once, as the CPU's oneDNN primitive does.
#include <climits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/fused_bias.h"
#include "framework/kernels/cpu/nn_kernel_util.h"
#include "framework/kernels/cuda/cuda_kernels.h"
#include "framework/kernels/cuda/cuda_launchers.h"
#include "framework/kernels/cuda/gpu_context.h"

namespace tandem {
namespace gpu {
namespace {

// Input i has `dtype` and, unless empty, is in GPU memory.
cudaDataType CudaType(DType dtype) { return dtype == DType::kBFloat16 ? CUDA_R_16BF : CUDA_R_32F; }

// Row-major c[m, n] = op(a) op(b), op(a) [m, k], op(b) [k, n], in c_type.
// REQUIRES: m, n, k >= 1 and <= INT_MAX.
absl::Status Gemm(GpuContext& gpu, const void* a, const void* b, cudaDataType ab_type, void* c,
                  cudaDataType c_type, int m, int n, int k, bool ta, bool tb) {
  const float alpha = 1.0f, beta = 0.0f;
  absl::MutexLock lock(gpu.library_mu());
  cublasHandle_t h = gpu.cublas();
  TANDEM_RETURN_IF_ERROR(
      CublasStatus(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode"));
  TANDEM_RETURN_IF_ERROR(
      CublasStatus(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode"));
  // Column-major: C^T [n, m] = op(B)^T [n, k] x op(A)^T [k, m]. Row-major b is
  // column-major b^T with leading dimension its row length, likewise a and c.
  return CublasStatus(
      cublasGemmEx(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                   &alpha, b, ab_type, tb ? k : n, a, ab_type, ta ? m : k, &beta, c, c_type, n,
                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx");
}

// MatMul(a, b), and _FusedMatMul(a, b, bias) with attr activation; `dtype` is the
// operands'.
class MatMulKernel : public GpuOpKernel {
 public:
  explicit MatMulKernel(DType dtype) : dtype_(dtype) {}

  absl::Status Init(const Node& node) override {
    transpose_a_ = GetAttrOr<bool>(node.attrs(), "transpose_a", false);
    transpose_b_ = GetAttrOr<bool>(node.attrs(), "transpose_b", false);
    TANDEM_ASSIGN_OR_RETURN(fusion_, nn::ParseFusion(node, "_FusedMatMul"));
    return absl::OkStatus();
  }

  absl::Status ComputeGpu(OpKernelContext& ctx, GpuContext& gpu) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (a.dtype() != b.dtype()) {
      return ctx.Error(absl::StrCat("operands differ in dtype: ", DTypeName(a.dtype()), " and ",
                                    DTypeName(b.dtype())));
    }
    TANDEM_RETURN_IF_ERROR(ExpectDeviceInput(ctx, 0, dtype_));
    TANDEM_RETURN_IF_ERROR(ExpectDeviceInput(ctx, 1, dtype_));
    if (a.rank() != 2 || b.rank() != 2) {
      return ctx.Error(absl::StrCat("both operands must be matrices: ", nn::InputShapes(ctx)));
    }
    const int64_t m = a.dim(transpose_a_ ? 1 : 0), k = a.dim(transpose_a_ ? 0 : 1);
    const int64_t k2 = b.dim(transpose_b_ ? 1 : 0), n = b.dim(transpose_b_ ? 0 : 1);
    if (k != k2) {
      return ctx.Error(absl::StrCat("inner dimensions differ: ", k, " vs ", k2, " (",
                                    nn::InputShapes(ctx), ", transpose_a=", transpose_a_,
                                    ", transpose_b=", transpose_b_, ")"));
    }
    if (fusion_.bias) {
      TANDEM_RETURN_IF_ERROR(nn::CheckBias(ctx, n));
      TANDEM_RETURN_IF_ERROR(ExpectDeviceInput(ctx, 2, dtype_));
    }
    const DType out_dtype = ctx.output_dtype(0);
    if (out_dtype != dtype_ &&
        !(dtype_ == DType::kBFloat16 && out_dtype == DType::kFloat && !fusion_.bias)) {
      return ctx.Error(absl::StrCat("cannot write a ", DTypeName(out_dtype), " product of ",
                                    DTypeName(dtype_), " operands"));
    }
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX) {
      return ctx.Annotate(absl::UnimplementedError(
          absl::StrCat("cuBLAS takes dimensions below 2^31: ", nn::InputShapes(ctx))));
    }
    TANDEM_ASSIGN_OR_RETURN(Tensor * c, AllocateOutput(ctx, 0, TensorShape({m, n})));
    if (m == 0 || n == 0) return absl::OkStatus();

    // The product goes to `c`, or to a float32 scratch when a bfloat16 result gets a
    // bias first.
    const bool via_scratch = fusion_.bias && dtype_ == DType::kBFloat16;
    Tensor scratch;
    if (via_scratch) {
      TANDEM_ASSIGN_OR_RETURN(scratch, AllocateTemp(ctx, DType::kFloat, TensorShape({m, n})));
    }
    Tensor* product = via_scratch ? &scratch : c;
    if (k == 0) {  // An empty sum; all-zero bits are 0.0 in both dtypes.
      TANDEM_RETURN_IF_ERROR(
          CudaStatus(cudaMemsetAsync(product->raw_data(), 0, product->TotalBytes(), gpu.stream()),
                     "cudaMemsetAsync"));
    } else {
      TANDEM_RETURN_IF_ERROR(
          ctx.Annotate(Gemm(gpu, a.raw_data(), b.raw_data(), CudaType(dtype_), product->raw_data(),
                            CudaType(product->dtype()), static_cast<int>(m), static_cast<int>(n),
                            static_cast<int>(k), transpose_a_, transpose_b_)));
    }
    if (!fusion_.bias) return absl::OkStatus();
    const Tensor& bias = ctx.input(2);
    cudaError_t e;
    if (dtype_ == DType::kFloat) {
      e = LaunchBiasAdd(c->data<float>(), bias.data<float>(), c->data<float>(), m, n, fusion_.relu,
                        gpu.stream());
    } else {
      e = LaunchBiasAddFloatToBf16(
          scratch.data<float>(), reinterpret_cast<const __nv_bfloat16*>(bias.raw_data()),
          reinterpret_cast<__nv_bfloat16*>(c->raw_data()), m, n, fusion_.relu, gpu.stream());
    }
    return CudaStatus(e, "_FusedMatMul bias");
  }

 private:
  const DType dtype_;
  bool transpose_a_ = false;
  bool transpose_b_ = false;
  nn::Fusion fusion_;
};

}  // namespace
}  // namespace gpu

void RegisterCudaMatMulKernels(KernelRegistry* r) {
  for (const char* op : {"MatMul", "_FusedMatMul"}) {
    for (DType dtype : {DType::kFloat, DType::kBFloat16}) {
      r->Register(op, kDeviceGpu, dtype,
                  [dtype] { return std::make_unique<gpu::MatMulKernel>(dtype); });
    }
  }
}

}  // namespace tandem

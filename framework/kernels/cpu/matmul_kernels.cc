// framework/kernels/cpu/matmul_kernels.cc
//
// MatMul on oneDNN's matmul primitive. Transposes are expressed through the strides of
// the memory descriptors (a transposed [K,M] operand is read as [M,K] with strides
// {1, M}), so no operand is ever copied. One primitive per (M, K, N, transposes),
// from the shared PrimitiveCache.
//
// float32 x float32 -> float32, and bfloat16 x bfloat16 -> bfloat16 with float32
// accumulation inside oneDNN (the mixed-precision path). Where oneDNN has no bf16
// kernels for the CPU (below AVX-512), the bf16 product runs in float32 on widened
// copies and is rounded once at the end. With attr Tout = float32, bfloat16 operands
// give a float32 product (oneDNN writes its float32 accumulators unrounded).
// _FusedMatMul adds a bias row and, with activation "relu", a ReLU post-op.
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/fused_bias.h"
#include "framework/kernels/cpu/nn_kernel_util.h"
#include "framework/kernels/cpu/onednn_util.h"

namespace tandem::nn {
namespace {

using dnnl::memory;

struct MatMulPrimitive {
  dnnl::matmul prim;
  memory::desc a_md, b_md, bias_md, c_md;
};

// MatMul(a, b), and _FusedMatMul(a, b, bias) with attr activation.
class MatMulKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    transpose_a_ = GetAttrOr<bool>(node.attrs(), "transpose_a", false);
    transpose_b_ = GetAttrOr<bool>(node.attrs(), "transpose_b", false);
    TANDEM_ASSIGN_OR_RETURN(fusion_, ParseFusion(node, "_FusedMatMul"));
    return absl::OkStatus();
  }

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    TANDEM_RETURN_IF_ERROR(ExpectFloatOrBf16Input(ctx, 0));
    TANDEM_RETURN_IF_ERROR(ExpectFloatOrBf16Input(ctx, 1));
    if (a.dtype() != b.dtype()) {
      return ctx.Error(absl::StrCat("operands differ in dtype: ", DTypeName(a.dtype()), " and ",
                                    DTypeName(b.dtype())));
    }
    if (a.rank() != 2 || b.rank() != 2) {
      return ctx.Error(absl::StrCat("both operands must be matrices: ", InputShapes(ctx)));
    }
    const int64_t m = a.dim(transpose_a_ ? 1 : 0), k = a.dim(transpose_a_ ? 0 : 1);
    const int64_t k2 = b.dim(transpose_b_ ? 1 : 0), n = b.dim(transpose_b_ ? 0 : 1);
    if (k != k2) {
      return ctx.Error(absl::StrCat("inner dimensions differ: ", k, " vs ", k2, " (",
                                    InputShapes(ctx), ", transpose_a=", transpose_a_,
                                    ", transpose_b=", transpose_b_, ")"));
    }
    if (fusion_.bias) TANDEM_RETURN_IF_ERROR(CheckBias(ctx, n));
    Tensor* c = ctx.allocate_output(0, TensorShape({m, n}));
    if (m == 0 || n == 0) return absl::OkStatus();
    if (k == 0) {
      std::memset(c->raw_data(), 0, c->TotalBytes());  // All-zero bits are 0.0 in both dtypes.
      if (fusion_.bias) FillWithBias(ctx.input(2), fusion_.relu, c);
      return absl::OkStatus();
    }
    return onednn::RunWidenedIfNeeded(a, b, c, [&](const Tensor& x, const Tensor& y, Tensor* z) {
      return Multiply(ctx, x, y, m, k, n, z);
    });
  }

 private:
  // c = op(a) op(b) in a's dtype.
  absl::Status Multiply(const OpKernelContext& ctx, const Tensor& a, const Tensor& b, int64_t m,
                        int64_t k, int64_t n, Tensor* c) const {
    const bool ta = transpose_a_, tb = transpose_b_;
    const memory::data_type dt = onednn::DataType(a.dtype());
    const memory::data_type cdt = onednn::DataType(c->dtype());
    const Fusion f = fusion_;
    const std::string key =
        absl::StrCat("matmul:", m, ",", k, ",", n, ",", ta, tb, ",", static_cast<int>(dt), ",",
                     static_cast<int>(cdt), ",", f.bias, f.relu);
    TANDEM_ASSIGN_OR_RETURN(
        auto p, onednn::Cached<MatMulPrimitive>(ctx, key, [m, k, n, ta, tb, dt, cdt, f]() {
          MatMulPrimitive p;
          p.a_md = onednn::StridedDesc({m, k}, ta ? memory::dims{1, m} : memory::dims{k, 1}, dt);
          p.b_md = onednn::StridedDesc({k, n}, tb ? memory::dims{1, k} : memory::dims{n, 1}, dt);
          p.bias_md = onednn::StridedDesc({1, n}, {n, 1}, dt);
          p.c_md = onednn::StridedDesc({m, n}, {n, 1}, cdt);
          const dnnl::matmul::desc d = f.bias
                                           ? dnnl::matmul::desc(p.a_md, p.b_md, p.bias_md, p.c_md)
                                           : dnnl::matmul::desc(p.a_md, p.b_md, p.c_md);
          p.prim = dnnl::matmul(
              dnnl::matmul::primitive_desc(d, onednn::AttrWithRelu(f.relu), onednn::CpuEngine()));
          return p;
        }));
    return onednn::Guard(ctx, [&]() {
      if (!f.bias) {
        onednn::ExecuteCached(p->prim, {{DNNL_ARG_SRC, p->a_md, a.raw_data()},
                                        {DNNL_ARG_WEIGHTS, p->b_md, b.raw_data()},
                                        {DNNL_ARG_DST, p->c_md, c->raw_data()}});
        return absl::OkStatus();
      }
      const Tensor bias = BiasAs(ctx.input(2), a.dtype());
      onednn::ExecuteCached(p->prim, {{DNNL_ARG_SRC, p->a_md, a.raw_data()},
                                      {DNNL_ARG_WEIGHTS, p->b_md, b.raw_data()},
                                      {DNNL_ARG_BIAS, p->bias_md, bias.raw_data()},
                                      {DNNL_ARG_DST, p->c_md, c->raw_data()}});
      return absl::OkStatus();
    });
  }

  bool transpose_a_ = false;
  bool transpose_b_ = false;
  Fusion fusion_;
};

}  // namespace

void RegisterCpuMatMulKernels(KernelRegistry* r) {
  r->Register<MatMulKernel>("MatMul", kDeviceCpu);
  r->Register<MatMulKernel>("_FusedMatMul", kDeviceCpu);
}

}  // namespace tandem::nn

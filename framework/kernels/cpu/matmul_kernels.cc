// framework/kernels/cpu/matmul_kernels.cc
//
// MatMul on oneDNN's matmul primitive. Transposes are expressed through the strides of
// the memory descriptors (a transposed [K,M] operand is read as [M,K] with strides
// {1, M}), so no operand is ever copied. One primitive per (M, K, N, transposes),
// from the shared PrimitiveCache.
#include <string>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/nn_kernel_util.h"
#include "framework/kernels/cpu/onednn_util.h"

namespace tandem::nn {
namespace {

using dnnl::memory;

struct MatMulPrimitive {
  dnnl::matmul prim;
  memory::desc a_md, b_md, c_md;
};

class MatMulKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    transpose_a_ = GetAttrOr<bool>(node.attrs(), "transpose_a", false);
    transpose_b_ = GetAttrOr<bool>(node.attrs(), "transpose_b", false);
    return absl::OkStatus();
  }

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    TANDEM_RETURN_IF_ERROR(ExpectFloatInput(ctx, 0));
    TANDEM_RETURN_IF_ERROR(ExpectFloatInput(ctx, 1));
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
    Tensor* c = ctx.allocate_output(0, TensorShape({m, n}));
    if (m == 0 || n == 0) return absl::OkStatus();
    if (k == 0) {
      std::fill_n(c->data<float>(), m * n, 0.0f);
      return absl::OkStatus();
    }
    const bool ta = transpose_a_, tb = transpose_b_;
    const std::string key = absl::StrCat("matmul:", m, ",", k, ",", n, ",", ta, tb);
    TANDEM_ASSIGN_OR_RETURN(
        auto p, onednn::Cached<MatMulPrimitive>(ctx, key, [m, k, n, ta, tb]() {
          MatMulPrimitive p;
          p.a_md = onednn::StridedDesc({m, k}, ta ? memory::dims{1, m} : memory::dims{k, 1});
          p.b_md = onednn::StridedDesc({k, n}, tb ? memory::dims{1, k} : memory::dims{n, 1});
          p.c_md = onednn::StridedDesc({m, n}, {n, 1});
          dnnl::matmul::desc d(p.a_md, p.b_md, p.c_md);
          p.prim =
              dnnl::matmul(dnnl::matmul::primitive_desc(d, onednn::Attr(), onednn::CpuEngine()));
          return p;
        }));
    return onednn::Guard(ctx, [&]() {
      onednn::ExecuteCached(p->prim, {{DNNL_ARG_SRC, p->a_md, a.raw_data()},
                                      {DNNL_ARG_WEIGHTS, p->b_md, b.raw_data()},
                                      {DNNL_ARG_DST, p->c_md, c->raw_data()}});
      return absl::OkStatus();
    });
  }

 private:
  bool transpose_a_ = false;
  bool transpose_b_ = false;
};

}  // namespace

void RegisterCpuMatMulKernels(KernelRegistry* r) {
  r->Register<MatMulKernel>("MatMul", kDeviceCpu);
}

}  // namespace tandem::nn

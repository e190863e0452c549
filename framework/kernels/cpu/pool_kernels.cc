// framework/kernels/cpu/pool_kernels.cc
//
// AvgPool and AvgPoolGrad (NHWC, TensorFlow's SAME/VALID windows, padding excluded
// from the average) on oneDNN pooling primitives, and the registration of every pooling
// kernel. (MaxPool runs on loops, pool_max_kernels.cc: oneDNN 2.6's
// NHWC max pooling measured 2x slower than a loop, and its backward needs a workspace
// that TensorFlow's MaxPoolGrad signature does not carry.)
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/nn_kernel_util.h"
#include "framework/kernels/cpu/onednn_util.h"
#include "framework/kernels/cpu/pool_util.h"

namespace tandem::nn {
namespace {

using dnnl::memory;
using Tag = dnnl::memory::format_tag;

memory::desc SrcDesc(const PoolGeometry& s) {
  return onednn::TagDesc({s.n, s.c, s.h, s.w}, Tag::nhwc);
}
memory::desc DstDesc(const PoolGeometry& s) {
  return onednn::TagDesc({s.n, s.c, s.oh, s.ow}, Tag::nhwc);
}

std::string Key(const PoolGeometry& s, absl::string_view kind) {
  return absl::StrCat(kind, ":", s.n, ",", s.h, ",", s.w, ",", s.c, ",", s.attrs.second_h, ",",
                      s.attrs.second_w, ",", s.attrs.stride_h, ",", s.attrs.stride_w, ",",
                      s.attrs.same);
}

dnnl::pooling_forward::desc ForwardDesc(const PoolGeometry& s, dnnl::prop_kind kind,
                                        dnnl::algorithm alg) {
  return dnnl::pooling_forward::desc(
      kind, alg, SrcDesc(s), DstDesc(s), {s.attrs.stride_h, s.attrs.stride_w},
      {s.attrs.second_h, s.attrs.second_w}, {s.dim_h.pad_before, s.dim_w.pad_before},
      {s.dim_h.pad_after, s.dim_w.pad_after});
}

struct PoolFwdEntry {
  dnnl::pooling_forward prim;
  memory::desc src_md, dst_md;
};

class AvgPoolKernel : public PoolKernelBase {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_RETURN_IF_ERROR(ExpectFloatInput(ctx, 0));
    const Tensor& input = ctx.input(0);
    TANDEM_ASSIGN_OR_RETURN(PoolGeometry s, PoolGeometry::Make(ctx, attrs_, input.shape()));
    Tensor* out = ctx.allocate_output(0, s.output_shape());
    if (out->NumElements() == 0) return absl::OkStatus();
    TANDEM_ASSIGN_OR_RETURN(auto e, onednn::Cached<PoolFwdEntry>(ctx, Key(s, "avgpool"), [&] {
                              auto d = ForwardDesc(s, dnnl::prop_kind::forward_inference,
                                                   dnnl::algorithm::pooling_avg_exclude_padding);
                              return PoolFwdEntry{
                                  dnnl::pooling_forward(dnnl::pooling_forward::primitive_desc(
                                      d, onednn::Attr(), onednn::CpuEngine())),
                                  SrcDesc(s), DstDesc(s)};
                            }));
    return onednn::Guard(ctx, [&]() {
      onednn::ExecuteCached(e->prim, {{DNNL_ARG_SRC, e->src_md, input.raw_data()},
                                      {DNNL_ARG_DST, e->dst_md, out->raw_data()}});
      return absl::OkStatus();
    });
  }
};

struct PoolBwdEntry {
  dnnl::pooling_backward prim;
  memory::desc src_md, dst_md;
};

// AvgPoolGrad(orig_input_shape, grad).
class AvgPoolGradKernel : public PoolKernelBase {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_RETURN_IF_ERROR(ExpectFloatInput(ctx, 1));
    TANDEM_ASSIGN_OR_RETURN(TensorShape input_shape, ShapeFromSizesInput(ctx, 0));
    const Tensor& grad = ctx.input(1);
    TANDEM_ASSIGN_OR_RETURN(PoolGeometry s, PoolGeometry::Make(ctx, attrs_, input_shape));
    TANDEM_RETURN_IF_ERROR(CheckPoolGrad(ctx, s, grad));
    Tensor* out = ctx.allocate_output(0, input_shape);
    if (grad.NumElements() == 0) {
      std::fill_n(out->data<float>(), out->NumElements(), 0.0f);
      return absl::OkStatus();
    }
    TANDEM_ASSIGN_OR_RETURN(
        auto e, onednn::Cached<PoolBwdEntry>(ctx, Key(s, "avgpool_bwd"), [&] {
          const auto alg = dnnl::algorithm::pooling_avg_exclude_padding;
          dnnl::pooling_forward::primitive_desc hint(
              ForwardDesc(s, dnnl::prop_kind::forward_training, alg), onednn::CpuEngine());
          dnnl::pooling_backward::desc d(
              alg, SrcDesc(s), DstDesc(s), {attrs_.stride_h, attrs_.stride_w},
              {attrs_.second_h, attrs_.second_w}, {s.dim_h.pad_before, s.dim_w.pad_before},
              {s.dim_h.pad_after, s.dim_w.pad_after});
          return PoolBwdEntry{dnnl::pooling_backward(dnnl::pooling_backward::primitive_desc(
                                  d, onednn::Attr(), onednn::CpuEngine(), hint)),
                              SrcDesc(s), DstDesc(s)};
        }));
    return onednn::Guard(ctx, [&]() {
      onednn::ExecuteCached(e->prim, {{DNNL_ARG_DIFF_DST, e->dst_md, grad.raw_data()},
                                      {DNNL_ARG_DIFF_SRC, e->src_md, out->raw_data()}});
      return absl::OkStatus();
    });
  }
};

}  // namespace

void RegisterCpuPoolKernels(KernelRegistry* r) {
  RegisterCpuMaxPoolKernels(r);
  r->Register<AvgPoolKernel>("AvgPool", kDeviceCpu);
  r->Register<AvgPoolGradKernel>("AvgPoolGrad", kDeviceCpu);
}

}  // namespace tandem::nn

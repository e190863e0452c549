// tests/framework/kernels/kernel_shape_test.cc
//
// The shape code every device's kernels share (window_geometry.h, reduction_shape.h):
// TensorFlow's SAME/VALID window rule, convolution and pooling geometry with their
// errors, the 4-sizes inputs, the window attrs a kernel reads at Init (with a device's
// narrower limit), and how a reduction merges its dimensions. The kernels' numbers
// are tested through sessions (nn_ops_test, math_ops_test, gpu_kernels_test); this is
// the geometry they start from.
#include <cstdint>
#include <memory>
#include <vector>

#include "framework/kernels/kernel_registry.h"
#include "framework/kernels/reduction_shape.h"
#include "framework/kernels/window_geometry.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/nn_ops.h"
#include "framework/runtime/runtime_kernels.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::nn {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ComputeWindowDimTest, SamePadsTheOddPixelAfter) {
  // in 5, k 3, stride 2: 3 outputs, (3-1)*2 + 3 - 5 = 2 padded, 1 before and 1 after.
  auto d = ComputeWindowDim(5, 3, 2, 1, /*same=*/true);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->out, 3);
  EXPECT_EQ(d->pad_before, 1);
  EXPECT_EQ(d->pad_after, 1);
  // in 4, k 3, stride 2: 2 outputs, 1 padded, after.
  d = ComputeWindowDim(4, 3, 2, 1, true);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->out, 2);
  EXPECT_EQ(d->pad_before, 0);
  EXPECT_EQ(d->pad_after, 1);
  // Dilation 2 makes a 3-tap window span 5: in 6, stride 1 pads 4, 2 each side.
  d = ComputeWindowDim(6, 3, 1, 2, true);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->out, 6);
  EXPECT_EQ(d->pad_before, 2);
  EXPECT_EQ(d->pad_after, 2);
}

TEST(ComputeWindowDimTest, ValidFitsOrFails) {
  auto d = ComputeWindowDim(7, 3, 2, 1, /*same=*/false);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->out, 3);
  EXPECT_EQ(d->pad_before + d->pad_after, 0);
  d = ComputeWindowDim(4, 3, 1, 2, false);  // effective size 5 > 4
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr("effective size 5"));
}

TEST(PoolGeometryTest, WindowsAreClippedToTheInput) {
  // 5x5, 3x3 windows of stride 2, SAME: one pixel of padding on each side.
  const PoolGeometry g{1, 5, 5, 1, 3, 3, {3, 1, 1}, {3, 1, 1}, {2, 2, 3, 3, true}};
  int64_t y0, y1, x0, x1;
  g.Window(0, 0, &y0, &y1, &x0, &x1);
  EXPECT_EQ(std::vector<int64_t>({y0, y1, x0, x1}), std::vector<int64_t>({0, 2, 0, 2}));
  g.Window(1, 2, &y0, &y1, &x0, &x1);
  EXPECT_EQ(std::vector<int64_t>({y0, y1, x0, x1}), std::vector<int64_t>({1, 4, 3, 5}));
}

TEST(ReductionShapeTest, MergesRunsAndDropsSizeOneDims) {
  // [2,1,3,4] over the last two axes: [kept 2, reduced 12].
  ReductionShape r = ReductionShape::Make(TensorShape({2, 1, 3, 4}), {false, false, true, true},
                                          /*keep_dims=*/false);
  EXPECT_EQ(r.out, TensorShape({2, 1}));
  EXPECT_EQ(r.count, 12);
  EXPECT_THAT(r.dims, ElementsAre(2, 12));
  EXPECT_THAT(r.dim_reduced, ElementsAre(false, true));
  r = ReductionShape::Make(TensorShape({2, 1, 3, 4}), {false, false, true, true}, true);
  EXPECT_EQ(r.out, TensorShape({2, 1, 1, 1}));

  // A size-1 kept axis between two reduced ones joins them into one run.
  r = ReductionShape::Make(TensorShape({3, 1, 4}), {true, false, true}, false);
  EXPECT_EQ(r.out, TensorShape({1}));
  EXPECT_EQ(r.count, 12);
  EXPECT_THAT(r.dims, ElementsAre(12));
  EXPECT_THAT(r.dim_reduced, ElementsAre(true));

  // Alternating axes stay four runs.
  r = ReductionShape::Make(TensorShape({2, 3, 4, 5}), {true, false, true, false}, false);
  EXPECT_EQ(r.out, TensorShape({3, 5}));
  EXPECT_EQ(r.count, 8);
  EXPECT_THAT(r.dims, ElementsAre(2, 3, 4, 5));
  EXPECT_THAT(r.dim_reduced, ElementsAre(true, false, true, false));

  // An empty reduced axis: no input element per output element.
  r = ReductionShape::Make(TensorShape({0, 3}), {true, false}, false);
  EXPECT_EQ(r.out, TensorShape({3}));
  EXPECT_EQ(r.count, 0);
  // Nothing reduced: every size-1 axis dropped, the rest one kept run.
  r = ReductionShape::Make(TensorShape({1, 2, 1, 3}), {false, false, false, false}, false);
  EXPECT_THAT(r.dims, ElementsAre(6));
  EXPECT_THAT(r.dim_reduced, ElementsAre(false));
}

// A kernel context for node `node` of the CPU kernel registry, holding `inputs`.
class KernelContextTest : public ::testing::Test {
 protected:
  void SetUp() override { EnsureKernels(); }
  std::unique_ptr<OpKernelContext> Context(const Output& node, std::vector<Tensor> inputs) {
    auto kernel = KernelRegistry::Global()->Create(*node.node, kDeviceCpu);
    EXPECT_TRUE(kernel.ok()) << kernel.status();
    kernel_ = std::move(*kernel);
    return std::make_unique<OpKernelContext>(kernel_.get(), &step_, std::move(inputs));
  }

  std::unique_ptr<OpKernel> kernel_;
  StepContext step_;
};

TEST_F(KernelContextTest, ConvGeometryAndItsErrors) {
  Scope s = Scope::NewRootScope();
  Output conv =
      ops::Conv2D(s.WithOpName("conv"), ops::Placeholder(s, DType::kFloat),
                  ops::Placeholder(s, DType::kFloat), {{1, 2, 1, 1}, "SAME", {1, 1, 2, 1}});
  ASSERT_TRUE(s.ok()) << s.status();
  auto ctx = Context(conv, {});
  const WindowAttrs a{2, 1, 1, 2, true};
  auto g = ConvGeometry::Make(*ctx, a, TensorShape({2, 7, 6, 3}), TensorShape({3, 2, 3, 5}));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->output_shape(), TensorShape({2, 4, 6, 5}));
  EXPECT_EQ(g->filter_shape(), TensorShape({3, 2, 3, 5}));
  EXPECT_EQ(g->dim_w.pad_before + g->dim_w.pad_after, 2);  // a 2-tap window dilated to 3
  EXPECT_FALSE(g->empty());

  auto bad = ConvGeometry::Make(*ctx, a, TensorShape({2, 7, 6, 3}), TensorShape({3, 2, 4, 5}));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("node 'conv' (Conv2D)"));
  EXPECT_THAT(bad.status().message(),
              HasSubstr("input channels 3 differ from filter in-channels 4"));
  bad = ConvGeometry::Make(*ctx, a, TensorShape({2, 7, 6, 3}), TensorShape({0, 2, 3, 5}));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("filter height and width must be positive"));
  bad = ConvGeometry::Make(*ctx, WindowAttrs{1, 1, 1, 1, false}, TensorShape({1, 2, 6, 3}),
                           TensorShape({3, 2, 3, 5}));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("VALID"));
  EXPECT_THAT(bad.status().message(), HasSubstr("(input [1,2,6,3], filter [3,2,3,5])"));
  bad = ConvGeometry::Make(*ctx, a, TensorShape({7, 6, 3}), TensorShape({3, 2, 3, 5}));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("rank 4"));

  const Tensor out_backprop(DType::kFloat, TensorShape({2, 4, 6, 4}));
  const absl::Status st = CheckOutBackprop(*ctx, *g, out_backprop);
  EXPECT_THAT(st.message(), HasSubstr("out_backprop has shape [2,4,6,4]"));
  EXPECT_THAT(st.message(), HasSubstr("gives [2,4,6,5]"));
  EXPECT_TRUE(CheckOutBackprop(*ctx, *g, Tensor(DType::kFloat, g->output_shape())).ok());
}

TEST_F(KernelContextTest, PoolGeometryAndGradientShapes) {
  Scope s = Scope::NewRootScope();
  Output pool = ops::AvgPool(s.WithOpName("pool"), ops::Placeholder(s, DType::kFloat));
  ASSERT_TRUE(s.ok()) << s.status();
  const Tensor grad(DType::kFloat, TensorShape({1, 2, 2, 3}));
  auto ctx = Context(pool, {Tensor(DType::kFloat, TensorShape({1, 5, 5, 3})), grad});
  const WindowAttrs a{2, 2, 2, 2, false};
  auto g = PoolGeometry::Make(*ctx, a, TensorShape({1, 5, 5, 3}));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->output_shape(), TensorShape({1, 2, 2, 3}));
  EXPECT_TRUE(CheckPoolGrad(*ctx, *g, grad).ok());
  EXPECT_TRUE(ExpectPooledShape(*ctx, *g, {1}).ok());
  const absl::Status st = ExpectPooledShape(*ctx, *g, {0, 1});
  EXPECT_THAT(st.message(), HasSubstr("pooled shape [1,2,2,3]: [1,5,5,3] x [1,2,2,3]"));
  EXPECT_THAT(CheckPoolGrad(*ctx, *g, Tensor(DType::kFloat, TensorShape({1, 3, 3, 3}))).message(),
              HasSubstr("grad has shape [1,3,3,3] but pooling [1,5,5,3] gives [1,2,2,3]"));
  auto bad = PoolGeometry::Make(*ctx, WindowAttrs{1, 1, 6, 6, false}, TensorShape({1, 5, 5, 3}));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("(input [1,5,5,3])"));
}

TEST_F(KernelContextTest, ShapeFromSizesInput) {
  Scope s = Scope::NewRootScope();
  Output pool = ops::AvgPool(s.WithOpName("pool"), ops::Placeholder(s, DType::kFloat));
  ASSERT_TRUE(s.ok());
  Tensor sizes(DType::kInt64, TensorShape({4}));
  for (int i = 0; i < 4; ++i) sizes.data<int64_t>()[i] = i + 2;
  Tensor three(DType::kInt32, TensorShape({3}));
  Tensor negative(DType::kInt32, TensorShape({4}));
  for (int i = 0; i < 4; ++i) negative.data<int32_t>()[i] = i == 2 ? -1 : 1;
  auto ctx = Context(pool, {sizes, three, negative, Tensor(DType::kFloat, TensorShape({4}))});
  auto shape = ShapeFromSizesInput(*ctx, 0);
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(*shape, TensorShape({2, 3, 4, 5}));
  EXPECT_THAT(ShapeFromSizesInput(*ctx, 1).status().message(),
              HasSubstr("input 1 must be an int32/int64 vector of 4 sizes, got int32[3]"));
  EXPECT_EQ(ShapeFromSizesInput(*ctx, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ShapeFromSizesInput(*ctx, 3).status().message(), HasSubstr("got float32[4]"));
}

// A window kernel of a device whose library takes attrs up to 4.
class NarrowPoolKernel : public WindowKernel<OpKernel, WindowOp::kPool, 4> {
 public:
  absl::Status Compute(OpKernelContext&) override { return absl::OkStatus(); }
  const WindowAttrs& attrs() const { return attrs_; }
};

TEST(WindowKernelTest, ReadsTheAttrsAndHoldsADevicesLimit) {
  Scope s = Scope::NewRootScope();
  Output ok =
      ops::MaxPool(s, ops::Placeholder(s, DType::kFloat), {{1, 3, 4, 1}, {1, 2, 1, 1}, "SAME"});
  Output big =
      ops::MaxPool(s, ops::Placeholder(s, DType::kFloat), {{1, 5, 2, 1}, {1, 1, 1, 1}, "VALID"});
  ASSERT_TRUE(s.ok()) << s.status();
  NarrowPoolKernel k;
  ASSERT_TRUE(k.Init(*ok.node).ok());
  EXPECT_EQ(k.attrs().second_h, 3);
  EXPECT_EQ(k.attrs().second_w, 4);
  EXPECT_EQ(k.attrs().stride_h, 2);
  EXPECT_EQ(k.attrs().stride_w, 1);
  EXPECT_TRUE(k.attrs().same);
  const absl::Status st = k.Init(*big.node);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(st.message(), HasSubstr("'ksize' up to 4, got 5"));
}

}  // namespace
}  // namespace tandem::nn

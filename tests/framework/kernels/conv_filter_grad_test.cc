// Conv2DBackpropFilter on its six CPU paths (conv_filter_grad.h): oneDNN's
// backward-weights primitive, the forward convolution (stride 1, no dilation), the
// direct loop (also one input channel; its AVX-512 loop up to 7 taps wide, plain loops
// beyond) and the three AMX forms (stride 1, no dilation, bfloat16, on a CPU with AMX:
// along positions, along the batch, and unfolded for few taps x channels), the other
// cases falling back, by default and as TANDEM_CONV_FILTER_GRAD chooses. Each must equal
// a plain double loop over strides, dilations, SAME and VALID padding, and bfloat16
// operands with a bfloat16 or float32 (attr Tout) gradient.
#include "framework/kernels/cpu/conv_filter_grad.h"

#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/nn_ops.h"
#include "framework/runtime/direct_session.h"
#include "framework/tensor/dtype.h"
#include "gtest/gtest.h"
#include "tests/util/window_geometry.h"

namespace tandem {
namespace {

using Case = testing::ConvCase;
using Out = testing::WindowGeometry;

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// dW[i][j][ch][o] = sum over images and output positions of x[...] * dy[...], in double;
// `scale` gets the sum of |terms| per element (the bound on float rounding).
std::vector<double> NaiveFilterGrad(const Case& k, const std::vector<float>& x,
                                    const std::vector<float>& dy, std::vector<double>* scale) {
  std::vector<double> g(k.kh * k.kw * k.c * k.o, 0.0);
  scale->assign(g.size(), 0.0);
  testing::ForEachTap(k, [&](int64_t xi, int64_t yi, int64_t tap) {
    for (int64_t ch = 0; ch < k.c; ++ch)
      for (int64_t o = 0; o < k.o; ++o) {
        const double t = double(x[xi * k.c + ch]) * dy[yi * k.o + o];
        g[(tap * k.c + ch) * k.o + o] += t;
        (*scale)[(tap * k.c + ch) * k.o + o] += std::fabs(t);
      }
  });
  return g;
}

// Rounds each value through bfloat16 (the operands the bf16 kernels see).
std::vector<float> ThroughBf16(std::vector<float> v) {
  for (float& f : v) f = static_cast<float>(bfloat16(f));
  return v;
}

// Runs Conv2DBackpropFilter with operands of `in` dtype and gradient of `out` dtype
// under TANDEM_CONV_FILTER_GRAD=`path`; returns the gradient as floats.
std::vector<float> RunFilterGrad(const Case& k, const std::vector<float>& x,
                                 const std::vector<float>& dy, DType in, DType out,
                                 const std::string& path) {
  const Out oh = k.out_h(), ow = k.out_w();
  Scope s = Scope::NewRootScope();
  Output xs = ops::Const(s, Tensor::FromVector<float>(x, TensorShape({k.n, k.h, k.w, k.c})));
  Output dys =
      ops::Const(s, Tensor::FromVector<float>(dy, TensorShape({k.n, oh.out, ow.out, k.o})));
  if (in == DType::kBFloat16) {
    xs = ops::Cast(s, xs, in);
    dys = ops::Cast(s, dys, in);
  }
  ops::Conv2DAttrs a{
      {1, k.stride, k.stride, 1}, k.same ? "SAME" : "VALID", {1, k.dilation, k.dilation, 1}};
  Output g = ops::Conv2DBackpropFilter(
      s.WithOpName("filter_grad"), xs,
      ops::ConstInt32(s, {int(k.kh), int(k.kw), int(k.c), int(k.o)}), dys, a);
  EXPECT_TRUE(s.ok()) << s.status();
  proto::GraphDef def;
  s.graph()->ToGraphDef(&def);
  if (out != in) {
    for (proto::NodeDef& node : *def.mutable_node()) {
      if (node.name() == "filter_grad") {
        (*node.mutable_attr())["Tout"].set_type(static_cast<proto::DataType>(out));
      }
    }
  }
  setenv("TANDEM_CONV_FILTER_GRAD", path.c_str(), 1);
  auto session = DirectSession::Create(def, SessionOptions{});
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return {};
  auto result = (*session)->Run({}, {g.name()}, {});
  unsetenv("TANDEM_CONV_FILTER_GRAD");
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return {};
  const Tensor& t = (*result)[0];
  EXPECT_EQ(t.dtype(), out);
  EXPECT_EQ(t.shape(), TensorShape({k.kh, k.kw, k.c, k.o}));
  std::vector<float> v(t.NumElements());
  for (int64_t i = 0; i < t.NumElements(); ++i) v[i] = static_cast<float>(t.ValueAsDouble(i));
  return v;
}

class FilterGradTest : public ::testing::TestWithParam<Case> {};

TEST_P(FilterGradTest, EveryPathMatchesTheNaiveSum) {
  const Case& k = GetParam();
  const Out oh = k.out_h(), ow = k.out_w();
  const std::vector<float> x = Random(k.n * k.h * k.w * k.c, 1);
  const std::vector<float> dy = Random(k.n * oh.out * ow.out * k.o, 2);
  struct Precision {
    DType in, out;
    double tolerance;  // Relative to the sum of |terms|.
  };
  for (const Precision& p : {Precision{DType::kFloat, DType::kFloat, 1e-5},
                             Precision{DType::kBFloat16, DType::kFloat, 1e-5},
                             Precision{DType::kBFloat16, DType::kBFloat16, 1e-2}}) {
    const bool bf16 = p.in == DType::kBFloat16;
    std::vector<double> scale;
    const std::vector<double> want =
        NaiveFilterGrad(k, bf16 ? ThroughBf16(x) : x, bf16 ? ThroughBf16(dy) : dy, &scale);
    for (const std::string path :
         {"", "onednn", "forward", "direct", "amx_positions", "amx_images", "amx_unfolded"}) {
      SCOPED_TRACE(absl::StrCat(path, " ", DTypeName(p.in), " -> ", DTypeName(p.out)));
      testing::ExpectWithinSumOfTerms(RunFilterGrad(k, x, dy, p.in, p.out, path), want, scale,
                                      p.tolerance);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FilterGradTest,
    ::testing::Values(Case{"same3x3", 2, 5, 5, 3, 3, 3, 4, 1, 1, true},
                      Case{"valid_stride2", 2, 9, 7, 3, 3, 3, 5, 2, 1, false},
                      Case{"same_stride2", 1, 7, 8, 2, 3, 3, 2, 2, 1, true},
                      Case{"valid5x5", 3, 9, 11, 4, 5, 5, 6, 1, 1, false},
                      Case{"same_even_kernel", 2, 6, 7, 3, 4, 2, 5, 1, 1, true},
                      Case{"same_dilated", 1, 8, 8, 2, 3, 3, 3, 1, 2, true},
                      Case{"valid_dilated", 1, 9, 8, 1, 2, 3, 2, 1, 3, false},
                      Case{"mnist_conv1", 6, 28, 28, 1, 5, 5, 32, 1, 1, true},
                      Case{"mnist_conv2", 4, 14, 14, 32, 5, 5, 64, 1, 1, true},
                      Case{"one_channel_odd_outputs", 3, 10, 9, 1, 4, 3, 20, 1, 1, true},
                      Case{"one_channel_valid_wide", 2, 8, 12, 1, 3, 7, 7, 1, 1, false},
                      Case{"one_channel_too_wide_to_vectorize", 2, 6, 13, 1, 2, 9, 33, 1, 1, true},
                      // AMX: channels padded to 16 (20 -> 32, 24 -> 32), and odd tile counts
                      // (9 tap x channel tiles, 3 output-channel tiles: every block shape).
                      Case{"padded_channels", 3, 9, 7, 20, 3, 3, 24, 1, 1, true},
                      Case{"odd_tile_counts", 2, 6, 6, 16, 3, 3, 48, 1, 1, false},
                      // Rows wider than 32 positions (the gradient's transpose in blocks).
                      Case{"wide_rows", 2, 3, 40, 16, 3, 3, 40, 1, 1, true}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// By default the direct loop or the forward convolution runs only where it measured
// faster (bfloat16, one input channel); TANDEM_CONV_FILTER_GRAD=forward|direct asks for
// one wherever it applies.
TEST(FilterGradPathTest, DefaultAndForcedChoices) {
  using nn::FilterGradPath;
  auto geometry = [](int64_t c, int64_t stride) {
    const int64_t out = (28 + stride - 1) / stride;
    return nn::FilterGradGeometry{8, 28, 28, c, 5, 5, 32, out, out, stride, stride, 1, 1, 2, 2};
  };
  auto path = [](const nn::FilterGradGeometry& g, DType dtype) {
    auto p = nn::FilterGradPathFor(g, dtype);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.value_or(FilterGradPath::kOneDnnBackward);
  };
  unsetenv("TANDEM_CONV_FILTER_GRAD");
  // A 1-channel bfloat16 layer: unfolded on AMX tiles where the process has them, else
  // the direct loop where it has AVX-512, else the forward convolution.
  const bool amx = nn::AmxFilterGradIsAvailable();
  const bool avx512 = nn::DirectFilterGradIsVectorized(geometry(1, 1));
  EXPECT_EQ(avx512, __builtin_cpu_supports("avx512f") != 0);
  EXPECT_EQ(path(geometry(1, 1), DType::kBFloat16), amx      ? FilterGradPath::kAmxUnfolded
                                                    : avx512 ? FilterGradPath::kDirect
                                                             : FilterGradPath::kForwardConv);
  auto wide = geometry(1, 1);
  wide.kw = 9;
  wide.ow = 28;
  EXPECT_FALSE(nn::DirectFilterGradIsVectorized(wide));
  EXPECT_EQ(path(wide, DType::kBFloat16),
            amx ? FilterGradPath::kAmxUnfolded : FilterGradPath::kForwardConv);
  wide.kw = 13;  // 65 taps: more rows than the unfolded path takes
  wide.ow = 28;
  EXPECT_FALSE(nn::AmxUnfoldedFilterGradApplies(wide));
  EXPECT_EQ(path(wide, DType::kBFloat16), FilterGradPath::kForwardConv);
  auto large = geometry(1, 1);  // 512 x 512: 32 MiB of unfolded operands an image
  large.h = large.w = large.oh = large.ow = 512;
  EXPECT_FALSE(nn::AmxUnfoldedFilterGradApplies(large));
  EXPECT_EQ(path(geometry(1, 1), DType::kFloat), FilterGradPath::kOneDnnBackward);
  // A 32-channel bfloat16 layer: AMX tiles where the process has them, reduced along
  // the batch where that runs fewer products. 8 images of 28 x 28: 32 positions a row
  // of 28 on the padded plane, 0.29 of the products of 8 images rounded up to 32. 32
  // images of 14 x 14 (fashion_cnn's second layer): 196 positions an image against 256,
  // 1.4 MiB of operands a chunk.
  EXPECT_EQ(path(geometry(32, 1), DType::kBFloat16),
            amx ? FilterGradPath::kAmxPositions : FilterGradPath::kOneDnnBackward);
  auto batch = geometry(32, 1);
  batch.n = 32;
  batch.h = batch.w = batch.oh = batch.ow = 14;
  batch.o = 64;
  EXPECT_TRUE(nn::AmxImagesReductionIsSmaller(batch));
  EXPECT_EQ(path(batch, DType::kBFloat16),
            amx ? FilterGradPath::kAmxImages : FilterGradPath::kOneDnnBackward);
  auto large_planes = batch;
  large_planes.h = large_planes.w = large_planes.oh = large_planes.ow =
      56;  // 32 images' operands over 2 MiB
  EXPECT_FALSE(nn::AmxImagesReductionIsSmaller(large_planes));
  EXPECT_EQ(path(large_planes, DType::kBFloat16),
            amx ? FilterGradPath::kAmxPositions : FilterGradPath::kOneDnnBackward);
  EXPECT_EQ(path(geometry(32, 1), DType::kFloat), FilterGradPath::kOneDnnBackward);
  EXPECT_EQ(path(geometry(32, 2), DType::kBFloat16), FilterGradPath::kOneDnnBackward);
  EXPECT_EQ(path(geometry(1, 2), DType::kBFloat16), FilterGradPath::kOneDnnBackward);
  setenv("TANDEM_CONV_FILTER_GRAD", "forward", 1);
  EXPECT_EQ(path(geometry(32, 1), DType::kFloat), FilterGradPath::kForwardConv);
  EXPECT_EQ(path(geometry(1, 2), DType::kBFloat16), FilterGradPath::kOneDnnBackward);
  setenv("TANDEM_CONV_FILTER_GRAD", "onednn", 1);
  EXPECT_EQ(path(geometry(1, 1), DType::kBFloat16), FilterGradPath::kOneDnnBackward);
  setenv("TANDEM_CONV_FILTER_GRAD", "direct", 1);
  EXPECT_EQ(path(geometry(1, 1), DType::kFloat), FilterGradPath::kDirect);
  EXPECT_EQ(path(geometry(32, 1), DType::kBFloat16), FilterGradPath::kOneDnnBackward);
  EXPECT_EQ(path(geometry(1, 2), DType::kBFloat16), FilterGradPath::kOneDnnBackward);
  setenv("TANDEM_CONV_FILTER_GRAD", "amx", 1);  // the AMX form the default picks
  EXPECT_EQ(path(geometry(1, 1), DType::kBFloat16),
            amx ? FilterGradPath::kAmxUnfolded : FilterGradPath::kOneDnnBackward);
  EXPECT_EQ(path(batch, DType::kBFloat16),
            amx ? FilterGradPath::kAmxImages : FilterGradPath::kOneDnnBackward);
  EXPECT_EQ(path(geometry(32, 1), DType::kBFloat16),
            amx ? FilterGradPath::kAmxPositions : FilterGradPath::kOneDnnBackward);
  setenv("TANDEM_CONV_FILTER_GRAD", "amx_images", 1);
  EXPECT_EQ(path(geometry(1, 1), DType::kBFloat16),
            amx ? FilterGradPath::kAmxImages : FilterGradPath::kOneDnnBackward);
  setenv("TANDEM_CONV_FILTER_GRAD", "amx_positions", 1);
  EXPECT_EQ(path(batch, DType::kBFloat16),
            amx ? FilterGradPath::kAmxPositions : FilterGradPath::kOneDnnBackward);
  EXPECT_EQ(path(geometry(32, 1), DType::kFloat), FilterGradPath::kOneDnnBackward);
  EXPECT_EQ(path(geometry(32, 2), DType::kBFloat16), FilterGradPath::kOneDnnBackward);
  unsetenv("TANDEM_CONV_FILTER_GRAD");
}

// The two AMX paths called directly (the session tests above fall back to oneDNN where
// they cannot run): the layer's gradient is the double sum's, and equal bit for bit
// with 1 and 2 OpenMP threads. fashion_cnn's second layer with 5 images (fewer than a
// chunk of 32: all along positions, 8 images a pass) and with 70 (two chunks, through
// both scratch slots, and 6 images along positions); channels padded (20 -> 32, 40 -> 48) to odd
// tile counts; images of 634 KB (one a pass of the position reduction); and the unfolded path's
// layers: fashion_cnn's first (25 rows, 37 images in 16 groups) and an RGB one (27).
TEST(FilterGradAmxTest, MatchesTheNaiveSumWithTheSameBitsAtAnyThreadCount) {
  if (!nn::AmxFilterGradIsAvailable()) {
    GTEST_SKIP() << "this CPU, kernel or ONEDNN_MAX_CPU_ISA gives the process no AMX tiles";
  }
  using AmxPath =
      absl::Status (*)(const nn::FilterGradGeometry&, const Tensor&, const Tensor&, Tensor*);
  const std::pair<const char*, AmxPath> paths[] = {{"positions", &nn::FilterGradAmx},
                                                   {"images", &nn::FilterGradAmxByImages},
                                                   {"unfolded", &nn::FilterGradAmxUnfolded}};
  for (const Case& k : {Case{"conv2", 5, 14, 14, 32, 5, 5, 64, 1, 1, true},
                        Case{"conv2_three_chunks", 70, 14, 14, 32, 5, 5, 64, 1, 1, true},
                        Case{"odd_tiles", 33, 9, 7, 20, 3, 3, 40, 1, 1, true},
                        Case{"large_images", 3, 48, 48, 48, 3, 3, 32, 1, 1, true},
                        Case{"conv1", 37, 28, 28, 1, 5, 5, 32, 1, 1, true},
                        Case{"rgb", 5, 11, 9, 3, 3, 3, 20, 1, 1, true}}) {
    const std::vector<float> x = ThroughBf16(Random(k.n * k.h * k.w * k.c, 5));
    const std::vector<float> dy = ThroughBf16(Random(k.n * k.h * k.w * k.o, 6));
    std::vector<double> scale;
    const std::vector<double> want = NaiveFilterGrad(k, x, dy, &scale);
    auto bf16 = [](const std::vector<float>& v, const TensorShape& shape) {
      Tensor t(DType::kBFloat16, shape);
      for (size_t i = 0; i < v.size(); ++i) t.data<bfloat16>()[i] = bfloat16(v[i]);
      return t;
    };
    const Tensor xt = bf16(x, TensorShape({k.n, k.h, k.w, k.c}));
    const Tensor dyt = bf16(dy, TensorShape({k.n, k.h, k.w, k.o}));
    const int64_t pad = (k.kh - 1) / 2;
    const nn::FilterGradGeometry g{k.n, k.h, k.w, k.c, k.kh, k.kw, k.o, k.h,
                                   k.w, 1,   1,   1,   1,    pad,  pad};
    for (const auto& [name, run] : paths) {
      if (run == &nn::FilterGradAmxUnfolded && !nn::AmxUnfoldedFilterGradApplies(g)) continue;
      SCOPED_TRACE(absl::StrCat(k.name, " by ", name));
      const int threads = omp_get_max_threads();
      std::vector<Tensor> outs;
      for (int t : {1, 2}) {
        omp_set_num_threads(t);
        outs.emplace_back(DType::kFloat, TensorShape({k.kh, k.kw, k.c, k.o}));
        std::fill_n(outs.back().data<float>(), outs.back().NumElements(), std::nanf(""));
        ASSERT_TRUE(run(g, xt, dyt, &outs.back()).ok());
      }
      omp_set_num_threads(threads);
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(outs[0].data<float>()[i], want[i], 1e-5 * (scale[i] + 1e-6)) << "element " << i;
      }
      EXPECT_EQ(std::memcmp(outs[0].raw_data(), outs[1].raw_data(), want.size() * sizeof(float)),
                0);
    }
  }
}

TEST(FilterGradPathTest, AnUnknownPathIsAnErrorNamingTheVariable) {
  Scope s = Scope::NewRootScope();
  Output g = ops::Conv2DBackpropFilter(
      s, ops::Const(s, Tensor::FromVector<float>(Random(16, 3), TensorShape({1, 4, 4, 1}))),
      ops::ConstInt32(s, {3, 3, 1, 1}),
      ops::Const(s, Tensor::FromVector<float>(Random(16, 4), TensorShape({1, 4, 4, 1}))),
      ops::Conv2DAttrs{});
  proto::GraphDef def;
  s.graph()->ToGraphDef(&def);
  auto session = DirectSession::Create(def, SessionOptions{});
  ASSERT_TRUE(session.ok()) << session.status();
  setenv("TANDEM_CONV_FILTER_GRAD", "fast", 1);
  auto result = (*session)->Run({}, {g.name()}, {});
  unsetenv("TANDEM_CONV_FILTER_GRAD");
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("TANDEM_CONV_FILTER_GRAD"), std::string::npos)
      << result.status();
}

}  // namespace
}  // namespace tandem

// The bfloat16 forward convolution of few input channels on AMX tiles
// (conv_forward_amx.h), with and without _FusedConv2D's bias and ReLU: in a session, by
// default and as TANDEM_CONV_FORWARD chooses (oneDNN's primitive where the AMX path does
// not apply or the process has no tiles), and called directly where the process has
// tiles. Each must equal a plain double loop: fashion_cnn's first layer, an RGB 3x3
// layer, an even kernel under SAME (one padding row more after), output channels and
// widths that leave partial tiles, 1x1, and layers it does not take (32 input
// channels, stride 2, dilation 2).
#include "framework/kernels/cpu/conv_forward_amx.h"

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

// Uniform in [-1, 1), rounded to bfloat16 so that both sides see the same operands.
std::vector<float> RandomBf16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(bfloat16(u(rng)));
  return v;
}

// relu?(conv(x, w) + bias) in double, [n, oh, ow, o]; `scale` gets the sum of |terms|.
std::vector<double> NaiveForward(const Case& k, const std::vector<float>& x,
                                 const std::vector<float>& w, const std::vector<float>* bias,
                                 bool relu, std::vector<double>* scale) {
  const int64_t positions = k.n * k.out_h().out * k.out_w().out;
  std::vector<double> y(positions * k.o, 0.0);
  scale->assign(y.size(), 0.0);
  testing::ForEachTap(k, [&](int64_t xi, int64_t yi, int64_t tap) {
    for (int64_t ch = 0; ch < k.c; ++ch)
      for (int64_t o = 0; o < k.o; ++o) {
        const double t = double(x[xi * k.c + ch]) * w[(tap * k.c + ch) * k.o + o];
        y[yi * k.o + o] += t;
        (*scale)[yi * k.o + o] += std::fabs(t);
      }
  });
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t o = 0; o < k.o; ++o) {
      double& v = y[p * k.o + o];
      if (bias != nullptr) {
        v += (*bias)[o];
        (*scale)[p * k.o + o] += std::fabs((*bias)[o]);
      }
      if (relu) v = std::max(v, 0.0);
    }
  return y;
}

// Runs Conv2D (then BiasAdd and Relu where `bias` is given, which the session fuses into
// _FusedConv2D) in bfloat16 under TANDEM_CONV_FORWARD=`path`; returns the output as
// floats, or the run's error.
absl::StatusOr<std::vector<float>> RunForward(const Case& k, const std::vector<float>& x,
                                              const std::vector<float>& w,
                                              const std::vector<float>* bias,
                                              const std::string& path) {
  Scope s = Scope::NewRootScope();
  auto bf16 = [&](const std::vector<float>& v, const TensorShape& shape) {
    return ops::Cast(s, ops::Const(s, Tensor::FromVector<float>(v, shape)), DType::kBFloat16);
  };
  Output xs = bf16(x, TensorShape({k.n, k.h, k.w, k.c}));
  Output ws = bf16(w, TensorShape({k.kh, k.kw, k.c, k.o}));
  ops::Conv2DAttrs a{
      {1, k.stride, k.stride, 1}, k.same ? "SAME" : "VALID", {1, k.dilation, k.dilation, 1}};
  Output y = ops::Conv2D(s, xs, ws, a);
  if (bias != nullptr) {
    y = ops::Relu(s, ops::BiasAdd(s, y, bf16(*bias, TensorShape({k.o}))));
  }
  EXPECT_TRUE(s.ok()) << s.status();
  proto::GraphDef def;
  s.graph()->ToGraphDef(&def);
  setenv("TANDEM_CONV_FORWARD", path.c_str(), 1);
  auto session = DirectSession::Create(def, SessionOptions{});
  absl::StatusOr<std::vector<Tensor>> result =
      session.ok() ? (*session)->Run({}, {y.name()}, {}) : session.status();
  unsetenv("TANDEM_CONV_FORWARD");
  if (!result.ok()) return result.status();
  const Tensor& t = (*result)[0];
  EXPECT_EQ(t.dtype(), DType::kBFloat16);
  EXPECT_EQ(t.shape(), TensorShape({k.n, k.out_h().out, k.out_w().out, k.o}));
  std::vector<float> v(t.NumElements());
  for (int64_t i = 0; i < t.NumElements(); ++i) v[i] = static_cast<float>(t.ValueAsDouble(i));
  return v;
}

// bfloat16 output: within one rounding (2^-8 of the value, which the sum of |terms|
// bounds) and float32 sums.
constexpr double kTolerance = 1e-2;

class ForwardTest : public ::testing::TestWithParam<Case> {};

TEST_P(ForwardTest, EveryPathMatchesTheNaiveSum) {
  const Case& k = GetParam();
  const std::vector<float> x = RandomBf16(k.n * k.h * k.w * k.c, 1);
  const std::vector<float> w = RandomBf16(k.kh * k.kw * k.c * k.o, 2);
  const std::vector<float> bias = RandomBf16(k.o, 3);
  for (const bool fused : {false, true}) {
    std::vector<double> scale;
    const std::vector<double> want = NaiveForward(k, x, w, fused ? &bias : nullptr, fused, &scale);
    for (const std::string path : {"", "onednn", "amx"}) {
      SCOPED_TRACE(absl::StrCat("path '", path, "'", fused ? " with bias and relu" : ""));
      absl::StatusOr<std::vector<float>> got = RunForward(k, x, w, fused ? &bias : nullptr, path);
      ASSERT_TRUE(got.ok()) << got.status();
      testing::ExpectWithinSumOfTerms(*got, want, scale, kTolerance);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ForwardTest,
    ::testing::Values(Case{"fashion_conv1", 3, 28, 28, 1, 5, 5, 32, 1, 1, true},
                      // 9 taps a plane row, padded to 10: 30 a position; 20 channels.
                      Case{"rgb3x3_valid", 2, 9, 11, 3, 3, 3, 20, 1, 1, false},
                      // 32 taps a position; SAME pads one row and column more after.
                      Case{"even_kernel_same", 2, 6, 7, 2, 4, 4, 17, 1, 1, true},
                      // 33 columns: two whole blocks of 16 and one of 1; 70 channels:
                      // two pairs of tiles and one tile.
                      Case{"wide", 1, 5, 33, 1, 3, 3, 70, 1, 1, true},
                      Case{"one_by_one", 2, 4, 5, 3, 1, 1, 16, 1, 1, false},
                      Case{"one_position", 2, 1, 3, 1, 1, 3, 2, 1, 1, false},
                      // Not taken: too many taps, strided, dilated.
                      Case{"many_channels", 2, 6, 6, 32, 5, 5, 8, 1, 1, true},
                      Case{"stride2", 2, 9, 8, 1, 3, 3, 16, 2, 1, true},
                      Case{"dilated", 1, 9, 9, 1, 3, 3, 16, 1, 2, false}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(ForwardPathTest, WhereItApplies) {
  auto geometry = [](int64_t c, int64_t kh, int64_t kw, int64_t stride, int64_t dilation) {
    return nn::FilterGradGeometry{8,  28,     28,     c,        kh,       kw,     32,    28,
                                  28, stride, stride, dilation, dilation, kh / 2, kw / 2};
  };
  EXPECT_TRUE(nn::AmxForwardConvApplies(geometry(1, 5, 5, 1, 1)));   // 5 x 6 taps
  EXPECT_TRUE(nn::AmxForwardConvApplies(geometry(3, 3, 3, 1, 1)));   // 3 x 10
  EXPECT_TRUE(nn::AmxForwardConvApplies(geometry(4, 2, 4, 1, 1)));   // 2 x 16
  EXPECT_FALSE(nn::AmxForwardConvApplies(geometry(1, 5, 7, 1, 1)));  // 5 x 8
  EXPECT_FALSE(nn::AmxForwardConvApplies(geometry(16, 1, 3, 1, 1)));
  EXPECT_FALSE(nn::AmxForwardConvApplies(geometry(1, 5, 5, 2, 1)));
  EXPECT_FALSE(nn::AmxForwardConvApplies(geometry(1, 5, 5, 1, 2)));
  const bool amx = nn::AmxForwardConvIsAvailable();
  unsetenv("TANDEM_CONV_FORWARD");
  EXPECT_EQ(nn::ForwardConvByAmx(geometry(1, 5, 5, 1, 1)).value_or(!amx), amx);
  setenv("TANDEM_CONV_FORWARD", "onednn", 1);
  EXPECT_EQ(nn::ForwardConvByAmx(geometry(1, 5, 5, 1, 1)).value_or(true), false);
  setenv("TANDEM_CONV_FORWARD", "fast", 1);
  absl::StatusOr<bool> bad = nn::ForwardConvByAmx(geometry(1, 5, 5, 1, 1));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("TANDEM_CONV_FORWARD"), std::string::npos);
  // A session's Run says so too.
  const std::vector<float> x = RandomBf16(4 * 4, 1), w = RandomBf16(9 * 2, 2);
  absl::StatusOr<std::vector<float>> run =
      RunForward(Case{"small", 1, 4, 4, 1, 3, 3, 2, 1, 1, true}, x, w, nullptr, "fast");
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("TANDEM_CONV_FORWARD"), std::string::npos) << run.status();
  unsetenv("TANDEM_CONV_FORWARD");
}

// The kernel called directly (the session tests fall back to oneDNN where the process
// has no tiles): equal to the double sum, and bit for bit at 1 and 2 threads.
TEST(ForwardAmxTest, MatchesTheNaiveSumAtAnyThreadCount) {
  if (!nn::AmxForwardConvIsAvailable()) {
    GTEST_SKIP() << "this CPU, kernel or ONEDNN_MAX_CPU_ISA gives the process no AMX tiles";
  }
  for (const Case& k : {Case{"fashion_conv1", 5, 28, 28, 1, 5, 5, 32, 1, 1, true},
                        Case{"wide", 3, 5, 33, 1, 3, 3, 70, 1, 1, true},
                        Case{"rgb3x3_valid", 2, 9, 11, 3, 3, 3, 20, 1, 1, false}}) {
    SCOPED_TRACE(k.name);
    const Out oh = k.out_h(), ow = k.out_w();
    const std::vector<float> x = RandomBf16(k.n * k.h * k.w * k.c, 4);
    const std::vector<float> w = RandomBf16(k.kh * k.kw * k.c * k.o, 5);
    const std::vector<float> bias = RandomBf16(k.o, 6);
    auto bf16 = [](const std::vector<float>& v, const TensorShape& shape) {
      return Tensor::FromVector<bfloat16>(std::vector<bfloat16>(v.begin(), v.end()), shape);
    };
    const Tensor xt = bf16(x, TensorShape({k.n, k.h, k.w, k.c}));
    const Tensor wt = bf16(w, TensorShape({k.kh, k.kw, k.c, k.o}));
    const Tensor bt = bf16(bias, TensorShape({k.o}));
    const nn::FilterGradGeometry g{k.n,    k.h, k.w, k.c, k.kh, k.kw,   k.o,   oh.out,
                                   ow.out, 1,   1,   1,   1,    oh.pad, ow.pad};
    ASSERT_TRUE(nn::AmxForwardConvApplies(g));
    std::vector<double> scale;
    const std::vector<double> want = NaiveForward(k, x, w, &bias, true, &scale);
    const int threads = omp_get_max_threads();
    std::vector<Tensor> outs;
    for (int t : {1, 2}) {
      omp_set_num_threads(t);
      outs.emplace_back(DType::kBFloat16, TensorShape({k.n, oh.out, ow.out, k.o}));
      ASSERT_TRUE(nn::ConvForwardAmx(g, xt, wt, &bt, true, &outs.back()).ok());
    }
    omp_set_num_threads(threads);
    std::vector<float> got(outs[0].NumElements());
    for (size_t i = 0; i < got.size(); ++i) got[i] = static_cast<float>(outs[0].ValueAsDouble(i));
    testing::ExpectWithinSumOfTerms(got, want, scale, kTolerance);
    EXPECT_EQ(std::memcmp(outs[0].raw_data(), outs[1].raw_data(), outs[0].TotalBytes()), 0);
  }
}

}  // namespace
}  // namespace tandem

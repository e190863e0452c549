// Conv2DBackpropInput on its two CPU paths: oneDNN's backward-data primitive, and (with
// stride 1) the forward convolution of the output gradient by the flipped filter, by
// default and as TANDEM_CONV_INPUT_GRAD chooses (stride 2 falls back to oneDNN's). Each
// must equal a plain double loop over strides, dilations, even kernels, SAME and VALID
// padding, in float32 and bfloat16.
#include <cmath>
#include <cstdlib>
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

std::vector<float> Random(size_t n, uint32_t seed, DType dtype) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) {
    x = u(rng);
    if (dtype == DType::kBFloat16) x = static_cast<float>(bfloat16(x));  // exact operands
  }
  return v;
}

// dX[b][y][x][c] = sum over output positions and taps that read (y, x) of
// w[i][j][c][o] * dy[b][oy][ox][o], in double; `scale` gets the sum of |terms|.
std::vector<double> NaiveInputGrad(const Case& k, const std::vector<float>& w,
                                   const std::vector<float>& dy, std::vector<double>* scale) {
  std::vector<double> g(k.n * k.h * k.w * k.c, 0.0);
  scale->assign(g.size(), 0.0);
  testing::ForEachTap(k, [&](int64_t xi, int64_t yi, int64_t tap) {
    for (int64_t ch = 0; ch < k.c; ++ch)
      for (int64_t o = 0; o < k.o; ++o) {
        const double t = double(w[(tap * k.c + ch) * k.o + o]) * dy[yi * k.o + o];
        g[xi * k.c + ch] += t;
        (*scale)[xi * k.c + ch] += std::fabs(t);
      }
  });
  return g;
}

// Runs Conv2DBackpropInput in `dtype` under TANDEM_CONV_INPUT_GRAD=`path`; returns the
// gradient as floats, or the run's error.
absl::StatusOr<std::vector<float>> RunInputGrad(const Case& k, const std::vector<float>& w,
                                                const std::vector<float>& dy, DType dtype,
                                                const std::string& path) {
  const Out oh = k.out_h(), ow = k.out_w();
  Scope s = Scope::NewRootScope();
  Output ws = ops::Const(s, Tensor::FromVector<float>(w, TensorShape({k.kh, k.kw, k.c, k.o})));
  Output dys =
      ops::Const(s, Tensor::FromVector<float>(dy, TensorShape({k.n, oh.out, ow.out, k.o})));
  if (dtype == DType::kBFloat16) {
    ws = ops::Cast(s, ws, dtype);
    dys = ops::Cast(s, dys, dtype);
  }
  ops::Conv2DAttrs a{
      {1, k.stride, k.stride, 1}, k.same ? "SAME" : "VALID", {1, k.dilation, k.dilation, 1}};
  Output g = ops::Conv2DBackpropInput(
      s, ops::ConstInt32(s, {int(k.n), int(k.h), int(k.w), int(k.c)}), ws, dys, a);
  EXPECT_TRUE(s.ok()) << s.status();
  proto::GraphDef def;
  s.graph()->ToGraphDef(&def);
  setenv("TANDEM_CONV_INPUT_GRAD", path.c_str(), 1);
  auto session = DirectSession::Create(def, SessionOptions{});
  if (!session.ok()) return session.status();
  auto result = (*session)->Run({}, {g.name()}, {});
  unsetenv("TANDEM_CONV_INPUT_GRAD");
  if (!result.ok()) return result.status();
  const Tensor& t = (*result)[0];
  EXPECT_EQ(t.dtype(), dtype);
  EXPECT_EQ(t.shape(), TensorShape({k.n, k.h, k.w, k.c}));
  std::vector<float> v(t.NumElements());
  for (int64_t i = 0; i < t.NumElements(); ++i) v[i] = static_cast<float>(t.ValueAsDouble(i));
  return v;
}

class InputGradTest : public ::testing::TestWithParam<Case> {};

TEST_P(InputGradTest, EveryPathMatchesTheNaiveSum) {
  const Case& k = GetParam();
  const Out oh = k.out_h(), ow = k.out_w();
  // Tolerance relative to the sum of |terms|: float32 sums, and a bfloat16 result's
  // rounding.
  for (const auto& [dtype, tolerance] :
       {std::pair{DType::kFloat, 1e-5}, std::pair{DType::kBFloat16, 1e-2}}) {
    const std::vector<float> w = Random(k.kh * k.kw * k.c * k.o, 1, dtype);
    const std::vector<float> dy = Random(k.n * oh.out * ow.out * k.o, 2, dtype);
    std::vector<double> scale;
    const std::vector<double> want = NaiveInputGrad(k, w, dy, &scale);
    for (const std::string path : {"", "onednn", "forward"}) {
      SCOPED_TRACE(absl::StrCat("path '", path, "' ", DTypeName(dtype)));
      absl::StatusOr<std::vector<float>> got = RunInputGrad(k, w, dy, dtype, path);
      ASSERT_TRUE(got.ok()) << got.status();
      testing::ExpectWithinSumOfTerms(*got, want, scale, tolerance);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, InputGradTest,
    ::testing::Values(Case{"same3x3", 2, 5, 5, 3, 3, 3, 4, 1, 1, true},
                      Case{"valid5x5", 3, 9, 11, 4, 5, 5, 6, 1, 1, false},
                      // SAME with an even kernel pads one row more after than before, so
                      // the transposed convolution pads the other way round.
                      Case{"same_even_kernel", 2, 6, 7, 3, 4, 2, 5, 1, 1, true},
                      Case{"same_dilated", 1, 8, 8, 2, 3, 3, 3, 1, 2, true},
                      Case{"valid_dilated", 1, 9, 8, 1, 2, 3, 2, 1, 3, false},
                      Case{"mnist_conv2", 4, 14, 14, 32, 5, 5, 64, 1, 1, true},
                      Case{"one_by_one", 2, 5, 6, 8, 1, 1, 16, 1, 1, false},
                      // Strided: the transposed form does not apply; oneDNN's runs.
                      Case{"valid_stride2", 2, 9, 7, 3, 3, 3, 5, 2, 1, false},
                      Case{"same_stride2", 1, 7, 8, 2, 3, 3, 2, 2, 1, true}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(InputGradPathTest, UnknownChoiceIsAnError) {
  const Case k{"small", 1, 4, 4, 2, 3, 3, 2, 1, 1, true};
  const std::vector<float> w = Random(3 * 3 * 2 * 2, 1, DType::kFloat);
  const std::vector<float> dy = Random(4 * 4 * 2, 2, DType::kFloat);
  absl::StatusOr<std::vector<float>> result = RunInputGrad(k, w, dy, DType::kFloat, "fast");
  unsetenv("TANDEM_CONV_INPUT_GRAD");
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("TANDEM_CONV_INPUT_GRAD"), std::string::npos)
      << result.status();
}

}  // namespace
}  // namespace tandem

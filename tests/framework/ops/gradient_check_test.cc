// Runs every registered GradCheckCase, and fails for any op that has a gradient
// function but no case (so a new differentiable op cannot skip the check).
#include "tests/framework/ops/gradient_check.h"

#include <set>

#include "framework/ops/gradients.h"
#include "framework/ops/standard_ops.h"
#include "gtest/gtest.h"

namespace tandem::testing {
namespace {

std::vector<GradCheckCase> AllCases() {
  std::vector<GradCheckCase> all;
  for (auto* family :
       {&ArrayGradCheckCases, &MathGradCheckCases, &NnGradCheckCases, &StateGradCheckCases}) {
    for (auto& c : family()) all.push_back(std::move(c));
  }
  return all;
}

class GradientCheck : public ::testing::TestWithParam<GradCheckCase> {};

TEST_P(GradientCheck, MatchesFiniteDifferences) {
  const GradCheckCase& c = GetParam();
  auto result = CheckGradient(c);
  ASSERT_TRUE(result.ok()) << c.op << "/" << c.label << ": " << result.status();
  EXPECT_LE(result->max_error, c.tolerance) << c.op << "/" << c.label << ": " << result->worst;
}

INSTANTIATE_TEST_SUITE_P(AllOps, GradientCheck, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<GradCheckCase>& info) {
                           std::string name = info.param.op + "_" + info.param.label;
                           for (char& ch : name) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

// The ops with bfloat16 kernels (the mixed-precision policy's allow and infer lists).
// Their cases run again with f on bfloat16; the backward ops (ReluGrad, BiasAddGrad,
// MaxPoolGrad, Conv2DBackpropInput/Filter, MatMul) run on bfloat16 inside them.
const std::set<std::string>& Bf16Ops() {
  static const auto* ops =
      new std::set<std::string>{"MatMul", "Conv2D", "Relu", "BiasAdd", "MaxPool"};
  return *ops;
}

// bfloat16 keeps 8 significant bits (unit roundoff u = 2^-8 = 0.0039). The inputs,
// the weights r of the objective, and the gradient are each rounded once, and every
// rounding error of a sum is at most u of its largest term: 8u bounds the relative
// error of these small cases with room for the float32 finite differences.
constexpr double kBf16Tolerance = 8.0 / 256.0;

std::vector<GradCheckCase> Bf16Cases() {
  std::vector<GradCheckCase> cases;
  for (auto& c : AllCases()) {
    if (Bf16Ops().count(c.op)) cases.push_back(std::move(c));
  }
  return cases;
}

class GradientCheckBf16 : public ::testing::TestWithParam<GradCheckCase> {};

TEST_P(GradientCheckBf16, MatchesFloat32FiniteDifferences) {
  const GradCheckCase& c = GetParam();
  auto result = CheckGradientInBfloat16(c);
  ASSERT_TRUE(result.ok()) << c.op << "/" << c.label << ": " << result.status();
  EXPECT_LE(result->max_error, kBf16Tolerance) << c.op << "/" << c.label << ": " << result->worst;
}

INSTANTIATE_TEST_SUITE_P(Bf16Ops, GradientCheckBf16, ::testing::ValuesIn(Bf16Cases()),
                         [](const ::testing::TestParamInfo<GradCheckCase>& info) {
                           std::string name = info.param.op + "_" + info.param.label;
                           for (char& ch : name) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

TEST(GradientCheckCoverage, EveryBf16OpHasACase) {
  std::set<std::string> covered;
  for (const auto& c : Bf16Cases()) covered.insert(c.op);
  for (const std::string& op : Bf16Ops()) EXPECT_TRUE(covered.count(op)) << op;
}

TEST(GradientCheckCoverage, EveryDifferentiableOpHasACase) {
  ops::EnsureStandardOps();
  std::set<std::string> covered;
  for (const auto& c : AllCases()) covered.insert(c.op);
  for (const std::string& op : OpRegistry::Global()->ListOps()) {
    if (GradientRegistry::Global()->HasGradient(op)) {
      EXPECT_TRUE(covered.count(op)) << "op " << op << " has a gradient but no GradCheckCase";
    }
  }
}

}  // namespace
}  // namespace tandem::testing

// tests/framework/ops/gradient_check.h
//
// The central finite-difference gradient check every differentiable op must pass.
// A GradCheckCase builds y = f(x_1..x_k) from placeholders holding `inputs`. The
// check draws a fixed random r of y's shape and compares the symbolic gradient of
// sum(r * y) (Gradients with grad_ys = r) to central differences of the same sum,
// element by element: |symbolic - numeric| <= tolerance * (1 + |numeric|).
//
// Each op family contributes its cases through one function below; the test in
// gradient_check_test.cc fails for any op with a registered gradient and no case.
#ifndef TANDEM_TESTS_FRAMEWORK_OPS_GRADIENT_CHECK_H_
#define TANDEM_TESTS_FRAMEWORK_OPS_GRADIENT_CHECK_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/graph/scope.h"
#include "framework/runtime/session.h"

namespace tandem::testing {

struct GradCheckCase {
  std::string op;              // The op whose gradient this case covers.
  std::string label;           // Tells several cases of one op apart.
  std::vector<Tensor> inputs;  // float32 values of the differentiated inputs.
  std::function<Output(const Scope& scope, const std::vector<Output>& xs)> build;
  double delta = 1e-3;
  double tolerance = 5e-3;
  // When set, each input is a resource variable initialised from `inputs`; build
  // receives the variable handles and gradients are taken with respect to them.
  bool as_variables = false;
};

struct GradCheckResult {
  double max_error = 0;              // max over elements of |sym - num| / (1 + |num|)
  std::string worst;                 // "input 1 element 7: symbolic 0.5 numeric 0.49"
  std::vector<Tensor> values;        // y, then the symbolic gradient of each input.
  std::vector<std::string> gpu_ops;  // Ops of the gradient step that ran on a GPU.
};

absl::StatusOr<GradCheckResult> CheckGradient(const GradCheckCase& c);

// The options of the sessions the checks create (a GPU test sets num_gpus).
SessionOptions& GradCheckSessionOptions();

// The check of an op's bfloat16 kernels: the symbolic gradient comes from the graph
// Cast(f(Cast(x, bfloat16)), float32), so the forward and every backward op of f run
// on bfloat16, and it is compared to central differences of the float32 f (bfloat16
// cannot resolve a small step). Cases with as_variables are refused.
absl::StatusOr<GradCheckResult> CheckGradientInBfloat16(const GradCheckCase& c);

// A float32 tensor of `shape` with values uniform in [lo, hi), from `seed`.
Tensor RandomTensor(const TensorShape& shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f);

std::vector<GradCheckCase> ArrayGradCheckCases();
std::vector<GradCheckCase> MathGradCheckCases();
std::vector<GradCheckCase> NnGradCheckCases();
std::vector<GradCheckCase> StateGradCheckCases();

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_FRAMEWORK_OPS_GRADIENT_CHECK_H_

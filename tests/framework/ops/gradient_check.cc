#include "tests/framework/ops/gradient_check.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "framework/core/random.h"
#include "framework/core/status.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/gradients.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/state_ops.h"
#include "framework/runtime/session.h"

namespace tandem::testing {

Tensor RandomTensor(const TensorShape& shape, uint64_t seed, float lo, float hi) {
  RandomSampler rng(PhiloxRandom(seed, 7));
  Tensor t(DType::kFloat, shape);
  for (float& v : t.flat<float>()) v = lo + (hi - lo) * rng.Uniform();
  return t;
}

SessionOptions& GradCheckSessionOptions() {
  static SessionOptions* options = new SessionOptions();
  return *options;
}

namespace {

absl::StatusOr<GradCheckResult> Check(const GradCheckCase& c, bool bf16) {
  if (bf16 && c.as_variables) {
    return absl::InvalidArgumentError("the bfloat16 check takes placeholder inputs only");
  }
  Scope root = Scope::NewRootScope();
  std::vector<Output> placeholders, xs;
  std::vector<std::string> inits;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    placeholders.push_back(ops::Placeholder(root.WithOpName(absl::StrCat("x", i)),
                                            c.inputs[i].dtype(), c.inputs[i].shape()));
    if (c.as_variables) {
      ops::Variable v(root, absl::StrCat("v", i), placeholders.back());
      xs.push_back(v.handle());
      if (v.valid()) inits.push_back(v.initializer()->name());
    } else {
      xs.push_back(placeholders.back());
    }
  }
  Output y = c.build(root, xs);
  TANDEM_RETURN_IF_ERROR(root.status());
  if (!y.valid()) return absl::InvalidArgumentError("build returned an invalid output");
  // The output the symbolic gradient is taken of: y, or its bfloat16 twin.
  Output y_sym = y;
  if (bf16) {
    Scope low = root.NewSubScope("bf16");
    std::vector<Output> xs_low;
    for (const Output& x : xs) xs_low.push_back(ops::Cast(low, x, DType::kBFloat16));
    Output y_low = c.build(low, xs_low);
    TANDEM_RETURN_IF_ERROR(root.status());
    if (!y_low.valid() || y_low.dtype() != DType::kBFloat16) {
      return absl::InvalidArgumentError("the bfloat16 build did not give a bfloat16 output");
    }
    y_sym = ops::Cast(low, y_low, DType::kFloat);
  }

  FeedMap feeds;
  for (size_t i = 0; i < xs.size(); ++i) {
    feeds.push_back({placeholders[i].name(), c.inputs[i]});
  }
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  TANDEM_ASSIGN_OR_RETURN(auto session, NewDirectSession(def, GradCheckSessionOptions()));
  // Variables (if any) are re-initialised from the fed values before every evaluation.
  auto run = [&](const FeedMap& f,
                 const std::vector<std::string>& fetches) -> absl::StatusOr<std::vector<Tensor>> {
    if (!inits.empty()) TANDEM_RETURN_IF_ERROR(session->Run(f, {}, inits).status());
    return session->Run(f, fetches);
  };
  TANDEM_ASSIGN_OR_RETURN(std::vector<Tensor> y0, run(feeds, {y.name()}));
  Tensor r = RandomTensor(y0[0].shape(), 1234);

  Output r_const = ops::Const(root.WithOpName("r"), r);
  TANDEM_ASSIGN_OR_RETURN(std::vector<Output> grads, Gradients(root, {y_sym}, xs, {r_const}));
  std::vector<std::string> grad_names;
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].valid()) {
      return absl::InvalidArgumentError(absl::StrCat("no gradient for input ", i));
    }
    grad_names.push_back(grads[i].name());
  }
  root.graph()->ToGraphDef(&def);
  TANDEM_RETURN_IF_ERROR(session->Extend(def));
  TANDEM_ASSIGN_OR_RETURN(std::vector<Tensor> symbolic, run(feeds, grad_names));
  GradCheckResult result;
  result.values.push_back(y0[0]);
  for (const Tensor& g : symbolic) result.values.push_back(g);
  // Traced forward and gradient steps tell which ops ran on a GPU.
  for (const std::vector<std::string>& fetches :
       {std::vector<std::string>{y_sym.name()}, grad_names}) {
    if (!inits.empty()) TANDEM_RETURN_IF_ERROR(session->Run(feeds, {}, inits).status());
    RunOptions traced;
    traced.trace = true;
    RunMetadata metadata;
    TANDEM_RETURN_IF_ERROR(session->Run(feeds, fetches, {}, traced, &metadata).status());
    for (const NodeExecStats& n : metadata.step_stats.nodes) {
      if (n.device.find("/device:GPU:") != std::string::npos) result.gpu_ops.push_back(n.op);
    }
  }

  auto objective = [&](const FeedMap& f) -> absl::StatusOr<double> {
    TANDEM_ASSIGN_OR_RETURN(std::vector<Tensor> out, run(f, {y.name()}));
    double sum = 0;
    for (int64_t k = 0; k < out[0].NumElements(); ++k) {
      sum += static_cast<double>(r.flat<float>()[k]) * out[0].ValueAsDouble(k);
    }
    return sum;
  };
  for (size_t i = 0; i < xs.size(); ++i) {
    if (symbolic[i].shape() != c.inputs[i].shape()) {
      return absl::InvalidArgumentError(
          absl::StrCat("gradient of input ", i, " has shape ", symbolic[i].shape().DebugString(),
                       ", input has ", c.inputs[i].shape().DebugString()));
    }
    for (int64_t k = 0; k < c.inputs[i].NumElements(); ++k) {
      FeedMap plus = feeds, minus = feeds;
      plus[i].second = c.inputs[i].DeepCopy();
      minus[i].second = c.inputs[i].DeepCopy();
      plus[i].second.flat<float>()[k] += static_cast<float>(c.delta);
      minus[i].second.flat<float>()[k] -= static_cast<float>(c.delta);
      TANDEM_ASSIGN_OR_RETURN(double fp, objective(plus));
      TANDEM_ASSIGN_OR_RETURN(double fm, objective(minus));
      double numeric = (fp - fm) / (2 * c.delta);
      double sym = symbolic[i].ValueAsDouble(k);
      double err = std::fabs(sym - numeric) / (1 + std::fabs(numeric));
      if (err > result.max_error || result.worst.empty()) {
        if (err >= result.max_error) {
          result.max_error = err;
          result.worst =
              absl::StrCat("input ", i, " element ", k, ": symbolic ", sym, " numeric ", numeric);
        }
      }
    }
  }
  return result;
}

}  // namespace

absl::StatusOr<GradCheckResult> CheckGradient(const GradCheckCase& c) { return Check(c, false); }

absl::StatusOr<GradCheckResult> CheckGradientInBfloat16(const GradCheckCase& c) {
  return Check(c, true);
}

}  // namespace tandem::testing

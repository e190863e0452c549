// Op definitions and builders of the optimizers' ResourceApply* and ResourceSparseApply* ops and of
// the Floor and Cos helpers the learning-rate schedules use (see training_ops.h).
#include "framework/ops/training_ops.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/ops/internal/build.h"
#include "framework/ops/standard_ops.h"

namespace tandem::ops {
namespace {

// The layout of one ResourceApply* op: `num_vars` resource handles, then float inputs,
// one of which (`grad`) is shaped like the variable and the rest scalars.
struct ApplyOpLayout {
  const char* op;
  std::vector<const char*> inputs;  // Input names, for messages.
  int num_vars;
  int grad;
  bool has_nesterov;
  int indices = -1;  // Sparse ops: the int32/int64 row indices; grad holds those rows.
};

const std::vector<ApplyOpLayout>& ApplyOpLayouts() {
  static const auto* layouts = new std::vector<ApplyOpLayout>{
      {"ResourceApplyGradientDescent", {"var", "alpha", "delta"}, 1, 2, false},
      {"ResourceApplyMomentum", {"var", "accum", "lr", "grad", "momentum"}, 2, 3, true},
      {"ResourceApplyAdagrad", {"var", "accum", "lr", "grad"}, 2, 3, false},
      {"ResourceApplyAdam",
       {"var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon", "grad"},
       3,
       9,
       true},
      {"ResourceApplyRMSProp",
       {"var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"},
       3,
       7,
       false},
      {"ResourceApplyCenteredRMSProp",
       {"var", "mg", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"},
       4,
       8,
       false},
      {"ResourceApplyFtrl",
       {"var", "accum", "linear", "grad", "lr", "l1", "l2", "lr_power"},
       3,
       3,
       false},
      {"ResourceSparseApplyGradientDescent", {"var", "alpha", "delta", "indices"}, 1, 2, false, 3},
      {"ResourceSparseApplyMomentum",
       {"var", "accum", "lr", "grad", "indices", "momentum"},
       2,
       3,
       true,
       4},
      {"ResourceSparseApplyAdagrad", {"var", "accum", "lr", "grad", "indices"}, 2, 3, false, 4},
      {"ResourceSparseApplyAdam",
       {"var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon", "grad",
        "indices"},
       3,
       9,
       true,
       10},
      {"ResourceSparseApplyRMSProp",
       {"var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad", "indices"},
       3,
       7,
       false,
       8},
      {"ResourceSparseApplyCenteredRMSProp",
       {"var", "mg", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad", "indices"},
       4,
       8,
       false,
       9},
      {"ResourceSparseApplyFtrl",
       {"var", "accum", "linear", "grad", "indices", "lr", "l1", "l2", "lr_power"},
       3,
       3,
       false,
       4},
  };
  return *layouts;
}

// The gradient of _<op>WithMatMul: MatMul(a, b) of inputs grad and grad + 1, float32
// or bfloat16 matrices of one dtype whose product has the variable's shape.
absl::Status InferMatMulGradient(const ApplyOpLayout& layout, const PartialShape& var_shape,
                                 InferenceContext& ctx) {
  const int a = layout.grad, b = layout.grad + 1;
  const DType dtype = ctx.input_dtype(a);
  if ((dtype != DType::kFloat && dtype != DType::kBFloat16) || ctx.input_dtype(b) != dtype) {
    return ctx.Error(absl::StrCat("a and b must be both float32 or both bfloat16, not ",
                                  DTypeName(dtype), " and ", DTypeName(ctx.input_dtype(b))));
  }
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(a, 2));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(b, 2));
  TANDEM_ASSIGN_OR_RETURN(const bool ta, ctx.GetAttr<bool>("transpose_a"));
  TANDEM_ASSIGN_OR_RETURN(const bool tb, ctx.GetAttr<bool>("transpose_b"));
  const PartialShape& sa = ctx.input_shape(a);
  const PartialShape& sb = ctx.input_shape(b);
  if (!sa.known_rank() || !sb.known_rank()) return absl::OkStatus();
  const int64_t k = sa.dim(ta ? 0 : 1), k2 = sb.dim(tb ? 1 : 0);
  if (k >= 0 && k2 >= 0 && k != k2) {
    return ctx.Error(
        absl::StrCat("a and b do not multiply: ", sa.DebugString(), " and ", sb.DebugString()));
  }
  const Dims product{sa.dim(ta ? 1 : 0), sb.dim(tb ? 0 : 1)};
  if (!var_shape.IsCompatibleWith(PartialShape(absl::MakeConstSpan(product)))) {
    return ctx.Error(
        absl::StrCat("var and MatMul(a, b) do not have the same shape: ", var_shape.DebugString(),
                     " vs ", PartialShape(absl::MakeConstSpan(product)).DebugString()));
  }
  return absl::OkStatus();
}

// Checks handles (float32 variables of one shape), the gradient (float32, the variable's
// shape; with `matmul`, InferMatMulGradient's operands in its place) and the scalar
// hyper-parameters; no outputs.
absl::Status InferApply(const ApplyOpLayout& layout, bool matmul, InferenceContext& ctx) {
  PartialShape var_shape;
  for (int i = 0; i < layout.num_vars; ++i) {
    if (ctx.input_dtype(i) != DType::kResource) {
      return ctx.Error(absl::StrCat("input ", i, " (", layout.inputs[i],
                                    ") must be a variable handle (resource)"));
    }
    const HandleData& h = ctx.input_handle(i);
    if (h.dtype != DType::kInvalid && h.dtype != DType::kFloat) {
      return ctx.Error(absl::StrCat(layout.inputs[i], " is a ", DTypeName(h.dtype),
                                    " variable; only float32 is supported"));
    }
    if (!var_shape.IsCompatibleWith(h.shape)) {
      return ctx.Error(absl::StrCat("var has shape ", var_shape.DebugString(), " but ",
                                    layout.inputs[i], " has shape ", h.shape.DebugString()));
    }
    if (i == 0) {
      var_shape = h.shape;
    } else {
      TANDEM_ASSIGN_OR_RETURN(var_shape, var_shape.Merge(h.shape));
    }
  }
  for (int input = layout.num_vars; input < ctx.num_inputs(); ++input) {
    if (matmul && (input == layout.grad || input == layout.grad + 1)) continue;
    const int i = matmul && input > layout.grad ? input - 1 : input;  // its place in layout
    if (i == layout.indices) {
      if (ctx.input_dtype(input) != DType::kInt32 && ctx.input_dtype(input) != DType::kInt64) {
        return ctx.Error(absl::StrCat("indices must be int32 or int64, not ",
                                      DTypeName(ctx.input_dtype(input))));
      }
      TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(input, 1));
      continue;
    }
    if (ctx.input_dtype(input) != DType::kFloat) {
      return ctx.Error(absl::StrCat(layout.inputs[i], " must be float32, not ",
                                    DTypeName(ctx.input_dtype(input))));
    }
    const PartialShape& s = ctx.input_shape(input);
    if (i == layout.grad && layout.indices >= 0) {
      // grad: [len(indices)] + var.shape[1:].
      if (var_shape.known_rank() && var_shape.rank() < 1) {
        return ctx.Error("var must have rank >= 1");
      }
      if (var_shape.known_rank()) {
        const PartialShape& idx = ctx.input_shape(layout.indices);
        Dims d{idx.known_rank() && idx.rank() == 1 ? idx.dim(0) : -1};
        d.insert(d.end(), var_shape.dims().begin() + 1, var_shape.dims().end());
        PartialShape want(absl::MakeConstSpan(d));
        if (!want.IsCompatibleWith(s)) {
          return ctx.Error(absl::StrCat("grad must have shape [len(indices)] + var.shape[1:] = ",
                                        want.DebugString(), ", got ", s.DebugString()));
        }
      }
    } else if (i == layout.grad) {
      if (!var_shape.IsCompatibleWith(s)) {
        return ctx.Error(absl::StrCat("var and grad do not have the same shape: ",
                                      var_shape.DebugString(), " vs ", s.DebugString()));
      }
    } else if (s.known_rank() && s.num_elements() != -1 && s.num_elements() != 1) {
      return ctx.Error(absl::StrCat(layout.inputs[i], " is not a scalar: ", s.DebugString()));
    }
  }
  if (matmul) return InferMatMulGradient(layout, var_shape, ctx);
  return absl::OkStatus();
}

Node* BuildApply(const Scope& scope, absl::string_view op, std::vector<Output> inputs,
                 AttrMap attrs = {}) {
  return internal::BuildNode(scope, op, std::move(inputs), std::move(attrs));
}

absl::Status InferFloatUnary(InferenceContext& ctx) {
  if (ctx.input_dtype(0) != DType::kFloat) {
    return ctx.Error(absl::StrCat("expects a float32 input, not ", DTypeName(ctx.input_dtype(0))));
  }
  return shape_fn::Unchanged(ctx);
}

}  // namespace

int DenseApplyGradientInput(absl::string_view op) {
  for (const ApplyOpLayout& layout : ApplyOpLayouts()) {
    if (layout.op == op && layout.indices < 0) return layout.grad;
  }
  return -1;
}

void RegisterTrainingOps(OpRegistry* r) {
  for (const ApplyOpLayout& layout : ApplyOpLayouts()) {
    AttrMap attrs = {{"use_locking", false}};
    if (layout.has_nesterov) attrs["use_nesterov"] = false;
    const int n = static_cast<int>(layout.inputs.size());
    r->Register({.name = layout.op,
                 .min_inputs = n,
                 .max_inputs = n,
                 .default_attrs = attrs,
                 .stateful = true,
                 .infer = [&layout](InferenceContext& ctx) {
                   return InferApply(layout, /*matmul=*/false, ctx);
                 }});
    if (layout.indices >= 0) continue;
    // _<op>WithMatMul: the update with its gradient MatMul(a, b) computed inside,
    // block by block (the remapper's FuseGradientMatMulIntoApply puts it in place of a
    // MatMul that feeds nothing but the update).
    attrs["transpose_a"] = false;
    attrs["transpose_b"] = false;
    r->Register({.name = absl::StrCat("_", layout.op, "WithMatMul"),
                 .min_inputs = n + 1,
                 .max_inputs = n + 1,
                 .default_attrs = std::move(attrs),
                 .stateful = true,
                 .infer = [&layout](InferenceContext& ctx) {
                   return InferApply(layout, /*matmul=*/true, ctx);
                 }});
  }
  // Registered here unless the math ops already provide them.
  for (const char* op : {"Floor", "Cos"}) {
    if (r->Lookup(op).ok()) continue;
    r->Register(
        {.name = op, .min_inputs = 1, .max_inputs = 1, .cheap = true, .infer = InferFloatUnary});
  }
}

Node* ResourceApplyGradientDescent(const Scope& scope, Output var, Output alpha, Output delta) {
  return BuildApply(scope, "ResourceApplyGradientDescent", {var, alpha, delta});
}

Node* ResourceApplyMomentum(const Scope& scope, Output var, Output accum, Output lr, Output grad,
                            Output momentum, bool use_nesterov) {
  return BuildApply(scope, "ResourceApplyMomentum", {var, accum, lr, grad, momentum},
                    {{"use_nesterov", use_nesterov}});
}

Node* ResourceApplyAdagrad(const Scope& scope, Output var, Output accum, Output lr, Output grad) {
  return BuildApply(scope, "ResourceApplyAdagrad", {var, accum, lr, grad});
}

Node* ResourceApplyAdam(const Scope& scope, Output var, Output m, Output v, Output beta1_power,
                        Output beta2_power, Output lr, Output beta1, Output beta2, Output epsilon,
                        Output grad, bool use_nesterov) {
  return BuildApply(scope, "ResourceApplyAdam",
                    {var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad},
                    {{"use_nesterov", use_nesterov}});
}

Node* ResourceApplyRMSProp(const Scope& scope, Output var, Output ms, Output mom, Output lr,
                           Output rho, Output momentum, Output epsilon, Output grad) {
  return BuildApply(scope, "ResourceApplyRMSProp",
                    {var, ms, mom, lr, rho, momentum, epsilon, grad});
}

Node* ResourceApplyCenteredRMSProp(const Scope& scope, Output var, Output mg, Output ms, Output mom,
                                   Output lr, Output rho, Output momentum, Output epsilon,
                                   Output grad) {
  return BuildApply(scope, "ResourceApplyCenteredRMSProp",
                    {var, mg, ms, mom, lr, rho, momentum, epsilon, grad});
}

Node* ResourceApplyFtrl(const Scope& scope, Output var, Output accum, Output linear, Output grad,
                        Output lr, Output l1, Output l2, Output lr_power) {
  return BuildApply(scope, "ResourceApplyFtrl", {var, accum, linear, grad, lr, l1, l2, lr_power});
}

Node* ResourceSparseApplyGradientDescent(const Scope& scope, Output var, Output alpha,
                                         Output delta, Output indices) {
  return BuildApply(scope, "ResourceSparseApplyGradientDescent", {var, alpha, delta, indices});
}

Node* ResourceSparseApplyMomentum(const Scope& scope, Output var, Output accum, Output lr,
                                  Output grad, Output indices, Output momentum, bool use_nesterov) {
  return BuildApply(scope, "ResourceSparseApplyMomentum", {var, accum, lr, grad, indices, momentum},
                    {{"use_nesterov", use_nesterov}});
}

Node* ResourceSparseApplyAdagrad(const Scope& scope, Output var, Output accum, Output lr,
                                 Output grad, Output indices) {
  return BuildApply(scope, "ResourceSparseApplyAdagrad", {var, accum, lr, grad, indices});
}

Node* ResourceSparseApplyAdam(const Scope& scope, Output var, Output m, Output v,
                              Output beta1_power, Output beta2_power, Output lr, Output beta1,
                              Output beta2, Output epsilon, Output grad, Output indices) {
  return BuildApply(scope, "ResourceSparseApplyAdam",
                    {var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices});
}

Node* ResourceSparseApplyRMSProp(const Scope& scope, Output var, Output ms, Output mom, Output lr,
                                 Output rho, Output momentum, Output epsilon, Output grad,
                                 Output indices) {
  return BuildApply(scope, "ResourceSparseApplyRMSProp",
                    {var, ms, mom, lr, rho, momentum, epsilon, grad, indices});
}

Node* ResourceSparseApplyCenteredRMSProp(const Scope& scope, Output var, Output mg, Output ms,
                                         Output mom, Output lr, Output rho, Output momentum,
                                         Output epsilon, Output grad, Output indices) {
  return BuildApply(scope, "ResourceSparseApplyCenteredRMSProp",
                    {var, mg, ms, mom, lr, rho, momentum, epsilon, grad, indices});
}

Node* ResourceSparseApplyFtrl(const Scope& scope, Output var, Output accum, Output linear,
                              Output grad, Output indices, Output lr, Output l1, Output l2,
                              Output lr_power) {
  return BuildApply(scope, "ResourceSparseApplyFtrl",
                    {var, accum, linear, grad, indices, lr, l1, l2, lr_power});
}

Output Floor(const Scope& scope, Output x) { return internal::Build(scope, "Floor", {x}); }
Output Cos(const Scope& scope, Output x) { return internal::Build(scope, "Cos", {x}); }

}  // namespace tandem::ops

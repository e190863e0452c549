// The concrete optimizers (see optimizers.h): slots, hyper-parameter tensors and one
// ResourceApply* op per variable; the sparse updates of each.
#include "framework/ops/optimizers.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/state_ops.h"
#include "framework/ops/training_ops.h"

namespace tandem::ops {
namespace {

std::string HyperName(absl::string_view prefix, absl::string_view name) {
  return absl::StrCat(prefix, "/", name);
}

}  // namespace

// GradientDescent ------------------------------------------------------------------------

GradientDescentOptimizer::GradientDescentOptimizer(HyperParameter learning_rate)
    : Optimizer("GradientDescent", "ResourceApplyGradientDescent"), learning_rate_(learning_rate) {}

absl::Status GradientDescentOptimizer::CreateSlots(const std::vector<Variable>&) {
  return absl::OkStatus();
}

void GradientDescentOptimizer::Prepare(const Scope& scope, absl::string_view prefix) {
  lr_t_ = learning_rate_.ToOutput(scope, HyperName(prefix, "learning_rate"));
}

Node* GradientDescentOptimizer::ApplyDense(const Scope& scope, Output grad, const Variable& var) {
  return ResourceApplyGradientDescent(scope, var.handle(), lr_t_, grad);
}

Node* GradientDescentOptimizer::ApplySparse(const Scope& scope, const IndexedSlices& grad,
                                            const Variable& var) {
  // TensorFlow's scatter_add(var, indices, -lr * values) with duplicates summed first
  // and the dense update's arithmetic per row, so a touched row gets the dense update's
  // bits.
  IndexedSlices g = DeduplicateIndexedSlices(scope, grad);
  return ResourceSparseApplyGradientDescent(scope, var.handle(), lr_t_, g.values, g.indices);
}

// Momentum -------------------------------------------------------------------------------

MomentumOptimizer::MomentumOptimizer(HyperParameter learning_rate, HyperParameter momentum,
                                     bool use_nesterov)
    : Optimizer("Momentum", "ResourceApplyMomentum"),
      learning_rate_(learning_rate),
      momentum_(momentum),
      use_nesterov_(use_nesterov) {}

absl::Status MomentumOptimizer::CreateSlots(const std::vector<Variable>& vars) {
  for (const Variable& v : vars) TANDEM_RETURN_IF_ERROR(GetOrMakeSlot(v, "momentum", 0).status());
  return absl::OkStatus();
}

void MomentumOptimizer::Prepare(const Scope& scope, absl::string_view prefix) {
  lr_t_ = learning_rate_.ToOutput(scope, HyperName(prefix, "learning_rate"));
  momentum_t_ = momentum_.ToOutput(scope, HyperName(prefix, "momentum"));
}

Node* MomentumOptimizer::ApplyDense(const Scope& scope, Output grad, const Variable& var) {
  return ResourceApplyMomentum(scope, var.handle(), Slot(var, "momentum").handle(), lr_t_, grad,
                               momentum_t_, use_nesterov_);
}

Node* MomentumOptimizer::ApplySparse(const Scope& scope, const IndexedSlices& grad,
                                     const Variable& var) {
  IndexedSlices g = DeduplicateIndexedSlices(scope, grad);
  return ResourceSparseApplyMomentum(scope.WithOpName("ResourceSparseApplyMomentum"), var.handle(),
                                     Slot(var, "momentum").handle(), lr_t_, g.values, g.indices,
                                     momentum_t_, use_nesterov_);
}

// Adagrad --------------------------------------------------------------------------------

AdagradOptimizer::AdagradOptimizer(HyperParameter learning_rate, float initial_accumulator_value)
    : Optimizer("Adagrad", "ResourceApplyAdagrad"),
      learning_rate_(learning_rate),
      initial_accumulator_value_(initial_accumulator_value) {}

absl::Status AdagradOptimizer::CreateSlots(const std::vector<Variable>& vars) {
  if (!(initial_accumulator_value_ > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("initial_accumulator_value must be positive: ", initial_accumulator_value_));
  }
  for (const Variable& v : vars) {
    TANDEM_RETURN_IF_ERROR(GetOrMakeSlot(v, "accumulator", initial_accumulator_value_).status());
  }
  return absl::OkStatus();
}

void AdagradOptimizer::Prepare(const Scope& scope, absl::string_view prefix) {
  lr_t_ = learning_rate_.ToOutput(scope, HyperName(prefix, "learning_rate"));
}

Node* AdagradOptimizer::ApplyDense(const Scope& scope, Output grad, const Variable& var) {
  return ResourceApplyAdagrad(scope, var.handle(), Slot(var, "accumulator").handle(), lr_t_, grad);
}

Node* AdagradOptimizer::ApplySparse(const Scope& scope, const IndexedSlices& grad,
                                    const Variable& var) {
  IndexedSlices g = DeduplicateIndexedSlices(scope, grad);
  return ResourceSparseApplyAdagrad(scope.WithOpName("ResourceSparseApplyAdagrad"), var.handle(),
                                    Slot(var, "accumulator").handle(), lr_t_, g.values, g.indices);
}

// Adam -----------------------------------------------------------------------------------

AdamOptimizer::AdamOptimizer(HyperParameter learning_rate, float beta1, float beta2,
                             HyperParameter epsilon)
    : Optimizer("Adam", "ResourceApplyAdam"),
      learning_rate_(learning_rate),
      beta1_(beta1),
      beta2_(beta2),
      epsilon_(epsilon) {}

absl::Status AdamOptimizer::CreateSlots(const std::vector<Variable>& vars) {
  // The beta powers live with the first variable by name, as in TensorFlow, except that
  // a table comes after every other variable: the hybrid strategy mirrors the powers
  // of dense updates on every replica instead of sharing them on a ps.
  const Variable& first =
      *std::min_element(vars.begin(), vars.end(), [](const Variable& a, const Variable& b) {
        const bool ta = IsTableHandle(*a.handle().node), tb = IsTableHandle(*b.handle().node);
        return ta != tb ? tb : a.name() < b.name();
      });
  TANDEM_ASSIGN_OR_RETURN(beta1_power_, GetOrMakeNonSlot("beta1_power", beta1_, first));
  TANDEM_ASSIGN_OR_RETURN(beta2_power_, GetOrMakeNonSlot("beta2_power", beta2_, first));
  for (const Variable& v : vars) {
    TANDEM_RETURN_IF_ERROR(GetOrMakeSlot(v, "m", 0).status());
    TANDEM_RETURN_IF_ERROR(GetOrMakeSlot(v, "v", 0).status());
  }
  return absl::OkStatus();
}

void AdamOptimizer::Prepare(const Scope& scope, absl::string_view prefix) {
  lr_t_ = learning_rate_.ToOutput(scope, HyperName(prefix, "learning_rate"));
  beta1_t_ = HyperParameter(beta1_).ToOutput(scope, HyperName(prefix, "beta1"));
  beta2_t_ = HyperParameter(beta2_).ToOutput(scope, HyperName(prefix, "beta2"));
  epsilon_t_ = epsilon_.ToOutput(scope, HyperName(prefix, "epsilon"));
}

Node* AdamOptimizer::ApplyDense(const Scope& scope, Output grad, const Variable& var) {
  return ResourceApplyAdam(scope, var.handle(), Slot(var, "m").handle(), Slot(var, "v").handle(),
                           beta1_power_->value(), beta2_power_->value(), lr_t_, beta1_t_, beta2_t_,
                           epsilon_t_, grad);
}

Node* AdamOptimizer::ApplySparse(const Scope& scope, const IndexedSlices& grad,
                                 const Variable& var) {
  // TensorFlow's Adam._apply_sparse_shared on the deduplicated gradient:
  //   m <- m * beta1, then m[indices] += (1 - beta1) * values
  //   v <- v * beta2, then v[indices] += (1 - beta2) * values^2
  //   var -= lr * sqrt(1 - beta2_power) / (1 - beta1_power) * m / (sqrt(v) + epsilon)
  IndexedSlices g = DeduplicateIndexedSlices(scope, grad);
  Output one = Const(scope.WithOpName("one"), 1.0f);
  Output lr = Div(scope, Mul(scope, lr_t_, Sqrt(scope, Sub(scope, one, beta2_power_->value()))),
                  Sub(scope, one, beta1_power_->value()));
  auto decay_and_add = [&](const Variable& slot, Output beta, Output values) {
    Output decayed =
        AssignVariableOp(scope, slot.handle(),
                         Mul(scope, ReadVariableOp(scope, slot.handle(), DType::kFloat), beta));
    Node* added =
        ResourceScatterAdd(scope.WithControlDependencies(std::vector<Output>{decayed}),
                           slot.handle(), g.indices, Mul(scope, values, Sub(scope, one, beta)));
    return ReadVariableOp(scope.WithControlDependencies(std::vector<Node*>{added}), slot.handle(),
                          DType::kFloat);
  };
  Output m_t = decay_and_add(Slot(var, "m"), beta1_t_, g.values);
  Output v_t = decay_and_add(Slot(var, "v"), beta2_t_, Mul(scope, g.values, g.values));
  Output step = Div(scope, Mul(scope, lr, m_t), Add(scope, Sqrt(scope, v_t), epsilon_t_));
  Output update = AssignSubVariableOp(scope.WithOpName("AssignSub"), var.handle(), step);
  return update.valid() ? update.node : nullptr;
}

Node* LazyAdamOptimizer::ApplySparse(const Scope& scope, const IndexedSlices& grad,
                                     const Variable& var) {
  IndexedSlices g = DeduplicateIndexedSlices(scope, grad);
  return ResourceSparseApplyAdam(scope.WithOpName("ResourceSparseApplyAdam"), var.handle(),
                                 Slot(var, "m").handle(), Slot(var, "v").handle(),
                                 beta1_power_->value(), beta2_power_->value(), lr_t_, beta1_t_,
                                 beta2_t_, epsilon_t_, g.values, g.indices);
}

std::vector<Node*> AdamOptimizer::Finish(const Scope& scope, absl::string_view prefix) {
  // beta_power <- beta_power * beta, after every update of the step has read it.
  std::vector<Node*> out;
  for (auto [power, beta, name] : {std::make_tuple(&*beta1_power_, beta1_t_, "beta1_power"),
                                   std::make_tuple(&*beta2_power_, beta2_t_, "beta2_power")}) {
    Scope s = scope.ColocateWith(power->handle().node);
    Output next =
        Mul(s.WithOpName(absl::StrCat(prefix, "/update_", name, "/mul")), power->value(), beta);
    Output assign =
        Assign(s.WithOpName(absl::StrCat(prefix, "/update_", name, "/Assign")), *power, next);
    out.push_back(assign.node);
  }
  return out;
}

// RMSProp --------------------------------------------------------------------------------

RMSPropOptimizer::RMSPropOptimizer(HyperParameter learning_rate, HyperParameter decay,
                                   HyperParameter momentum, HyperParameter epsilon, bool centered)
    : Optimizer("RMSProp", centered ? "ResourceApplyCenteredRMSProp" : "ResourceApplyRMSProp"),
      learning_rate_(learning_rate),
      decay_(decay),
      momentum_(momentum),
      epsilon_(epsilon),
      centered_(centered) {}

std::vector<std::string> RMSPropOptimizer::GetSlotNames() const {
  if (centered_) return {"rms", "mg", "momentum"};
  return {"rms", "momentum"};
}

absl::Status RMSPropOptimizer::CreateSlots(const std::vector<Variable>& vars) {
  // TensorFlow 1.x starts the mean square at one.
  for (const Variable& v : vars) {
    TANDEM_RETURN_IF_ERROR(GetOrMakeSlot(v, "rms", 1.0f).status());
    if (centered_) TANDEM_RETURN_IF_ERROR(GetOrMakeSlot(v, "mg", 0).status());
    TANDEM_RETURN_IF_ERROR(GetOrMakeSlot(v, "momentum", 0).status());
  }
  return absl::OkStatus();
}

void RMSPropOptimizer::Prepare(const Scope& scope, absl::string_view prefix) {
  lr_t_ = learning_rate_.ToOutput(scope, HyperName(prefix, "learning_rate"));
  decay_t_ = decay_.ToOutput(scope, HyperName(prefix, "decay"));
  momentum_t_ = momentum_.ToOutput(scope, HyperName(prefix, "momentum"));
  epsilon_t_ = epsilon_.ToOutput(scope, HyperName(prefix, "epsilon"));
}

Node* RMSPropOptimizer::ApplyDense(const Scope& scope, Output grad, const Variable& var) {
  if (centered_) {
    return ResourceApplyCenteredRMSProp(scope, var.handle(), Slot(var, "mg").handle(),
                                        Slot(var, "rms").handle(), Slot(var, "momentum").handle(),
                                        lr_t_, decay_t_, momentum_t_, epsilon_t_, grad);
  }
  return ResourceApplyRMSProp(scope, var.handle(), Slot(var, "rms").handle(),
                              Slot(var, "momentum").handle(), lr_t_, decay_t_, momentum_t_,
                              epsilon_t_, grad);
}

Node* RMSPropOptimizer::ApplySparse(const Scope& scope, const IndexedSlices& grad,
                                    const Variable& var) {
  IndexedSlices g = DeduplicateIndexedSlices(scope, grad);
  if (centered_) {
    return ResourceSparseApplyCenteredRMSProp(
        scope.WithOpName("ResourceSparseApplyCenteredRMSProp"), var.handle(),
        Slot(var, "mg").handle(), Slot(var, "rms").handle(), Slot(var, "momentum").handle(), lr_t_,
        decay_t_, momentum_t_, epsilon_t_, g.values, g.indices);
  }
  return ResourceSparseApplyRMSProp(scope.WithOpName("ResourceSparseApplyRMSProp"), var.handle(),
                                    Slot(var, "rms").handle(), Slot(var, "momentum").handle(),
                                    lr_t_, decay_t_, momentum_t_, epsilon_t_, g.values, g.indices);
}

// Ftrl -----------------------------------------------------------------------------------

FtrlOptimizer::FtrlOptimizer(HyperParameter learning_rate, HyperParameter learning_rate_power,
                             float initial_accumulator_value,
                             HyperParameter l1_regularization_strength,
                             HyperParameter l2_regularization_strength)
    : Optimizer("Ftrl", "ResourceApplyFtrl"),
      learning_rate_(learning_rate),
      learning_rate_power_(learning_rate_power),
      initial_accumulator_value_(initial_accumulator_value),
      l1_(l1_regularization_strength),
      l2_(l2_regularization_strength) {}

absl::Status FtrlOptimizer::CreateSlots(const std::vector<Variable>& vars) {
  if (initial_accumulator_value_ < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "initial_accumulator_value must be non-negative: ", initial_accumulator_value_));
  }
  for (const Variable& v : vars) {
    TANDEM_RETURN_IF_ERROR(GetOrMakeSlot(v, "accum", initial_accumulator_value_).status());
    TANDEM_RETURN_IF_ERROR(GetOrMakeSlot(v, "linear", 0).status());
  }
  return absl::OkStatus();
}

void FtrlOptimizer::Prepare(const Scope& scope, absl::string_view prefix) {
  lr_t_ = learning_rate_.ToOutput(scope, HyperName(prefix, "learning_rate"));
  lr_power_t_ = learning_rate_power_.ToOutput(scope, HyperName(prefix, "learning_rate_power"));
  l1_t_ = l1_.ToOutput(scope, HyperName(prefix, "l1_regularization_strength"));
  l2_t_ = l2_.ToOutput(scope, HyperName(prefix, "l2_regularization_strength"));
}

Node* FtrlOptimizer::ApplyDense(const Scope& scope, Output grad, const Variable& var) {
  return ResourceApplyFtrl(scope, var.handle(), Slot(var, "accum").handle(),
                           Slot(var, "linear").handle(), grad, lr_t_, l1_t_, l2_t_, lr_power_t_);
}

Node* FtrlOptimizer::ApplySparse(const Scope& scope, const IndexedSlices& grad,
                                 const Variable& var) {
  IndexedSlices g = DeduplicateIndexedSlices(scope, grad);
  return ResourceSparseApplyFtrl(scope.WithOpName("ResourceSparseApplyFtrl"), var.handle(),
                                 Slot(var, "accum").handle(), Slot(var, "linear").handle(),
                                 g.values, g.indices, lr_t_, l1_t_, l2_t_, lr_power_t_);
}

}  // namespace tandem::ops

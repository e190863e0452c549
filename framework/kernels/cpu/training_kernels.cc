// CPU kernels of the optimizers' ResourceApply* and ResourceSparseApply* ops (formulas
// in framework/ops/training_ops.h, as TensorFlow's training_ops.cc) and of the Floor and
// Cos helpers used by learning-rate schedules. A sparse form runs its dense kernel's
// element loop on each named row.
//
// An apply kernel resolves its variables, locks their mutexes in address order (so
// concurrent applies sharing variables cannot deadlock), validates dtypes and shapes,
// takes each variable's buffer for writing (Var::MutableValue copies it first when a
// read still shares it) and runs its element loop (dense_apply_loops.h), split over the
// intra-op pool for large variables. Where a reader wants the variable in bfloat16
// (_ReadVariableAsBfloat16), each chunk's new values are narrowed into the variable's
// bfloat16 copy right after the chunk's update.
//
// The _<op>WithMatMul form of each dense update (the remapper's
// FuseGradientMatMulIntoApply) takes MatMul(a, b)'s operands in place of the gradient:
// blocks of about 128 KB of the gradient's rows are computed (matmul_rows.h) and
// applied by the thread that computed them, on the calling thread's OpenMP team, so
// the gradient never leaves the cache.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/bf16_convert.h"
#include "framework/kernels/cpu/cpu_kernels.h"
#include "framework/kernels/cpu/dense_apply_loops.h"
#include "framework/kernels/cpu/matmul_rows.h"
#include "framework/kernels/cpu/parallel.h"
#include "framework/kernels/cpu/variable_util.h"

namespace tandem {
namespace {

constexpr int kMaxVars = 4;

// The resolved operands of one update: variable buffers (var first, then slots), the
// gradient (null where a MatMul computes it) and the scalar hyper-parameters in input
// order (the gradient's inputs excluded).
struct ApplyArgs {
  float* v[kMaxVars] = {};
  const float* grad = nullptr;
  float hp[8] = {};
};

class ApplyKernel : public OpKernel {
 public:
  // `names`: every input's name; inputs [0, num_vars) are handles, `grad` the gradient.
  ApplyKernel(std::vector<const char*> names, int num_vars, int grad)
      : names_(std::move(names)), num_vars_(num_vars), grad_(grad) {
    CHECK_LE(num_vars_, kMaxVars);
    CHECK_LE(static_cast<int>(names_.size()) - num_vars_ - 1, 8);
  }

  absl::Status Init(const Node& node) override {
    if (matmul_) {
      transpose_a_ = GetAttrOr<bool>(node.attrs(), "transpose_a", false);
      transpose_b_ = GetAttrOr<bool>(node.attrs(), "transpose_b", false);
    }
    return absl::OkStatus();
  }

  absl::Status Compute(OpKernelContext& ctx) final ABSL_NO_THREAD_SAFETY_ANALYSIS {
    TANDEM_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<Var>> vars,
                            LookupDistinctVars(ctx, num_vars_, names_));
    ApplyArgs args;
    int h = 0;
    for (int i = num_vars_; i < ctx.num_inputs(); ++i) {
      if (matmul_ && (i == grad_ || i == grad_ + 1)) continue;  // checked by GradientProduct
      if (sparse_ && i == grad_ + 1) continue;  // indices, checked by VariableRowIndices
      TANDEM_RETURN_IF_ERROR(CheckOptimizerOperand(ctx, i, grad_, names_));
      const float* value = ctx.input(i).data<float>();
      if (i == grad_) {
        args.grad = value;
      } else {
        args.hp[h++] = value[0];
      }
    }
    TANDEM_RETURN_IF_ERROR(CheckHyperParameters(ctx, args.hp));
    std::optional<nn::MatMulRowBlocks> product;
    if (matmul_) {
      TANDEM_ASSIGN_OR_RETURN(product, GradientProduct(ctx));
    }

    return WithVarsLocked(
        vars, [&] { return UpdateLocked(ctx, vars, args, product ? &*product : nullptr); });
  }

 protected:
  // Runs the update on elements [begin, end); grad points at element begin's gradient.
  virtual void Update(const ApplyArgs& a, const float* grad, int64_t begin, int64_t end) const = 0;
  // Rejects invalid hyper-parameters (in input order, grad excluded).
  virtual absl::Status CheckHyperParameters(const OpKernelContext& ctx, const float* hp) const {
    return absl::OkStatus();
  }
  // Makes this the _<op>WithMatMul kernel: the gradient is MatMul(a, b) with attrs
  // transpose_a and transpose_b, from inputs grad and grad + 1 (float32 or bfloat16,
  // one dtype), computed block by block and applied while each block is in cache.
  void TakeGradientFromMatMul() {
    matmul_ = true;
    names_[grad_] = "a";
    names_.insert(names_.begin() + grad_ + 1, "b");
  }
  // Makes this the ResourceSparseApply<op> kernel: the gradient holds some rows only,
  // [n] + var.shape[1:], and input grad + 1 their int32/int64 indices [n]. The update
  // runs on row indices[i] with gradient row i, for i in order (a repeated index is
  // updated again), and no other row of the variable or its slots is touched.
  void TakeSparseGradient() {
    sparse_ = true;
    names_.insert(names_.begin() + grad_ + 1, "indices");
  }

 private:
  // The blocks of rows of the gradient's product, about 128 KB of float32 each.
  absl::StatusOr<nn::MatMulRowBlocks> GradientProduct(const OpKernelContext& ctx) const {
    const Tensor& a = ctx.input(grad_);
    const Tensor& b = ctx.input(grad_ + 1);
    for (const Tensor* t : {&a, &b}) {
      if (t->dtype() != DType::kFloat && t->dtype() != DType::kBFloat16) {
        return ctx.Error(absl::StrCat("the gradient's operands must be float32 or bfloat16, not ",
                                      DTypeName(t->dtype())));
      }
      if (t->rank() != 2) {
        return ctx.Error(absl::StrCat("the gradient's operands must be matrices: ",
                                      a.shape().DebugString(), " ", b.shape().DebugString()));
      }
    }
    if (a.dtype() != b.dtype() || a.dim(transpose_a_ ? 0 : 1) != b.dim(transpose_b_ ? 1 : 0)) {
      return ctx.Error(absl::StrCat(
          "the gradient's operands do not multiply: ", DTypeName(a.dtype()),
          a.shape().DebugString(), " and ", DTypeName(b.dtype()), b.shape().DebugString(),
          ", transpose_a=", transpose_a_, ", transpose_b=", transpose_b_));
    }
    constexpr int64_t kBlockElements = 32 * 1024;
    const int64_t n = std::max<int64_t>(b.dim(transpose_b_ ? 0 : 1), 1);
    return nn::MatMulRowBlocks::Create(ctx, a, transpose_a_, b, transpose_b_,
                                       std::max<int64_t>(1, kBlockElements / n));
  }

  absl::Status UpdateLocked(OpKernelContext& ctx, const std::vector<std::shared_ptr<Var>>& vars,
                            ApplyArgs& args,
                            const nn::MatMulRowBlocks* product) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    TANDEM_RETURN_IF_ERROR(CheckOptimizerVars(ctx, vars, names_));
    const TensorShape& shape = vars[0]->value().shape();
    std::vector<int64_t> rows;  // Sparse: the gradient's rows' indices in the variable.
    if (sparse_) {
      if (shape.rank() < 1) return ctx.Error("var must have rank >= 1");
      const Tensor& indices = ctx.input(grad_ + 1);
      if ((indices.dtype() != DType::kInt32 && indices.dtype() != DType::kInt64) ||
          indices.rank() != 1) {
        return ctx.Error(absl::StrCat("indices must be an int32 or int64 vector, got ",
                                      DTypeName(indices.dtype()), indices.shape().DebugString()));
      }
      Dims want{indices.NumElements()};
      want.insert(want.end(), shape.dims().begin() + 1, shape.dims().end());
      if (ctx.input(grad_).shape().dims() != want) {
        return ctx.Error(absl::StrCat("grad must have shape [len(indices)] + var.shape[1:] (",
                                      indices.NumElements(), " + ", shape.DebugString(),
                                      "[1:]), got ", ctx.input(grad_).shape().DebugString()));
      }
      TANDEM_ASSIGN_OR_RETURN(rows, VariableRowIndices(ctx, indices, shape));
    }
    const TensorShape grad_shape =
        product != nullptr ? TensorShape({product->m(), product->n()}) : ctx.input(grad_).shape();
    if (!sparse_ && grad_shape != shape) {
      return ctx.Error(absl::StrCat("var and ", product != nullptr ? "MatMul(a, b)" : names_[grad_],
                                    " do not have the same shape: ", shape.DebugString(), " vs ",
                                    grad_shape.DebugString()));
    }
    for (int i = 0; i < num_vars_; ++i) args.v[i] = vars[i]->MutableValue()->data<float>();
    const int64_t n = shape.num_elements();
    // The variable's bfloat16 copy, where a reader wants one (Var::RequestBf16Copy),
    // is narrowed block by block right after each block's update, while the block is in
    // L1 (a thread's whole chunk would have left the cache: on fashion_cnn's 3.2M-weight
    // layer that made the update 1.3-2.5x slower).
    bfloat16* copy =
        vars[0]->Bf16CopyWanted() ? vars[0]->MutableBf16Copy()->data<bfloat16>() : nullptr;
    auto update = [this, &args, copy](const float* grad, int64_t begin, int64_t end) {
      if (copy == nullptr) {
        Update(args, grad, begin, end);
        return;
      }
      constexpr int64_t kBlock = 2048;  // 8 KB of each float32 operand
      for (int64_t b = begin; b < end; b += kBlock) {
        const int64_t e = std::min(end, b + kBlock);
        Update(args, grad + (b - begin), b, e);
        nn::NarrowToBf16(args.v[0] + b, copy + b, e - b);
      }
    };
    absl::Status status;
    if (sparse_) {
      const int64_t row = shape.dim(0) == 0 ? 0 : n / shape.dim(0);
      for (size_t i = 0; i < rows.size(); ++i) {
        update(args.grad + static_cast<int64_t>(i) * row, rows[i] * row, (rows[i] + 1) * row);
      }
    } else if (product == nullptr) {
      // On the step's intra-op pool, not an OpenMP team: a ps task applies several
      // workers' updates at once (parallel.h).
      PoolParallelFor(ctx, n, kParallelGrain,
                      [&](int64_t begin, int64_t end) { update(args.grad + begin, begin, end); });
    } else {
      status = ApplyProduct(*product, update);
    }
    if (copy != nullptr) vars[0]->MarkBf16CopyCurrent();
    return status;
  }

  // Each block of the gradient's rows computed into a thread's buffer and applied, on
  // the calling thread's OpenMP team: the rewrite that makes this op leaves the MatMul's
  // place (a step's oneDNN work) to it.
  template <typename F>
  static absl::Status ApplyProduct(const nn::MatMulRowBlocks& product, const F& update) {
    absl::Mutex mu;
    absl::Status first_error;
    const int64_t block = product.rows() * product.n();
    OmpParallelFor(product.blocks(), 1, [&](int64_t begin, int64_t end) {
      thread_local std::vector<float> grad;  // grow-only, reused step after step
      if (static_cast<int64_t>(grad.size()) < block) grad.resize(block);
      for (int64_t i = begin; i < end; ++i) {
        absl::Status s = product.Run(i, grad.data());
        if (!s.ok()) {
          absl::MutexLock lock(&mu);
          if (first_error.ok()) first_error = s;
          return;
        }
        const int64_t e0 = i * block;
        update(grad.data(), e0, std::min(e0 + block, product.m() * product.n()));
      }
    });
    return first_error;
  }

  std::vector<const char*> names_;
  const int num_vars_;
  const int grad_;
  bool matmul_ = false;
  bool sparse_ = false;
  bool transpose_a_ = false, transpose_b_ = false;
};

// The _<op>WithMatMul form of apply kernel K (TakeGradientFromMatMul).
template <typename K>
class WithMatMul : public K {
 public:
  WithMatMul() { this->TakeGradientFromMatMul(); }
};

// The ResourceSparseApply<op> form of apply kernel K (TakeSparseGradient): the dense
// formula, row by row, so a touched row gets the bits the dense update would give it.
template <typename K>
class SparseForm : public K {
 public:
  SparseForm() { this->TakeSparseGradient(); }
};

class ApplyGradientDescentKernel : public ApplyKernel {
 public:
  ApplyGradientDescentKernel() : ApplyKernel({"var", "alpha", "delta"}, 1, 2) {}

 protected:
  void Update(const ApplyArgs& a, const float* grad, int64_t begin, int64_t end) const override {
    apply::GradientDescent(a.v[0] + begin, grad, a.hp[0], end - begin);
  }
};

class ApplyMomentumKernel : public ApplyKernel {
 public:
  ApplyMomentumKernel() : ApplyKernel({"var", "accum", "lr", "grad", "momentum"}, 2, 3) {}
  absl::Status Init(const Node& node) override {
    nesterov_ = GetAttrOr<bool>(node.attrs(), "use_nesterov", false);
    return ApplyKernel::Init(node);
  }

 protected:
  void Update(const ApplyArgs& a, const float* grad, int64_t begin, int64_t end) const override {
    apply::Momentum(a.v[0] + begin, a.v[1] + begin, grad, a.hp[0], a.hp[1], nesterov_, end - begin);
  }

 private:
  bool nesterov_ = false;
};

class ApplyAdagradKernel : public ApplyKernel {
 public:
  ApplyAdagradKernel() : ApplyKernel({"var", "accum", "lr", "grad"}, 2, 3) {}

 protected:
  void Update(const ApplyArgs& a, const float* grad, int64_t begin, int64_t end) const override {
    apply::Adagrad(a.v[0] + begin, a.v[1] + begin, grad, a.hp[0], end - begin);
  }
};

class ApplyAdamKernel : public ApplyKernel {
 public:
  ApplyAdamKernel()
      : ApplyKernel({"var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2",
                     "epsilon", "grad"},
                    3, 9) {}
  absl::Status Init(const Node& node) override {
    nesterov_ = GetAttrOr<bool>(node.attrs(), "use_nesterov", false);
    return ApplyKernel::Init(node);
  }

 protected:
  void Update(const ApplyArgs& a, const float* grad, int64_t begin, int64_t end) const override {
    const float beta1_power = a.hp[0], beta2_power = a.hp[1], lr = a.hp[2];
    const float alpha = lr * std::sqrt(1.0f - beta2_power) / (1.0f - beta1_power);
    apply::Adam(a.v[0] + begin, a.v[1] + begin, a.v[2] + begin, grad, alpha, a.hp[3], a.hp[4],
                a.hp[5], nesterov_, end - begin);
  }

 private:
  bool nesterov_ = false;
};

class ApplyRMSPropKernel : public ApplyKernel {
 public:
  ApplyRMSPropKernel()
      : ApplyKernel({"var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"}, 3, 7) {}

 protected:
  void Update(const ApplyArgs& a, const float* grad, int64_t begin, int64_t end) const override {
    apply::RMSProp(a.v[0] + begin, a.v[1] + begin, a.v[2] + begin, grad, a.hp[0], a.hp[1], a.hp[2],
                   a.hp[3], end - begin);
  }
};

class ApplyCenteredRMSPropKernel : public ApplyKernel {
 public:
  ApplyCenteredRMSPropKernel()
      : ApplyKernel({"var", "mg", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"}, 4, 8) {}

 protected:
  void Update(const ApplyArgs& a, const float* grad, int64_t begin, int64_t end) const override {
    apply::CenteredRMSProp(a.v[0] + begin, a.v[1] + begin, a.v[2] + begin, a.v[3] + begin, grad,
                           a.hp[0], a.hp[1], a.hp[2], a.hp[3], end - begin);
  }
};

class ApplyFtrlKernel : public ApplyKernel {
 public:
  ApplyFtrlKernel()
      : ApplyKernel({"var", "accum", "linear", "grad", "lr", "l1", "l2", "lr_power"}, 3, 3) {}

 protected:
  absl::Status CheckHyperParameters(const OpKernelContext& ctx, const float* hp) const override {
    if (!(hp[0] > 0)) return ctx.Error(absl::StrCat("lr is not a positive scalar: ", hp[0]));
    if (!(hp[1] >= 0)) {
      return ctx.Error(
          absl::StrCat("l1 regularization strength is not a non-negative scalar: ", hp[1]));
    }
    if (!(hp[2] >= 0)) {
      return ctx.Error(
          absl::StrCat("l2 regularization strength is not a non-negative scalar: ", hp[2]));
    }
    if (!(hp[3] <= 0)) {
      return ctx.Error(absl::StrCat("lr_power is not a non-positive scalar: ", hp[3]));
    }
    return absl::OkStatus();
  }

  void Update(const ApplyArgs& a, const float* grad, int64_t begin, int64_t end) const override {
    float* __restrict var = a.v[0];
    float* __restrict accum = a.v[1];
    float* __restrict linear = a.v[2];
    const float lr = a.hp[0], l1 = a.hp[1], l2 = a.hp[2], lr_power = a.hp[3];
    const float two_l2 = 2.0f * l2;
    if (lr_power == -0.5f) {
      for (int64_t i = begin; i < end; ++i) {
        const float g = grad[i - begin];
        const float new_accum = accum[i] + g * g;
        const float sqrt_new = std::sqrt(new_accum);
        linear[i] += g - (sqrt_new - std::sqrt(accum[i])) / lr * var[i];
        const float quadratic = sqrt_new / lr + two_l2;
        const float l = linear[i];
        const float shrunk = ((l > 0 ? l1 : (l < 0 ? -l1 : 0.0f)) - l) / quadratic;
        var[i] = std::abs(l) > l1 ? shrunk : 0.0f;
        accum[i] = new_accum;
      }
    } else {
      for (int64_t i = begin; i < end; ++i) {
        const float g = grad[i - begin];
        const float new_accum = accum[i] + g * g;
        const float pow_new = std::pow(new_accum, -lr_power);
        linear[i] += g - (pow_new - std::pow(accum[i], -lr_power)) / lr * var[i];
        const float quadratic = pow_new / lr + two_l2;
        const float l = linear[i];
        const float shrunk = ((l > 0 ? l1 : (l < 0 ? -l1 : 0.0f)) - l) / quadratic;
        var[i] = std::abs(l) > l1 ? shrunk : 0.0f;
        accum[i] = new_accum;
      }
    }
  }
};

// Floor and Cos: elementwise over float32.
template <bool kCos>
class FloatUnaryKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::kFloat) {
      return ctx.Error(absl::StrCat("expects float32, not ", DTypeName(x.dtype())));
    }
    Tensor* y = ctx.allocate_output(0, x.shape());
    const int64_t n = x.NumElements();
    const float* __restrict in = x.data<float>();
    float* __restrict out = y->data<float>();
    for (int64_t i = 0; i < n; ++i) out[i] = kCos ? std::cos(in[i]) : std::floor(in[i]);
    return absl::OkStatus();
  }
};

// Dense update `op` with kernel K, and its _<op>WithMatMul form.
template <typename K>
void RegisterDenseApply(KernelRegistry* r, const std::string& op) {
  r->Register<K>(op, kDeviceCpu, DType::kFloat);
  r->Register<WithMatMul<K>>(absl::StrCat("_", op, "WithMatMul"), kDeviceCpu, DType::kFloat);
}

}  // namespace

void RegisterCpuTrainingKernels(KernelRegistry* r) {
  RegisterDenseApply<ApplyGradientDescentKernel>(r, "ResourceApplyGradientDescent");
  RegisterDenseApply<ApplyMomentumKernel>(r, "ResourceApplyMomentum");
  RegisterDenseApply<ApplyAdagradKernel>(r, "ResourceApplyAdagrad");
  RegisterDenseApply<ApplyAdamKernel>(r, "ResourceApplyAdam");
  RegisterDenseApply<ApplyRMSPropKernel>(r, "ResourceApplyRMSProp");
  RegisterDenseApply<ApplyCenteredRMSPropKernel>(r, "ResourceApplyCenteredRMSProp");
  RegisterDenseApply<ApplyFtrlKernel>(r, "ResourceApplyFtrl");
  r->Register<SparseForm<ApplyGradientDescentKernel>>("ResourceSparseApplyGradientDescent",
                                                      kDeviceCpu, DType::kFloat);
  r->Register<SparseForm<ApplyMomentumKernel>>("ResourceSparseApplyMomentum", kDeviceCpu,
                                               DType::kFloat);
  r->Register<SparseForm<ApplyAdagradKernel>>("ResourceSparseApplyAdagrad", kDeviceCpu,
                                              DType::kFloat);
  r->Register<SparseForm<ApplyAdamKernel>>("ResourceSparseApplyAdam", kDeviceCpu, DType::kFloat);
  r->Register<SparseForm<ApplyRMSPropKernel>>("ResourceSparseApplyRMSProp", kDeviceCpu,
                                              DType::kFloat);
  r->Register<SparseForm<ApplyCenteredRMSPropKernel>>("ResourceSparseApplyCenteredRMSProp",
                                                      kDeviceCpu, DType::kFloat);
  r->Register<SparseForm<ApplyFtrlKernel>>("ResourceSparseApplyFtrl", kDeviceCpu, DType::kFloat);
  // Unless the math kernels already provide them.
  if (!r->HasKernel("Floor", kDeviceCpu)) {
    r->Register<FloatUnaryKernel<false>>("Floor", kDeviceCpu, DType::kInvalid);
  }
  if (!r->HasKernel("Cos", kDeviceCpu)) {
    r->Register<FloatUnaryKernel<true>>("Cos", kDeviceCpu, DType::kInvalid);
  }
}

}  // namespace tandem

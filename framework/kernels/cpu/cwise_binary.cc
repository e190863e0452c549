// framework/kernels/cpu/cwise_binary.cc
//
// CPU kernels of the broadcasting binary ops (arithmetic, comparisons, LogicalAnd)
// and of the fused same-shape backward ops (SigmoidGrad, TanhGrad, SqrtGrad,
// RsqrtGrad, ReciprocalGrad). The output reuses an operand's buffer when that
// operand has the output's shape and nobody else holds it.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "framework/kernels/cpu/cwise_common.h"

namespace tandem::cwise {

absl::StatusOr<BroadcastPlan> MakeBroadcastPlan(const TensorShape& x, const TensorShape& y) {
  const int rank = std::max(x.rank(), y.rank());
  BroadcastPlan plan;
  Dims out(rank), xd(rank), yd(rank);
  for (int i = 0; i < rank; ++i) {
    int ix = x.rank() - rank + i, iy = y.rank() - rank + i;
    xd[i] = ix >= 0 ? x.dim(ix) : 1;
    yd[i] = iy >= 0 ? y.dim(iy) : 1;
    if (xd[i] == yd[i] || yd[i] == 1) {
      out[i] = xd[i];
    } else if (xd[i] == 1) {
      out[i] = yd[i];
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("incompatible shapes ", x.DebugString(), " and ", y.DebugString()));
    }
  }
  plan.out_shape = TensorShape(absl::MakeConstSpan(out));
  plan.x_is_out = x == plan.out_shape;
  plan.y_is_out = y == plan.out_shape;
  // Merge runs of dims with the same broadcast pattern; drop size-1 output dims.
  // Pattern: 0 = both full, 1 = x broadcast, 2 = y broadcast.
  std::vector<int> pattern;
  for (int i = 0; i < rank; ++i) {
    if (out[i] == 1) continue;
    int p = xd[i] == 1 ? 1 : (yd[i] == 1 ? 2 : 0);
    if (!pattern.empty() && pattern.back() == p) {
      plan.dims.back() *= out[i];
    } else {
      pattern.push_back(p);
      plan.dims.push_back(out[i]);
    }
  }
  const int nd = static_cast<int>(plan.dims.size());
  plan.x_stride.assign(nd, 0);
  plan.y_stride.assign(nd, 0);
  int64_t xs = 1, ys = 1;
  for (int d = nd - 1; d >= 0; --d) {
    if (pattern[d] != 1) {
      plan.x_stride[d] = xs;
      xs *= plan.dims[d];
    }
    if (pattern[d] != 2) {
      plan.y_stride[d] = ys;
      ys *= plan.dims[d];
    }
  }
  return plan;
}

namespace {

// A broadcasting binary op out = F()(x, y) on inputs of type T, output type R.
template <typename T, typename R, typename F>
class BinaryOp : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& y = ctx.input(1);
    auto plan = MakeBroadcastPlan(x.shape(), y.shape());
    if (!plan.ok()) return ctx.Error(plan.status().message());
    TANDEM_RETURN_IF_ERROR(Check(ctx, y));
    const T* xp = x.data<T>();
    const T* yp = y.data<T>();
    Tensor* out;
    if constexpr (std::is_same_v<T, R>) {
      if (plan->x_is_out) {
        out = ctx.forward_input_or_allocate_output(0, 0, plan->out_shape);
      } else if (plan->y_is_out) {
        out = ctx.forward_input_or_allocate_output(1, 0, plan->out_shape);
      } else {
        out = ctx.allocate_output(0, plan->out_shape);
      }
    } else {
      out = ctx.allocate_output(0, plan->out_shape);
    }
    RunBinary<T, R>(ctx, *plan, xp, yp, out->data<R>(), F());
    return absl::OkStatus();
  }

 private:
  // Integer division rejects zero divisors instead of trapping.
  static absl::Status Check(const OpKernelContext& ctx, const Tensor& y) {
    if constexpr (F::kRejectsZeroDivisor) {
      for (T v : y.flat<T>()) {
        if (v == T(0)) return ctx.Error("integer division by zero");
      }
    }
    return absl::OkStatus();
  }
};

// Same-shape (no broadcasting) binary op, for the fused backward ops (y, dy).
template <typename T, typename F>
class SameShapeBinaryOp : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& y = ctx.input(0);
    const Tensor& dy = ctx.input(1);
    if (y.shape() != dy.shape()) {
      return ctx.Error(absl::StrCat("shapes ", y.shape().DebugString(), " and ",
                                    dy.shape().DebugString(), " must be equal"));
    }
    const T* yp = y.data<T>();
    const T* dp = dy.data<T>();
    Tensor* out = ctx.forward_input_or_allocate_output(1, 0, y.shape());
    T* op = out->data<T>();
    PoolParallelFor(ctx, y.NumElements(), kParallelGrain, [&](int64_t b, int64_t e) {
      const F f;
      for (int64_t i = b; i < e; ++i) op[i] = f(yp[i], dp[i]);
    });
    return absl::OkStatus();
  }
};

struct NoZeroCheck {
  static constexpr bool kRejectsZeroDivisor = false;
};

struct AddF : NoZeroCheck {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a + b);
  }
};
struct SubF : NoZeroCheck {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a - b);
  }
};
struct MulF : NoZeroCheck {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a * b);
  }
};
struct RealDivF : NoZeroCheck {
  float operator()(float a, float b) const { return a / b; }
};
// Truncating integer division; the divisor was checked for zero; MIN / -1 wraps.
struct IntDivF {
  static constexpr bool kRejectsZeroDivisor = true;
  template <typename T>
  T operator()(T a, T b) const {
    using U = std::make_unsigned_t<T>;
    return b == T(-1) ? static_cast<T>(U(0) - static_cast<U>(a)) : static_cast<T>(a / b);
  }
};
struct MaximumF : NoZeroCheck {
  template <typename T>
  T operator()(T a, T b) const {
    return a > b ? a : b;
  }
};
struct MinimumF : NoZeroCheck {
  template <typename T>
  T operator()(T a, T b) const {
    return a < b ? a : b;
  }
};
struct PowF : NoZeroCheck {
  float operator()(float a, float b) const { return std::pow(a, b); }
};
struct SquaredDifferenceF : NoZeroCheck {
  float operator()(float a, float b) const { return (a - b) * (a - b); }
};
struct LessF : NoZeroCheck {
  template <typename T>
  bool operator()(T a, T b) const {
    return a < b;
  }
};
struct LessEqualF : NoZeroCheck {
  template <typename T>
  bool operator()(T a, T b) const {
    return a <= b;
  }
};
struct GreaterF : NoZeroCheck {
  template <typename T>
  bool operator()(T a, T b) const {
    return a > b;
  }
};
struct GreaterEqualF : NoZeroCheck {
  template <typename T>
  bool operator()(T a, T b) const {
    return a >= b;
  }
};
struct EqualF : NoZeroCheck {
  template <typename T>
  bool operator()(T a, T b) const {
    return a == b;
  }
};
struct NotEqualF : NoZeroCheck {
  template <typename T>
  bool operator()(T a, T b) const {
    return a != b;
  }
};
struct LogicalAndF : NoZeroCheck {
  bool operator()(bool a, bool b) const { return a && b; }
};

// Backward ops: f(y, dy) with y the forward output.
struct SigmoidGradF {
  float operator()(float y, float dy) const { return dy * y * (1.0f - y); }
};
struct TanhGradF {
  float operator()(float y, float dy) const { return dy * (1.0f - y * y); }
};
struct SqrtGradF {  // y = sqrt(x): dx = dy / (2 y).
  float operator()(float y, float dy) const { return 0.5f * dy / y; }
};
struct RsqrtGradF {  // y = x^-1/2: dx = -dy y^3 / 2.
  float operator()(float y, float dy) const { return -0.5f * dy * y * y * y; }
};
struct ReciprocalGradF {  // y = 1/x: dx = -dy y^2.
  float operator()(float y, float dy) const { return -dy * y * y; }
};

template <typename F>
void RegisterArith(KernelRegistry* r, const char* op) {
  r->Register<BinaryOp<float, float, F>>(op, kDeviceCpu, DType::kFloat);
  r->Register<BinaryOp<int32_t, int32_t, F>>(op, kDeviceCpu, DType::kInt32);
  r->Register<BinaryOp<int64_t, int64_t, F>>(op, kDeviceCpu, DType::kInt64);
}

template <typename F>
void RegisterCompare(KernelRegistry* r, const char* op, bool with_bool_and_uint8) {
  r->Register<BinaryOp<float, bool, F>>(op, kDeviceCpu, DType::kFloat);
  r->Register<BinaryOp<int32_t, bool, F>>(op, kDeviceCpu, DType::kInt32);
  r->Register<BinaryOp<int64_t, bool, F>>(op, kDeviceCpu, DType::kInt64);
  if (with_bool_and_uint8) {
    r->Register<BinaryOp<uint8_t, bool, F>>(op, kDeviceCpu, DType::kUInt8);
    r->Register<BinaryOp<bool, bool, F>>(op, kDeviceCpu, DType::kBool);
  }
}

}  // namespace

void RegisterCpuCwiseBinaryKernels(KernelRegistry* r) {
  RegisterArith<AddF>(r, "AddV2");
  RegisterArith<SubF>(r, "Sub");
  RegisterArith<MulF>(r, "Mul");
  RegisterArith<MaximumF>(r, "Maximum");
  RegisterArith<MinimumF>(r, "Minimum");
  r->Register<BinaryOp<float, float, RealDivF>>("RealDiv", kDeviceCpu, DType::kFloat);
  r->Register<BinaryOp<int32_t, int32_t, IntDivF>>("Div", kDeviceCpu, DType::kInt32);
  r->Register<BinaryOp<int64_t, int64_t, IntDivF>>("Div", kDeviceCpu, DType::kInt64);
  r->Register<BinaryOp<float, float, PowF>>("Pow", kDeviceCpu, DType::kFloat);
  r->Register<BinaryOp<float, float, SquaredDifferenceF>>("SquaredDifference", kDeviceCpu,
                                                          DType::kFloat);
  RegisterCompare<LessF>(r, "Less", false);
  RegisterCompare<LessEqualF>(r, "LessEqual", false);
  RegisterCompare<GreaterF>(r, "Greater", false);
  RegisterCompare<GreaterEqualF>(r, "GreaterEqual", false);
  RegisterCompare<EqualF>(r, "Equal", true);
  RegisterCompare<NotEqualF>(r, "NotEqual", true);
  r->Register<BinaryOp<bool, bool, LogicalAndF>>("LogicalAnd", kDeviceCpu, DType::kBool);

  r->Register<SameShapeBinaryOp<float, SigmoidGradF>>("SigmoidGrad", kDeviceCpu, DType::kFloat);
  r->Register<SameShapeBinaryOp<float, TanhGradF>>("TanhGrad", kDeviceCpu, DType::kFloat);
  r->Register<SameShapeBinaryOp<float, SqrtGradF>>("SqrtGrad", kDeviceCpu, DType::kFloat);
  r->Register<SameShapeBinaryOp<float, RsqrtGradF>>("RsqrtGrad", kDeviceCpu, DType::kFloat);
  r->Register<SameShapeBinaryOp<float, ReciprocalGradF>>("ReciprocalGrad", kDeviceCpu,
                                                         DType::kFloat);
}

}  // namespace tandem::cwise

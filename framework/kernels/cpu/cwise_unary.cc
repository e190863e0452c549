// framework/kernels/cpu/cwise_unary.cc
//
// CPU kernels of the unary elementwise ops (Neg ... Tanh, LogicalNot), Cast, Select
// and AddN. Unary ops and AddN write into an input's buffer when this step holds the
// only reference to it. Exp, Sigmoid and Tanh use the vectorised fast_math loops.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "framework/kernels/cpu/bf16_convert.h"
#include "framework/kernels/cpu/cwise_common.h"
#include "framework/kernels/cpu/fast_math.h"
#include "framework/kernels/cpu/nn_kernel_util.h"

namespace tandem::cwise {
namespace {

template <typename T, typename F>
class UnaryOp : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    const T* x = ctx.input(0).data<T>();
    const int64_t n = ctx.input(0).NumElements();
    Tensor* out = ctx.forward_input_or_allocate_output(0, 0, ctx.input(0).shape());
    RunUnary<T, T>(ctx, x, out->data<T>(), n, F());
    return absl::OkStatus();
  }
};

// A unary float op implemented by an array function fn(x, out, n).
template <void (*Fn)(const float*, float*, int64_t)>
class UnaryArrayOp : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    const float* x = ctx.input(0).data<float>();
    const int64_t n = ctx.input(0).NumElements();
    Tensor* out = ctx.forward_input_or_allocate_output(0, 0, ctx.input(0).shape());
    float* o = out->data<float>();
    PoolParallelFor(ctx, n, kParallelGrain, [&](int64_t b, int64_t e) { Fn(x + b, o + b, e - b); });
    return absl::OkStatus();
  }
};

struct NegF {
  template <typename T>
  T operator()(T a) const {
    return static_cast<T>(-a);
  }
};
struct AbsF {
  template <typename T>
  T operator()(T a) const {
    return a < T(0) ? static_cast<T>(-a) : a;
  }
};
struct SignF {
  template <typename T>
  T operator()(T a) const {
    return static_cast<T>((T(0) < a) - (a < T(0)));
  }
};
struct SquareF {
  template <typename T>
  T operator()(T a) const {
    return static_cast<T>(a * a);
  }
};
struct SqrtF {
  float operator()(float a) const { return std::sqrt(a); }
};
struct RsqrtF {
  float operator()(float a) const { return 1.0f / std::sqrt(a); }
};
struct LogF {
  float operator()(float a) const { return std::log(a); }
};
struct ReciprocalF {
  float operator()(float a) const { return 1.0f / a; }
};
struct LogicalNotF {
  bool operator()(bool a) const { return !a; }
};

// ---- Cast ----

template <typename D, typename S>
inline D Convert(S s) {
  if constexpr (std::is_same_v<S, D>) {
    return s;
  } else if constexpr (std::is_same_v<S, bfloat16>) {
    return Convert<D, float>(static_cast<float>(s));
  } else if constexpr (std::is_same_v<D, bfloat16>) {
    return bfloat16(static_cast<float>(s));
  } else if constexpr (std::is_same_v<D, bool>) {
    return s != S(0);
  } else {
    return static_cast<D>(s);
  }
}

template <typename S, typename D>
void CastLoop(const OpKernelContext& ctx, const Tensor& in, Tensor* out) {
  const S* s = in.data<S>();
  D* d = out->data<D>();
  if constexpr (std::is_same_v<S, float> && std::is_same_v<D, bfloat16>) {
    // The mixed-precision casts: vectorised, on the OpenMP threads the bf16 kernels
    // around them use (a handoff to the intra-op pool costs more than the cast).
    OmpParallelFor(in.NumElements(), kParallelGrain,
                   [&](int64_t b, int64_t e) { nn::NarrowToBf16(s + b, d + b, e - b); });
  } else if constexpr (std::is_same_v<S, bfloat16> && std::is_same_v<D, float>) {
    OmpParallelFor(in.NumElements(), kParallelGrain,
                   [&](int64_t b, int64_t e) { nn::WidenBf16(s + b, d + b, e - b); });
  } else {
    PoolParallelFor(ctx, in.NumElements(), kParallelGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) d[i] = Convert<D, S>(s[i]);
    });
  }
}

template <typename S>
absl::Status CastFrom(OpKernelContext& ctx, const Tensor& in, Tensor* out) {
  switch (out->dtype()) {
    case DType::kFloat:
      CastLoop<S, float>(ctx, in, out);
      break;
    case DType::kBFloat16:
      CastLoop<S, bfloat16>(ctx, in, out);
      break;
    case DType::kInt32:
      CastLoop<S, int32_t>(ctx, in, out);
      break;
    case DType::kInt64:
      CastLoop<S, int64_t>(ctx, in, out);
      break;
    case DType::kUInt8:
      CastLoop<S, uint8_t>(ctx, in, out);
      break;
    case DType::kBool:
      CastLoop<S, bool>(ctx, in, out);
      break;
    default:
      return ctx.Error(absl::StrCat("cannot cast to ", DTypeName(out->dtype())));
  }
  return absl::OkStatus();
}

class CastOp : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    if (in.dtype() == ctx.output_dtype(0)) {
      ctx.set_output(0, in);
      return absl::OkStatus();
    }
    Tensor* out = ctx.allocate_output(0, in.shape());
    switch (in.dtype()) {
      case DType::kFloat:
        return CastFrom<float>(ctx, in, out);
      case DType::kBFloat16:
        return CastFrom<bfloat16>(ctx, in, out);
      case DType::kInt32:
        return CastFrom<int32_t>(ctx, in, out);
      case DType::kInt64:
        return CastFrom<int64_t>(ctx, in, out);
      case DType::kUInt8:
        return CastFrom<uint8_t>(ctx, in, out);
      case DType::kBool:
        return CastFrom<bool>(ctx, in, out);
      default:
        return ctx.Error(absl::StrCat("cannot cast from ", DTypeName(in.dtype())));
    }
  }
};

// ---- Select ----

template <typename T>
void SelectLoop(const OpKernelContext& ctx, const Tensor& cond, const Tensor& t, const Tensor& e,
                Tensor* out) {
  const bool* c = cond.data<bool>();
  const T* tp = t.data<T>();
  const T* ep = e.data<T>();
  T* o = out->data<T>();
  const int64_t n = t.NumElements();
  if (cond.NumElements() == n && cond.rank() == t.rank()) {
    PoolParallelFor(ctx, n, kParallelGrain, [&](int64_t b, int64_t end) {
      for (int64_t i = b; i < end; ++i) o[i] = c[i] ? tp[i] : ep[i];
    });
    return;
  }
  // cond is a scalar or a vector over dim 0: whole rows come from t or e.
  const int64_t rows = cond.rank() == 0 ? 1 : cond.dim(0);
  const int64_t inner = rows == 0 ? 0 : n / rows;
  for (int64_t r = 0; r < rows; ++r) {
    const T* src = (cond.rank() == 0 ? c[0] : c[r]) ? tp : ep;
    std::memcpy(o + r * inner, src + r * inner, inner * sizeof(T));
  }
}

class SelectOp : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& cond = ctx.input(0);
    const Tensor& t = ctx.input(1);
    const Tensor& e = ctx.input(2);
    if (t.shape() != e.shape()) {
      return ctx.Error(absl::StrCat("t and e must have the same shape, got ",
                                    t.shape().DebugString(), " and ", e.shape().DebugString()));
    }
    const bool ok = cond.shape() == t.shape() || cond.rank() == 0 ||
                    (cond.rank() == 1 && t.rank() > 1 && cond.dim(0) == t.dim(0));
    if (!ok) {
      return ctx.Error(absl::StrCat("cond of shape ", cond.shape().DebugString(),
                                    " must be a scalar, have the shape of t ",
                                    t.shape().DebugString(), " or be a vector over its dim 0"));
    }
    Tensor* out = ctx.allocate_output(0, t.shape());
    switch (t.dtype()) {
      case DType::kFloat:
        SelectLoop<float>(ctx, cond, t, e, out);
        break;
      case DType::kInt32:
        SelectLoop<int32_t>(ctx, cond, t, e, out);
        break;
      case DType::kInt64:
        SelectLoop<int64_t>(ctx, cond, t, e, out);
        break;
      case DType::kBool:
        SelectLoop<bool>(ctx, cond, t, e, out);
        break;
      default:
        return ctx.Error(absl::StrCat("unsupported dtype ", DTypeName(t.dtype())));
    }
    return absl::OkStatus();
  }
};

// ---- AddN ----

template <typename T>
class AddNOp : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    const int n = ctx.num_inputs();
    const TensorShape shape = ctx.input(0).shape();
    for (int i = 1; i < n; ++i) {
      if (ctx.input(i).shape() != shape) {
        return ctx.Error(absl::StrCat("all inputs must have the same shape; input 0 has ",
                                      shape.DebugString(), ", input ", i, " has ",
                                      ctx.input(i).shape().DebugString()));
      }
    }
    if (n == 1) {
      ctx.set_output(0, ctx.input(0));
      return absl::OkStatus();
    }
    std::vector<const T*> in(n);
    for (int i = 0; i < n; ++i) in[i] = ctx.input(i).data<T>();
    Tensor* out = ctx.forward_input_or_allocate_output(0, 0, shape);
    T* o = out->data<T>();
    PoolParallelFor(ctx, shape.num_elements(), kParallelGrain, [&](int64_t b, int64_t e) {
      const T* a = in[0];
      const T* c = in[1];
      for (int64_t j = b; j < e; ++j) o[j] = a[j] + c[j];
      for (int i = 2; i < n; ++i) {
        const T* p = in[i];
        for (int64_t j = b; j < e; ++j) o[j] += p[j];
      }
    });
    return absl::OkStatus();
  }
};

template <typename F>
void RegisterSignedUnary(KernelRegistry* r, const char* op) {
  r->Register<UnaryOp<float, F>>(op, kDeviceCpu, DType::kFloat);
  r->Register<UnaryOp<int32_t, F>>(op, kDeviceCpu, DType::kInt32);
  r->Register<UnaryOp<int64_t, F>>(op, kDeviceCpu, DType::kInt64);
}

}  // namespace

void RegisterCpuCwiseUnaryKernels(KernelRegistry* r) {
  RegisterSignedUnary<NegF>(r, "Neg");
  RegisterSignedUnary<AbsF>(r, "Abs");
  RegisterSignedUnary<SignF>(r, "Sign");
  RegisterSignedUnary<SquareF>(r, "Square");
  r->Register<UnaryOp<float, SqrtF>>("Sqrt", kDeviceCpu, DType::kFloat);
  r->Register<UnaryOp<float, RsqrtF>>("Rsqrt", kDeviceCpu, DType::kFloat);
  r->Register<UnaryOp<float, LogF>>("Log", kDeviceCpu, DType::kFloat);
  r->Register<UnaryOp<float, ReciprocalF>>("Reciprocal", kDeviceCpu, DType::kFloat);
  r->Register<UnaryArrayOp<fast_math::Exp>>("Exp", kDeviceCpu, DType::kFloat);
  r->Register<UnaryArrayOp<fast_math::Sigmoid>>("Sigmoid", kDeviceCpu, DType::kFloat);
  r->Register<UnaryArrayOp<fast_math::Tanh>>("Tanh", kDeviceCpu, DType::kFloat);
  r->Register<UnaryOp<bool, LogicalNotF>>("LogicalNot", kDeviceCpu, DType::kBool);
  // Cast and Select dispatch on their own (input 0 is any dtype / the bool cond).
  r->Register<CastOp>("Cast", kDeviceCpu);
  r->Register<SelectOp>("Select", kDeviceCpu);
  r->Register<AddNOp<float>>("AddN", kDeviceCpu, DType::kFloat);
  r->Register<AddNOp<int32_t>>("AddN", kDeviceCpu, DType::kInt32);
  r->Register<AddNOp<int64_t>>("AddN", kDeviceCpu, DType::kInt64);
}

}  // namespace tandem::cwise

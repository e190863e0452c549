// framework/kernels/cpu/reduction_kernels.cc
//
// CPU kernels of Sum, Mean, Prod, Max, Min and ArgMax. The input's dimensions are
// merged into alternating runs of kept and reduced dimensions (size-1 dims dropped;
// reduction_shape.h, as on the GPU), so that the common cases are simple loops:
//   all reduced            one contiguous reduction, split over threads;
//   [kept, reduced]        a contiguous reduction per row (e.g. over the last axis);
//   [reduced, kept]        rows accumulated elementwise into the output (e.g. a bias
//                          gradient, or Mean over the batch), split over columns;
// and anything else walks rows with a mixed-radix counter.
// Contiguous reductions keep 16 independent accumulators (vectorisable without
// reassociation) and combine per block of 4096 elements, which also bounds float
// rounding error. An empty reduction gives the reducer's identity (Mean: NaN / 0).
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/kernels/cpu/array_util.h"
#include "framework/kernels/cpu/cwise_common.h"
#include "framework/kernels/reduction_shape.h"

namespace tandem::cwise {
namespace {

struct SumR {
  template <typename T>
  static T Identity() {
    return T(0);
  }
  template <typename T>
  static T Op(T a, T b) {
    return a + b;
  }
};
struct ProdR {
  template <typename T>
  static T Identity() {
    return T(1);
  }
  template <typename T>
  static T Op(T a, T b) {
    return a * b;
  }
};
struct MaxR {
  template <typename T>
  static T Identity() {
    return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::lowest();
  }
  template <typename T>
  static T Op(T a, T b) {
    return a > b ? a : b;
  }
};
struct MinR {
  template <typename T>
  static T Identity() {
    return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::max();
  }
  template <typename T>
  static T Op(T a, T b) {
    return a < b ? a : b;
  }
};

// Reduces x[0, n) with R.
template <typename R, typename T>
T ReduceContiguous(const T* x, int64_t n) {
  constexpr int kLanes = 16;
  constexpr int64_t kBlock = 4096;
  T total = R::template Identity<T>();
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t end = std::min(n, start + kBlock);
    T acc[kLanes];
    for (int j = 0; j < kLanes; ++j) acc[j] = R::template Identity<T>();
    int64_t i = start;
    for (; i + kLanes <= end; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) acc[j] = R::Op(acc[j], x[i + j]);
    }
    for (; i < end; ++i) acc[0] = R::Op(acc[0], x[i]);
    for (int w = kLanes / 2; w > 0; w /= 2) {
      for (int j = 0; j < w; ++j) acc[j] = R::Op(acc[j], acc[j + w]);
    }
    total = R::Op(total, acc[0]);
  }
  return total;
}

// out[j] = R(out[j], x[j]) for j < n.
template <typename R, typename T>
inline void Accumulate(const T* x, T* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = R::Op(out[j], x[j]);
}

template <typename T, typename R, bool kMean>
class ReductionOp : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    keep_dims_ = GetAttrOr<bool>(node.attrs(), "keep_dims", false);
    return absl::OkStatus();
  }

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    TANDEM_ASSIGN_OR_RETURN(std::vector<bool> reduced, array_kernels::ReducedAxes(ctx, in.rank()));
    const ReductionShape r = ReductionShape::Make(in.shape(), reduced, keep_dims_);
    Tensor* out = ctx.allocate_output(0, r.out);
    T* o = out->data<T>();
    const T* x = in.data<T>();
    const int64_t n_out = r.out.num_elements();
    if (in.NumElements() == 0) {
      for (int64_t i = 0; i < n_out; ++i) o[i] = R::template Identity<T>();
    } else {
      Reduce(ctx, x, o, n_out, r.dims, r.dim_reduced);
    }
    if constexpr (kMean) {
      if (r.count == 0) {
        const T nan =
            std::numeric_limits<T>::has_quiet_NaN ? std::numeric_limits<T>::quiet_NaN() : T(0);
        for (int64_t i = 0; i < n_out; ++i) o[i] = nan;
      } else if (r.count > 1) {
        const T c = static_cast<T>(r.count);
        for (int64_t i = 0; i < n_out; ++i) o[i] = o[i] / c;
      }
    }
    return absl::OkStatus();
  }

 private:
  static void Reduce(const OpKernelContext& ctx, const T* x, T* o, int64_t n_out, const Dims& dims,
                     const std::vector<bool>& red) {
    const int nd = static_cast<int>(dims.size());
    int64_t total = 1;
    for (int64_t d : dims) total *= d;
    if (nd == 0 || (nd == 1 && !red[0])) {  // Nothing reduced (or one element).
      std::memcpy(o, x, total * sizeof(T));
      return;
    }
    if (nd == 1) {  // Everything reduced.
      const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(64, total / kParallelGrain));
      std::vector<T> partial(chunks, R::template Identity<T>());
      const int64_t per = (total + chunks - 1) / chunks;
      PoolParallelFor(ctx, chunks, 1, [&](int64_t b, int64_t e) {
        for (int64_t c = b; c < e; ++c) {
          const int64_t s = c * per, t = std::min(total, s + per);
          if (s < t) partial[c] = ReduceContiguous<R>(x + s, t - s);
        }
      });
      T acc = R::template Identity<T>();
      for (T p : partial) acc = R::Op(acc, p);
      o[0] = acc;
      return;
    }
    if (nd == 2 && !red[0]) {  // [kept, reduced]: one contiguous reduction per row.
      const int64_t rows = dims[0], inner = dims[1];
      PoolParallelFor(ctx, rows, std::max<int64_t>(1, kParallelGrain / inner),
                      [&](int64_t b, int64_t e) {
                        for (int64_t r = b; r < e; ++r)
                          o[r] = ReduceContiguous<R>(x + r * inner, inner);
                      });
      return;
    }
    if (nd == 2) {  // [reduced, kept]: accumulate rows, split over columns.
      const int64_t rows = dims[0], cols = dims[1];
      const int64_t min_cols = std::max<int64_t>(256, kParallelGrain / rows);
      PoolParallelFor(ctx, cols, min_cols, [&](int64_t b, int64_t e) {
        std::memcpy(o + b, x + b, (e - b) * sizeof(T));
        for (int64_t r = 1; r < rows; ++r) Accumulate<R>(x + r * cols + b, o + b, e - b);
      });
      return;
    }
    // General: walk rows of the last merged dim; the output offset advances only
    // along kept dims.
    for (int64_t i = 0; i < n_out; ++i) o[i] = R::template Identity<T>();
    Dims out_stride(nd, 0);
    int64_t s = 1;
    for (int d = nd - 1; d >= 0; --d) {
      if (!red[d]) {
        out_stride[d] = s;
        s *= dims[d];
      }
    }
    const int64_t inner = dims[nd - 1];
    const int64_t rows = total / inner;
    int64_t idx[TensorShape::kMaxRank] = {};
    int64_t oo = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = x + r * inner;
      if (red[nd - 1]) {
        o[oo] = R::Op(o[oo], ReduceContiguous<R>(row, inner));
      } else {
        Accumulate<R>(row, o + oo, inner);
      }
      for (int d = nd - 2; d >= 0; --d) {
        oo += out_stride[d];
        if (++idx[d] < dims[d]) break;
        oo -= out_stride[d] * dims[d];
        idx[d] = 0;
      }
    }
  }

  bool keep_dims_ = false;
};

template <typename T, typename Idx>
void ArgMaxLoop(const T* x, Idx* o, int64_t outer, int64_t n, int64_t inner) {
  for (int64_t a = 0; a < outer; ++a) {
    const T* base = x + a * n * inner;
    Idx* ob = o + a * inner;
    if (inner == 1) {
      T best = base[0];
      Idx bi = 0;
      for (int64_t k = 1; k < n; ++k) {
        if (base[k] > best) {
          best = base[k];
          bi = static_cast<Idx>(k);
        }
      }
      ob[0] = bi;
      continue;
    }
    std::vector<T> best(base, base + inner);
    for (int64_t j = 0; j < inner; ++j) ob[j] = 0;
    for (int64_t k = 1; k < n; ++k) {
      const T* row = base + k * inner;
      for (int64_t j = 0; j < inner; ++j) {
        if (row[j] > best[j]) {
          best[j] = row[j];
          ob[j] = static_cast<Idx>(k);
        }
      }
    }
  }
}

template <typename T>
class ArgMaxOp : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    const Tensor& axis_t = ctx.input(1);
    if (axis_t.NumElements() != 1 ||
        (axis_t.dtype() != DType::kInt32 && axis_t.dtype() != DType::kInt64)) {
      return ctx.Error(absl::StrCat("axis must be an int32 or int64 scalar, got ",
                                    DTypeName(axis_t.dtype()), axis_t.shape().DebugString()));
    }
    const int rank = in.rank();
    int64_t axis = static_cast<int64_t>(axis_t.ValueAsDouble(0));
    if (rank == 0 || axis < -rank || axis >= rank) {
      return ctx.Error(absl::StrCat("axis ", axis, " is out of range for input of shape ",
                                    in.shape().DebugString()));
    }
    if (axis < 0) axis += rank;
    const int64_t n = in.dim(static_cast<int>(axis));
    if (n == 0) {
      return ctx.Error(
          absl::StrCat("reduction axis ", axis, " is empty in shape ", in.shape().DebugString()));
    }
    TensorShape out_shape;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < rank; ++i) {
      if (i == axis) continue;
      out_shape.AddDim(in.dim(i));
      (i < axis ? outer : inner) *= in.dim(i);
    }
    Tensor* out = ctx.allocate_output(0, out_shape);
    if (out->dtype() == DType::kInt32) {
      ArgMaxLoop(in.data<T>(), out->data<int32_t>(), outer, n, inner);
    } else {
      ArgMaxLoop(in.data<T>(), out->data<int64_t>(), outer, n, inner);
    }
    return absl::OkStatus();
  }
};

template <typename R, bool kMean = false>
void RegisterReduction(KernelRegistry* r, const char* op) {
  r->Register<ReductionOp<float, R, kMean>>(op, kDeviceCpu, DType::kFloat);
  r->Register<ReductionOp<int32_t, R, kMean>>(op, kDeviceCpu, DType::kInt32);
  r->Register<ReductionOp<int64_t, R, kMean>>(op, kDeviceCpu, DType::kInt64);
}

}  // namespace

void RegisterCpuReductionKernels(KernelRegistry* r) {
  RegisterReduction<SumR>(r, "Sum");
  RegisterReduction<SumR, true>(r, "Mean");
  RegisterReduction<ProdR>(r, "Prod");
  RegisterReduction<MaxR>(r, "Max");
  RegisterReduction<MinR>(r, "Min");
  r->Register<ArgMaxOp<float>>("ArgMax", kDeviceCpu, DType::kFloat);
  r->Register<ArgMaxOp<int32_t>>("ArgMax", kDeviceCpu, DType::kInt32);
  r->Register<ArgMaxOp<int64_t>>("ArgMax", kDeviceCpu, DType::kInt64);
}

}  // namespace tandem::cwise

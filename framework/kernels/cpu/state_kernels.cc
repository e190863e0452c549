// CPU kernels of the resource-variable ops: VarHandleOp, ReadVariableOp,
// _ReadVariableAsBfloat16, Assign*, VarIsInitializedOp, ResourceGather and
// ResourceScatterAdd/Sub.
#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/bf16_convert.h"
#include "framework/kernels/cpu/cpu_kernels.h"
#include "framework/kernels/cpu/parallel.h"
#include "framework/kernels/cpu/variable_util.h"

namespace tandem {

absl::StatusOr<ResourceHandle> HandleFromInput(const OpKernelContext& ctx, int i) {
  const Tensor& t = ctx.input(i);
  if (t.dtype() != DType::kResource) {
    return ctx.Error(absl::StrCat("input ", i, " is not a resource handle"));
  }
  return t.resource_handle();
}

absl::Status UninitializedError(const ResourceHandle& h) {
  return absl::FailedPreconditionError(
      absl::StrCat("Attempting to use uninitialized value ", h.name));
}

absl::StatusOr<std::vector<int64_t>> VariableRowIndices(const OpKernelContext& ctx,
                                                        const Tensor& indices,
                                                        const TensorShape& var_shape) {
  const int64_t rows = var_shape.dim(0);
  const int64_t n = indices.NumElements();
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    idx[i] =
        indices.dtype() == DType::kInt32 ? indices.data<int32_t>()[i] : indices.data<int64_t>()[i];
    if (idx[i] < 0 || idx[i] >= rows) {
      return ctx.Error(absl::StrCat("indices[", i, "] = ", idx[i], " is not in [0, ", rows,
                                    ") (variable ", ctx.input(0).resource_handle().name,
                                    " of shape ", var_shape.DebugString(), ")"));
    }
  }
  return idx;
}

absl::StatusOr<std::shared_ptr<Var>> LookupVar(const OpKernelContext& ctx, int i) {
  TANDEM_ASSIGN_OR_RETURN(ResourceHandle h, HandleFromInput(ctx, i));
  auto var = ctx.resources()->Lookup<Var>(h.container, h.name);
  if (absl::IsNotFound(var.status())) return UninitializedError(h);
  return var;
}

absl::StatusOr<std::vector<std::shared_ptr<Var>>> LookupDistinctVars(
    const OpKernelContext& ctx, int n, const std::vector<const char*>& names) {
  if (ctx.num_inputs() != static_cast<int>(names.size())) {
    return ctx.Error(absl::StrCat("expects ", names.size(), " inputs, got ", ctx.num_inputs()));
  }
  std::vector<std::shared_ptr<Var>> vars(n);
  for (int i = 0; i < n; ++i) {
    TANDEM_ASSIGN_OR_RETURN(vars[i], LookupVar(ctx, i));
    for (int j = 0; j < i; ++j) {
      if (vars[j] == vars[i]) {
        return ctx.Error(absl::StrCat(names[j], " and ", names[i], " refer to the same variable ",
                                      ctx.input(i).resource_handle().name));
      }
    }
  }
  return vars;
}

absl::Status CheckOptimizerVars(const OpKernelContext& ctx,
                                const std::vector<std::shared_ptr<Var>>& vars,
                                const std::vector<const char*>& names) {
  for (size_t i = 0; i < vars.size(); ++i) {
    if (!vars[i]->is_initialized()) return UninitializedError(ctx.input(i).resource_handle());
    const Tensor& value = vars[i]->value();
    if (value.dtype() != DType::kFloat) {
      return ctx.Error(absl::StrCat(names[i], " ", ctx.input(i).resource_handle().name, " holds ",
                                    DTypeName(value.dtype()), "; only float32 is supported"));
    }
    if (i > 0 && value.shape() != vars[0]->value().shape()) {
      return ctx.Error(absl::StrCat("var and ", names[i], " do not have the same shape: ",
                                    vars[0]->value().shape().DebugString(), " vs ",
                                    value.shape().DebugString()));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckOptimizerOperand(const OpKernelContext& ctx, int i, int grad,
                                   const std::vector<const char*>& names) {
  const Tensor& t = ctx.input(i);
  if (t.dtype() != DType::kFloat) {
    return ctx.Error(absl::StrCat(names[i], " must be float32, not ", DTypeName(t.dtype())));
  }
  if (i != grad && t.NumElements() != 1) {
    return ctx.Error(absl::StrCat(names[i], " is not a scalar: ", t.shape().DebugString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Var>> LookupOrCreateVar(const OpKernelContext& ctx, int i,
                                                       DType dtype) {
  TANDEM_ASSIGN_OR_RETURN(ResourceHandle h, HandleFromInput(ctx, i));
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Var> var,
                          ctx.resources()->LookupOrCreate<Var>(h.container, h.name, [dtype] {
                            return std::make_shared<Var>(dtype);
                          }));
  if (var->dtype() != dtype) {
    return ctx.Error(absl::StrCat("variable ", h.name, " holds ", DTypeName(var->dtype()), ", not ",
                                  DTypeName(dtype)));
  }
  return var;
}

namespace {

class VarHandleKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    std::string shared = GetAttrOr<std::string>(node.attrs(), "shared_name", "");
    handle_.container = GetAttrOr<std::string>(node.attrs(), "container", "");
    handle_.name = shared.empty() ? node.name() : shared;
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    ResourceHandle h = handle_;
    h.device = *ctx.step().device_name;
    ctx.set_output(0, Tensor::Resource(std::move(h)));
    return absl::OkStatus();
  }

 private:
  ResourceHandle handle_;
};

class ReadVariableKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupVar(ctx, 0));
    absl::ReaderMutexLock lock(var->mu());
    if (!var->is_initialized()) return UninitializedError(ctx.input(0).resource_handle());
    if (var->value().dtype() != ctx.output_dtype(0)) {
      return ctx.Error(absl::StrCat("variable holds ", DTypeName(var->value().dtype()),
                                    ", read as ", DTypeName(ctx.output_dtype(0))));
    }
    ctx.set_output(0, var->value());
    return absl::OkStatus();
  }
};

// _ReadVariableAsBfloat16: the float32 variable's value narrowed to bfloat16, as
// Cast(ReadVariableOp) gives it. Asks the variable to keep a bfloat16 copy (the
// optimizers then write it beside each update) and returns it, converting first only
// where it is stale (the first read, or after a write other than an optimizer's).
class ReadVariableAsBf16Kernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupVar(ctx, 0));
    absl::MutexLock lock(var->mu());
    if (!var->is_initialized()) return UninitializedError(ctx.input(0).resource_handle());
    const Tensor& value = var->value();
    if (value.dtype() != DType::kFloat) {
      return ctx.Error(absl::StrCat("variable holds ", DTypeName(value.dtype()),
                                    ", read as float32 narrowed to bfloat16"));
    }
    var->RequestBf16Copy();
    if (const Tensor* copy = var->CurrentBf16Copy()) {
      ctx.set_output(0, *copy);
      return absl::OkStatus();
    }
    Tensor* copy = var->MutableBf16Copy();
    const float* src = value.data<float>();
    bfloat16* dst = copy->data<bfloat16>();
    OmpParallelFor(value.NumElements(), kParallelGrain,
                   [&](int64_t b, int64_t e) { nn::NarrowToBf16(src + b, dst + b, e - b); });
    var->MarkBf16CopyCurrent();
    ctx.set_output(0, *copy);
    return absl::OkStatus();
  }
};

class AssignKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& value = ctx.input(1);
    TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupOrCreateVar(ctx, 0, value.dtype()));
    absl::MutexLock lock(var->mu());
    var->Assign(value);
    ctx.set_output(0, value);
    return absl::OkStatus();
  }
};

template <bool kAdd>
class AssignUpdateKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupVar(ctx, 0));
    const Tensor& delta = ctx.input(1);
    absl::MutexLock lock(var->mu());
    if (!var->is_initialized()) return UninitializedError(ctx.input(0).resource_handle());
    if (var->value().shape() != delta.shape() || var->value().dtype() != delta.dtype()) {
      return ctx.Error(absl::StrCat(
          "cannot update a ", DTypeName(var->value().dtype()), var->value().shape().DebugString(),
          " variable with a ", DTypeName(delta.dtype()), delta.shape().DebugString(), " value"));
    }
    Tensor* v = var->MutableValue();
    absl::Status status = absl::OkStatus();
#define TANDEM_UPDATE_(T)                                                      \
  {                                                                            \
    T* p = v->data<T>();                                                       \
    const T* d = delta.data<T>();                                              \
    for (int64_t i = 0, n = v->NumElements(); i < n; ++i) {                    \
      p[i] = kAdd ? static_cast<T>(p[i] + d[i]) : static_cast<T>(p[i] - d[i]); \
    }                                                                          \
  }
    TANDEM_SWITCH_NUMERIC(v->dtype(), TANDEM_UPDATE_,
                          status = ctx.Error("unsupported dtype for AssignAdd/AssignSub"));
#undef TANDEM_UPDATE_
    TANDEM_RETURN_IF_ERROR(status);
    ctx.set_output(0, *v);
    return absl::OkStatus();
  }
};

class VarIsInitializedKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_ASSIGN_OR_RETURN(ResourceHandle h, HandleFromInput(ctx, 0));
    bool initialized = false;
    auto var = ctx.resources()->Lookup<Var>(h.container, h.name);
    if (var.ok()) {
      absl::ReaderMutexLock lock((*var)->mu());
      initialized = (*var)->is_initialized();
    }
    ctx.set_output(0, Tensor::Scalar<bool>(initialized));
    return absl::OkStatus();
  }
};

class ResourceGatherKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupVar(ctx, 0));
    Tensor params;
    {
      absl::ReaderMutexLock lock(var->mu());
      if (!var->is_initialized()) return UninitializedError(ctx.input(0).resource_handle());
      params = var->value();
    }
    const Tensor& indices = ctx.input(1);
    if (params.rank() < 1) return ctx.Error("cannot gather from a scalar variable");
    const int64_t rows = params.dim(0);
    const int64_t row_bytes = rows == 0 ? 0 : static_cast<int64_t>(params.TotalBytes()) / rows;
    Dims dims(indices.shape().dims().begin(), indices.shape().dims().end());
    dims.insert(dims.end(), params.shape().dims().begin() + 1, params.shape().dims().end());
    TANDEM_ASSIGN_OR_RETURN(TensorShape out_shape, TensorShape::Create(dims));
    Tensor* out = ctx.allocate_output(0, out_shape);
    const int64_t n = indices.NumElements();
    for (int64_t i = 0; i < n; ++i) {
      int64_t idx = indices.dtype() == DType::kInt32 ? indices.data<int32_t>()[i]
                                                     : indices.data<int64_t>()[i];
      if (idx < 0 || idx >= rows) {
        return ctx.Error(absl::StrCat("indices[", i, "] = ", idx, " is not in [0, ", rows, ")"));
      }
      std::memcpy(out->raw_data() + i * row_bytes, params.raw_data() + idx * row_bytes,
                  static_cast<size_t>(row_bytes));
    }
    return absl::OkStatus();
  }
};

// var[indices[i], ...] += (or -=) updates[i, ...], sequentially over i, so duplicate
// indices accumulate. Every index is checked before the variable is touched.
template <bool kAdd>
class ResourceScatterKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupVar(ctx, 0));
    const Tensor& indices = ctx.input(1);
    const Tensor& updates = ctx.input(2);
    if (indices.dtype() != DType::kInt32 && indices.dtype() != DType::kInt64) {
      return ctx.Error(
          absl::StrCat("indices must be int32 or int64, not ", DTypeName(indices.dtype())));
    }
    absl::MutexLock lock(var->mu());
    if (!var->is_initialized()) return UninitializedError(ctx.input(0).resource_handle());
    const Tensor& value = var->value();
    if (value.dtype() != updates.dtype()) {
      return ctx.Error(absl::StrCat("scatters ", DTypeName(updates.dtype()), " updates into a ",
                                    DTypeName(value.dtype()), " variable"));
    }
    if (value.rank() < 1) return ctx.Error("cannot scatter into a scalar variable");
    Dims want(indices.shape().dims().begin(), indices.shape().dims().end());
    want.insert(want.end(), value.shape().dims().begin() + 1, value.shape().dims().end());
    if (updates.shape().dims() != want) {
      return ctx.Error(absl::StrCat(
          "updates must have shape indices.shape + var.shape[1:] (", indices.shape().DebugString(),
          " + ", value.shape().DebugString(), "[1:]), got ", updates.shape().DebugString()));
    }
    const int64_t rows = value.dim(0);
    const int64_t n = indices.NumElements();
    TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> idx,
                            VariableRowIndices(ctx, indices, value.shape()));
    if (n == 0) return absl::OkStatus();
    const int64_t row = value.NumElements() / rows;
    Tensor* v = var->MutableValue();
    absl::Status status = absl::OkStatus();
#define TANDEM_SCATTER_(T)                                                                 \
  {                                                                                        \
    T* p = v->data<T>();                                                                   \
    const T* u = updates.data<T>();                                                        \
    for (int64_t i = 0; i < n; ++i) {                                                      \
      T* dst = p + idx[i] * row;                                                           \
      const T* src = u + i * row;                                                          \
      for (int64_t k = 0; k < row; ++k) {                                                  \
        dst[k] = kAdd ? static_cast<T>(dst[k] + src[k]) : static_cast<T>(dst[k] - src[k]); \
      }                                                                                    \
    }                                                                                      \
  }
    TANDEM_SWITCH_NUMERIC(
        v->dtype(), TANDEM_SCATTER_,
        status = ctx.Error(absl::StrCat("unsupported dtype ", DTypeName(v->dtype()))));
#undef TANDEM_SCATTER_
    return status;
  }
};

}  // namespace

void RegisterStateKernelsOn(KernelRegistry* r, const DeviceType& device, DType dtype) {
  r->Register<VarHandleKernel>("VarHandleOp", device, dtype, "dtype");
  r->Register<ReadVariableKernel>("ReadVariableOp", device, dtype, "dtype");
  r->Register<AssignKernel>("AssignVariableOp", device, dtype, "dtype");
  // VarIsInitializedOp reads no value, and its node names no dtype (it dispatches on
  // its bool output): one registration for every dtype.
  if (!r->HasKernel("VarIsInitializedOp", device)) {
    r->Register<VarIsInitializedKernel>("VarIsInitializedOp", device, DType::kInvalid, "dtype");
  }
}

void RegisterCpuStateKernels(KernelRegistry* r) {
  r->Register<VarHandleKernel>("VarHandleOp", kDeviceCpu, DType::kInvalid, "dtype");
  r->Register<ReadVariableKernel>("ReadVariableOp", kDeviceCpu, DType::kInvalid, "dtype");
  r->Register<ReadVariableAsBf16Kernel>("_ReadVariableAsBfloat16", kDeviceCpu, DType::kInvalid,
                                        "dtype");
  r->Register<AssignKernel>("AssignVariableOp", kDeviceCpu, DType::kInvalid, "dtype");
  r->Register<AssignUpdateKernel<true>>("AssignAddVariableOp", kDeviceCpu, DType::kInvalid,
                                        "dtype");
  r->Register<AssignUpdateKernel<false>>("AssignSubVariableOp", kDeviceCpu, DType::kInvalid,
                                         "dtype");
  r->Register<VarIsInitializedKernel>("VarIsInitializedOp", kDeviceCpu, DType::kInvalid, "dtype");
  r->Register<ResourceGatherKernel>("ResourceGather", kDeviceCpu, DType::kInvalid, "dtype");
  r->Register<ResourceScatterKernel<true>>("ResourceScatterAdd", kDeviceCpu, DType::kInvalid,
                                           "dtype");
  r->Register<ResourceScatterKernel<false>>("ResourceScatterSub", kDeviceCpu, DType::kInvalid,
                                            "dtype");
}

}  // namespace tandem

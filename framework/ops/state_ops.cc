// Resource-variable ops and the Variable helper (see state_ops.h).
#include "framework/ops/state_ops.h"

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/gradients.h"
#include "framework/ops/internal/build.h"
#include "framework/ops/standard_ops.h"

namespace tandem::ops {
namespace {

// Output: a resource handle carrying the variable's dtype and shape.
absl::Status InferVarHandle(InferenceContext& ctx) {
  TANDEM_ASSIGN_OR_RETURN(DType dtype, ctx.GetAttr<DType>("dtype"));
  TANDEM_ASSIGN_OR_RETURN(PartialShape shape, ctx.GetAttr<PartialShape>("shape"));
  if (DTypeSize(dtype) == 0 || dtype == DType::kString) {
    return ctx.Error(absl::StrCat("variables cannot hold ", DTypeName(dtype)));
  }
  ctx.AddOutput(DType::kResource, PartialShape({}), HandleData{dtype, shape});
  return absl::OkStatus();
}

absl::Status ExpectHandle(const InferenceContext& ctx) {
  if (ctx.input_dtype(0) != DType::kResource) {
    return ctx.Error("input 0 must be a variable handle (resource)");
  }
  return absl::OkStatus();
}

// Reads: the handle's dtype (must equal attr "dtype") and shape.
absl::Status InferRead(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectHandle(ctx));
  TANDEM_ASSIGN_OR_RETURN(DType dtype, ctx.GetAttr<DType>("dtype"));
  const HandleData& h = ctx.input_handle(0);
  if (h.dtype != DType::kInvalid && h.dtype != dtype) {
    return ctx.Error(
        absl::StrCat("reads ", DTypeName(dtype), " from a ", DTypeName(h.dtype), " variable"));
  }
  ctx.AddOutput(dtype, h.shape);
  return absl::OkStatus();
}

// Assignments: value dtype must match the variable; value shape compatible with it.
absl::Status InferAssign(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectHandle(ctx));
  const HandleData& h = ctx.input_handle(0);
  if (h.dtype != DType::kInvalid && h.dtype != ctx.input_dtype(1)) {
    return ctx.Error(absl::StrCat("assigns a ", DTypeName(ctx.input_dtype(1)), " value to a ",
                                  DTypeName(h.dtype), " variable"));
  }
  if (!h.shape.IsCompatibleWith(ctx.input_shape(1))) {
    return ctx.Error(absl::StrCat("assigns a value of shape ", ctx.input_shape(1).DebugString(),
                                  " to a variable of shape ", h.shape.DebugString()));
  }
  TANDEM_ASSIGN_OR_RETURN(PartialShape merged, h.shape.Merge(ctx.input_shape(1)));
  ctx.AddOutput(ctx.input_dtype(1), merged);
  return absl::OkStatus();
}

absl::Status InferGather(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectHandle(ctx));
  TANDEM_ASSIGN_OR_RETURN(DType dtype, ctx.GetAttr<DType>("dtype"));
  const HandleData& h = ctx.input_handle(0);
  if (h.dtype != DType::kInvalid && h.dtype != dtype) {
    return ctx.Error(
        absl::StrCat("gathers ", DTypeName(dtype), " from a ", DTypeName(h.dtype), " variable"));
  }
  if (ctx.input_dtype(1) != DType::kInt32 && ctx.input_dtype(1) != DType::kInt64) {
    return ctx.Error("indices must be int32 or int64");
  }
  const PartialShape& var = h.shape;
  const PartialShape& idx = ctx.input_shape(1);
  if (var.known_rank() && var.rank() < 1) return ctx.Error("cannot gather from a scalar variable");
  PartialShape out;  // indices.shape + var.shape[1:]
  if (var.known_rank() && idx.known_rank()) {
    Dims d(idx.dims().begin(), idx.dims().end());
    d.insert(d.end(), var.dims().begin() + 1, var.dims().end());
    out = PartialShape(absl::MakeConstSpan(d));
  }
  ctx.AddOutput(dtype, out);
  return absl::OkStatus();
}

// ResourceScatterAdd/Sub(handle, indices, updates): updates of the variable's dtype
// shaped indices.shape + var.shape[1:]; no outputs.
absl::Status InferScatter(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectHandle(ctx));
  const HandleData& h = ctx.input_handle(0);
  const DType dtype = ctx.input_dtype(2);
  if (dtype != DType::kFloat && dtype != DType::kInt32 && dtype != DType::kInt64) {
    return ctx.Error(
        absl::StrCat("updates must be float32, int32 or int64, not ", DTypeName(dtype)));
  }
  if (h.dtype != DType::kInvalid && h.dtype != dtype) {
    return ctx.Error(absl::StrCat("scatters ", DTypeName(dtype), " updates into a ",
                                  DTypeName(h.dtype), " variable"));
  }
  if (ctx.input_dtype(1) != DType::kInt32 && ctx.input_dtype(1) != DType::kInt64) {
    return ctx.Error("indices must be int32 or int64");
  }
  const PartialShape& var = h.shape;
  const PartialShape& idx = ctx.input_shape(1);
  if (var.known_rank() && var.rank() < 1) return ctx.Error("cannot scatter into a scalar variable");
  if (var.known_rank() && idx.known_rank()) {
    Dims d(idx.dims().begin(), idx.dims().end());
    d.insert(d.end(), var.dims().begin() + 1, var.dims().end());
    PartialShape want(absl::MakeConstSpan(d));
    if (!want.IsCompatibleWith(ctx.input_shape(2))) {
      return ctx.Error(absl::StrCat(
          "updates must have shape indices.shape + var.shape[1:] = ", want.DebugString(), ", got ",
          ctx.input_shape(2).DebugString()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterStateOps(OpRegistry* r) {
  r->Register({.name = "VarHandleOp",
               .default_attrs = {{"container", std::string()},
                                 {"shared_name", std::string()},
                                 {"shape", PartialShape()}},
               .stateful = true,
               .cheap = true,
               .infer = InferVarHandle});
  r->Register({.name = "ReadVariableOp",
               .min_inputs = 1,
               .max_inputs = 1,
               .stateful = true,
               .cheap = true,
               .infer = InferRead});
  // _ReadVariableAsBfloat16(handle): the float32 variable's value in bfloat16, as
  // Cast(ReadVariableOp(handle)) gives it; the remapper's ReadVariablesAsBfloat16 puts it
  // in place of that pair. It returns the copy the optimizers keep beside the value
  // (Var::RequestBf16Copy), converting only when the copy is stale.
  r->Register({.name = "_ReadVariableAsBfloat16",
               .min_inputs = 1,
               .max_inputs = 1,
               .stateful = true,
               .cheap = true,
               .infer = [](InferenceContext& ctx) -> absl::Status {
                 TANDEM_RETURN_IF_ERROR(ExpectHandle(ctx));
                 TANDEM_ASSIGN_OR_RETURN(DType dtype, ctx.GetAttr<DType>("dtype"));
                 const HandleData& h = ctx.input_handle(0);
                 if (dtype != DType::kFloat ||
                     (h.dtype != DType::kInvalid && h.dtype != DType::kFloat)) {
                   return ctx.Error("reads only float32 variables");
                 }
                 ctx.AddOutput(DType::kBFloat16, h.shape);
                 return absl::OkStatus();
               }});
  for (const char* op : {"AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp"}) {
    r->Register({.name = op,
                 .min_inputs = 2,
                 .max_inputs = 2,
                 .stateful = true,
                 .cheap = std::string(op) == "AssignVariableOp",
                 .infer = InferAssign});
  }
  r->Register({.name = "VarIsInitializedOp",
               .min_inputs = 1,
               .max_inputs = 1,
               .stateful = true,
               .cheap = true,
               .infer = [](InferenceContext& ctx) -> absl::Status {
                 TANDEM_RETURN_IF_ERROR(ExpectHandle(ctx));
                 ctx.AddOutput(DType::kBool, PartialShape({}));
                 return absl::OkStatus();
               }});
  r->Register({.name = "ResourceGather",
               .min_inputs = 2,
               .max_inputs = 2,
               .stateful = true,
               .infer = InferGather});
  for (const char* op : {"ResourceScatterAdd", "ResourceScatterSub"}) {
    r->Register(
        {.name = op, .min_inputs = 3, .max_inputs = 3, .stateful = true, .infer = InferScatter});
  }
}

void RegisterStateGradients(GradientRegistry* r) {
  // The gradient of a read is the gradient of the variable (its handle).
  r->Register("ReadVariableOp", [](const Scope&, const Node&, const std::vector<Output>& dy,
                                   std::vector<Output>* dx) {
    dx->push_back(dy[0]);
    return absl::OkStatus();
  });
  // Rows gathered from a variable: a dense gradient of the variable's shape.
  r->Register("ResourceGather", [](const Scope& scope, const Node& node,
                                   const std::vector<Output>& dy, std::vector<Output>* dx) {
    const PartialShape& var_shape = node.input(0).node->output(node.input(0).index).handle.shape;
    if (!var_shape.known_rank() || var_shape.rank() < 1 || var_shape.dim(0) < 0) {
      return absl::UnimplementedError(
          "gradient of ResourceGather needs a variable with a known first dimension");
    }
    Output rows = ConstInt32(scope, static_cast<int32_t>(var_shape.dim(0)));
    dx->push_back(UnsortedSegmentSum(scope, dy[0], node.input(1), rows));
    dx->push_back(Output());
    return absl::OkStatus();
  });
  for (const char* op :
       {"VarHandleOp", "VarIsInitializedOp", "AssignVariableOp", "AssignAddVariableOp",
        "AssignSubVariableOp", "ResourceScatterAdd", "ResourceScatterSub"}) {
    r->RegisterNoGradient(op);
  }
}

bool IsTableHandle(const Node& handle) {
  if (handle.op() != "VarHandleOp") return false;
  return GetAttrOr<bool>(handle.attrs(), kTableAttr, false);
}

Output VarHandleOp(const Scope& scope, DType dtype, const PartialShape& shape,
                   const std::string& shared_name) {
  return internal::Build(scope, "VarHandleOp", {},
                         {{"dtype", dtype}, {"shape", shape}, {"shared_name", shared_name}});
}
Output ReadVariableOp(const Scope& scope, Output handle, DType dtype) {
  return internal::Build(scope, "ReadVariableOp", {handle}, {{"dtype", dtype}});
}
Output AssignVariableOp(const Scope& scope, Output handle, Output value) {
  return internal::Build(scope, "AssignVariableOp", {handle, value});
}
Output AssignAddVariableOp(const Scope& scope, Output handle, Output value) {
  return internal::Build(scope, "AssignAddVariableOp", {handle, value});
}
Output AssignSubVariableOp(const Scope& scope, Output handle, Output value) {
  return internal::Build(scope, "AssignSubVariableOp", {handle, value});
}
Output VarIsInitializedOp(const Scope& scope, Output handle) {
  return internal::Build(scope, "VarIsInitializedOp", {handle});
}
Output ResourceGather(const Scope& scope, Output handle, Output indices, DType dtype) {
  return internal::Build(scope, "ResourceGather", {handle, indices}, {{"dtype", dtype}});
}

Node* ResourceScatterAdd(const Scope& scope, Output handle, Output indices, Output updates) {
  AttrMap attrs;
  if (updates.valid()) attrs.emplace("dtype", updates.dtype());
  return internal::BuildNode(scope, "ResourceScatterAdd", {handle, indices, updates},
                             std::move(attrs));
}
Node* ResourceScatterSub(const Scope& scope, Output handle, Output indices, Output updates) {
  AttrMap attrs;
  if (updates.valid()) attrs.emplace("dtype", updates.dtype());
  return internal::BuildNode(scope, "ResourceScatterSub", {handle, indices, updates},
                             std::move(attrs));
}

Variable::Variable(const Scope& scope, absl::string_view name, Output initial_value,
                   const VariableOptions& options) {
  if (!scope.ok()) return;
  if (!initial_value.valid()) {
    scope.UpdateStatus(
        absl::InvalidArgumentError(absl::StrCat("variable '", name, "': invalid initial value")));
    return;
  }
  Build(
      scope, name, initial_value.dtype(), initial_value.shape(),
      [&](const Scope&) { return initial_value; }, options);
}

Variable::Variable(const Scope& scope, absl::string_view name, DType dtype,
                   const PartialShape& shape, const std::function<Output(const Scope&)>& init,
                   const VariableOptions& options) {
  if (!scope.ok()) return;
  Build(scope, name, dtype, shape, init, options);
}

void Variable::Build(const Scope& scope, absl::string_view name, DType dtype,
                     const PartialShape& shape,
                     const std::function<Output(const Scope& colocated)>& init,
                     const VariableOptions& options) {
  // Outside the caller's control dependencies (TensorFlow's init_scope): the variable
  // must be creatable and initialisable before anything the caller waits for runs.
  const Scope outer = scope.WithNoControlDependencies();
  AttrMap attrs{{"dtype", dtype}, {"shape", shape}, {"shared_name", std::string()}};
  if (options.table) attrs.emplace(kTableAttr, true);
  Output handle = internal::Build(outer.WithOpName(name), "VarHandleOp", {}, std::move(attrs));
  if (!handle.valid()) return;
  const std::string& full = handle.node->name();
  // Children are named under the handle: "<handle>/Assign", "<handle>/Read/...".
  std::string rel = scope.name_scope().empty() ? full : full.substr(scope.name_scope().size() + 1);
  Scope vs = outer.ColocateWith(handle.node);
  Output initial_value = init(vs.NewSubScope(rel + "/Initializer"));
  if (!scope.ok()) return;
  if (!initial_value.valid() || initial_value.dtype() != dtype) {
    scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
        "variable '", name, "': the initializer gave no ", DTypeName(dtype), " value")));
    return;
  }
  Node* assign = internal::BuildNode(vs.WithOpName(rel + "/Assign"), "AssignVariableOp",
                                     {handle, initial_value});
  Output value = ReadVariableOp(vs.WithOpName(rel + "/Read/ReadVariableOp"), handle, dtype);
  if (assign == nullptr || !value.valid()) return;
  handle_ = handle;
  value_ = value;
  initializer_ = assign;
  Graph* g = scope.graph();
  g->AddToCollection(options.local ? kLocalVariables : kGlobalVariables, full);
  if (options.trainable && !options.local) g->AddToCollection(kTrainableVariables, full);
  for (const auto& c : options.collections) g->AddToCollection(c, full);
}

absl::StatusOr<Variable> Variable::FromGraph(Graph* graph, const std::string& handle_name) {
  Node* h = graph->FindNode(handle_name);
  Node* read = graph->FindNode(handle_name + "/Read/ReadVariableOp");
  Node* init = graph->FindNode(handle_name + "/Assign");
  if (h == nullptr || h->op() != "VarHandleOp" || read == nullptr || init == nullptr) {
    return absl::NotFoundError(absl::StrCat("no variable named '", handle_name, "' in the graph"));
  }
  Variable v;
  v.handle_ = Output(h, 0);
  v.value_ = Output(read, 0);
  v.initializer_ = init;
  return v;
}

const std::string& Variable::name() const { return handle_.node->name(); }
DType Variable::dtype() const { return handle_.node->output(0).handle.dtype; }
const PartialShape& Variable::shape() const { return handle_.node->output(0).handle.shape; }

Output Assign(const Scope& scope, const Variable& var, Output value) {
  return AssignVariableOp(scope.ColocateWith(var.handle().node), var.handle(), value);
}
Output AssignAdd(const Scope& scope, const Variable& var, Output value) {
  return AssignAddVariableOp(scope.ColocateWith(var.handle().node), var.handle(), value);
}
Output AssignSub(const Scope& scope, const Variable& var, Output value) {
  return AssignSubVariableOp(scope.ColocateWith(var.handle().node), var.handle(), value);
}

absl::StatusOr<std::vector<Variable>> VariablesInCollection(Graph* graph, const std::string& key) {
  std::vector<Variable> vars;
  for (const std::string& name : graph->GetCollection(key)) {
    TANDEM_ASSIGN_OR_RETURN(Variable v, Variable::FromGraph(graph, name));
    vars.push_back(v);
  }
  return vars;
}

namespace {
Node* InitializerFor(const Scope& scope, const char* key, absl::string_view name) {
  auto vars = VariablesInCollection(scope.graph(), key);
  if (!vars.ok()) {
    scope.UpdateStatus(vars.status());
    return nullptr;
  }
  std::vector<Node*> inits;
  for (const Variable& v : *vars) inits.push_back(v.initializer());
  return NoOp(scope.WithOpName(name).WithControlDependencies(inits));
}
}  // namespace

Node* GlobalVariablesInitializer(const Scope& scope) {
  return InitializerFor(scope, kGlobalVariables, "init");
}
Node* LocalVariablesInitializer(const Scope& scope) {
  return InitializerFor(scope, kLocalVariables, "init_local");
}

}  // namespace tandem::ops

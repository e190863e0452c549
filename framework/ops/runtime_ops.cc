// Ops the runtime inserts into executable graphs: _Arg (a fed value, attrs "T",
// "index", "shape") and _Retval (a fetched value, attrs "T", "index"), and the pair
// the partitioner puts on every edge between devices: _Send (input 0 of dtype "T")
// and _Recv (one output of dtype "tensor_type", shape "shape" when known). Both name
// the edge by "tensor_name", "send_device", "send_device_incarnation" (int64 bits of
// the uint64 incarnation) and "recv_device"; "client_terminated" is kept for
// TensorFlow parity. None of them has a gradient.
#include "framework/ops/gradients.h"
#include "framework/ops/standard_ops.h"

namespace tandem::ops {

void RegisterRuntimeOps(OpRegistry* r) {
  r->Register({.name = "_Arg",
               .min_inputs = 0,
               .max_inputs = 0,
               .default_attrs = {{"shape", PartialShape()}},
               .stateful = true,
               .cheap = true,
               .infer = [](InferenceContext& ctx) -> absl::Status {
                 TANDEM_ASSIGN_OR_RETURN(DType t, ctx.GetAttr<DType>("T"));
                 TANDEM_ASSIGN_OR_RETURN(PartialShape s, ctx.GetAttr<PartialShape>("shape"));
                 ctx.AddOutput(t, s);
                 return absl::OkStatus();
               },
               .strings = true});
  r->Register({.name = "_Retval",
               .min_inputs = 1,
               .max_inputs = 1,
               .stateful = true,
               .cheap = true,
               .infer = shape_fn::NoOutputs,
               .strings = true});
  const AttrMap edge_attrs = {{"tensor_name", std::string()},
                              {"send_device", std::string()},
                              {"send_device_incarnation", int64_t{0}},
                              {"recv_device", std::string()},
                              {"client_terminated", false}};
  r->Register({.name = "_Send",
               .min_inputs = 1,
               .max_inputs = 1,
               .default_attrs = edge_attrs,
               .stateful = true,
               .cheap = true,
               .infer = [](InferenceContext& ctx) -> absl::Status {
                 TANDEM_ASSIGN_OR_RETURN(DType t, ctx.GetAttr<DType>("T"));
                 TANDEM_RETURN_IF_ERROR(ctx.ExpectDType(0, t));
                 return absl::OkStatus();
               },
               .strings = true});
  AttrMap recv_attrs = edge_attrs;
  recv_attrs["shape"] = PartialShape();
  r->Register({.name = "_Recv",
               .min_inputs = 0,
               .max_inputs = 0,
               .default_attrs = recv_attrs,
               .stateful = true,
               .cheap = true,
               .infer = [](InferenceContext& ctx) -> absl::Status {
                 TANDEM_ASSIGN_OR_RETURN(DType t, ctx.GetAttr<DType>("tensor_type"));
                 TANDEM_ASSIGN_OR_RETURN(PartialShape s, ctx.GetAttr<PartialShape>("shape"));
                 if (t == DType::kInvalid) return ctx.Error("tensor_type must be a valid dtype");
                 ctx.AddOutput(t, s);
                 return absl::OkStatus();
               },
               .strings = true});
}

void RegisterRuntimeGradients(GradientRegistry* r) {
  r->RegisterNoGradient("_Send");
  r->RegisterNoGradient("_Recv");
}

}  // namespace tandem::ops

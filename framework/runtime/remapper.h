// framework/runtime/remapper.h
//
// Fuses Conv2D or MatMul -> BiasAdd [-> Relu] chains into _FusedConv2D / _FusedMatMul
// nodes (one oneDNN primitive with a bias and a ReLU post-op), as TensorFlow's grappler
// remapper does: a rewrite of the GraphDef a session is created with, applied once,
// never per step, after gradients exist (the fused ops have none).
//
// Nothing the caller knows changes meaning. The chain's nodes stay in the graph under
// their names; the fused node ("<last>/fused") takes over every consumer of the
// chain's last node, data and control. The session prunes each run to what its
// fetches need, so the unfused chain runs only when one of its own tensors is
// fetched. A chain fuses only where that costs nothing: the Conv2D or MatMul feeds
// nothing but the BiasAdd (and the BiasAdd nothing but the Relu, when the Relu is
// taken in), apart from float32 views (Casts, left by the mixed-precision rewrite) that
// nothing reads; all nodes share one device and dtype, none writes a Tout.
//
// Thread safety: pure functions.
#ifndef TANDEM_FRAMEWORK_RUNTIME_REMAPPER_H_
#define TANDEM_FRAMEWORK_RUNTIME_REMAPPER_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "framework/graph/op_registry.h"
#include "framework/protos/graph.pb.h"

namespace tandem {

struct RemapReport {
  std::map<std::string, int> fused;  // "Conv2D+BiasAdd+Relu" -> chains fused
};

absl::StatusOr<proto::GraphDef> FuseBiasAndRelu(const proto::GraphDef& def,
                                                const OpRegistry* registry,
                                                RemapReport* report = nullptr);

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_RUNTIME_REMAPPER_H_

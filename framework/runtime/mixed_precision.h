// framework/runtime/mixed_precision.h
//
// The "mixed_bfloat16" precision policy as a graph rewrite, applied once to the
// GraphDef a session is created with (as TensorFlow's auto-mixed-precision grappler
// pass is), never per step. Variables, optimizer state and updates are untouched and
// stay float32: the master weights.
//
// The op lists:
//   allow  MatMul, Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter: always bfloat16
//          (oneDNN bf16 primitives, float32 accumulation inside).
//   infer  BiasAdd, BiasAddGrad, Relu, ReluGrad, MaxPool, MaxPoolGrad, Reshape, Identity:
//          bfloat16 when one of their float inputs already is (they follow their
//          inputs; the arithmetic is float32 per element, BiasAddGrad sums in float32).
//   deny   everything else: softmax, cross-entropy, reductions, batch normalisation,
//          dropout, metrics, optimizer updates, casts. They read float32.
// Shape, Size and Rank read a bfloat16 tensor as it is (their outputs do not depend
// on the dtype).
//
// How names stay stable: a converted node X becomes "X/bfloat16" and a Cast named X
// turns its output back to float32, so every tensor name the caller knows (fetches,
// hooks, savers, control edges) keeps its dtype. Float32 consumers read X (the Cast);
// bfloat16 consumers read X/bfloat16 directly. A float32 tensor that bfloat16 ops
// consume is cast once per consuming device ("<tensor>/to_bfloat16"): a weight read
// by a forward and a backward MatMul is converted once per step. Nodes with more than
// one output are not converted. Feeding a converted node's output by name replaces
// only its float32 view. A converted MatMul or Conv2DBackpropFilter that only float32
// ops consume (a weight gradient on its way to the optimizer) keeps its name and
// writes float32 directly (attr Tout): oneDNN's float32 accumulators are stored
// without a round trip through bfloat16.
//
// Thread safety: pure functions.
#ifndef TANDEM_FRAMEWORK_RUNTIME_MIXED_PRECISION_H_
#define TANDEM_FRAMEWORK_RUNTIME_MIXED_PRECISION_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "framework/graph/op_registry.h"
#include "framework/protos/graph.pb.h"

namespace tandem {

enum class Precision { kFloat32, kMixedBfloat16 };

// "float32" or "mixed_bfloat16"; INVALID_ARGUMENT naming the accepted values otherwise.
absl::StatusOr<Precision> ParsePrecision(absl::string_view name);
absl::string_view PrecisionName(Precision precision);

// The precision a session computing on this process's CPU runs for `requested`.
// mixed_bfloat16 where oneDNN has no native bfloat16 dot product (HasNativeBf16: ISA
// below avx512_core_bf16) would train about 3x slower than float32, so it becomes
// float32, said once per process in a WARNING naming the ISA. The environment variable
// TANDEM_ALLOW_EMULATED_BF16=1 keeps mixed_bfloat16 there (the same arithmetic as on
// a bf16 CPU, at the emulation's speed). float32 is returned as is.
Precision PrecisionForCpu(Precision requested);

struct MixedPrecisionReport {
  std::map<std::string, int> converted;  // op -> nodes now running on bfloat16
  int casts_to_bfloat16 = 0;             // float32 tensors converted for bf16 consumers
  int float32_outputs = 0;               // of `converted`, nodes writing float32 (Tout)
};

// Rewrites `def` under the mixed_bfloat16 policy. Errors come from parsing `def`
// (which the session would report anyway).
absl::StatusOr<proto::GraphDef> RewriteForMixedBfloat16(const proto::GraphDef& def,
                                                        const OpRegistry* registry,
                                                        MixedPrecisionReport* report = nullptr);

// The graph a session runs for `precision`: `def` itself for float32, else the
// rewrite above. Logs, once per process, the policy's effect and the ISA oneDNN
// dispatches to (e.g. avx512_core_amx, avx512_core_bf16, or a float32 fallback).
absl::StatusOr<proto::GraphDef> ApplyPrecision(const proto::GraphDef& def, Precision precision);

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_RUNTIME_MIXED_PRECISION_H_

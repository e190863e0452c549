// framework/runtime/mixed_precision.cc
#include "framework/runtime/mixed_precision.h"

#include <atomic>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/status.h"
#include "framework/graph/graph.h"
#include "framework/kernels/cpu/onednn_util.h"
#include "glog/logging.h"

namespace tandem {
namespace {

bool IsAllowed(const std::string& op) {
  static const auto* ops = new absl::flat_hash_set<std::string>{
      "MatMul", "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter"};
  return ops->contains(op);
}

bool FollowsInputs(const std::string& op) {
  static const auto* ops =
      new absl::flat_hash_set<std::string>{"BiasAdd", "BiasAddGrad", "Relu",    "ReluGrad",
                                           "MaxPool", "MaxPoolGrad", "Reshape", "Identity"};
  return ops->contains(op);
}

// Ops whose output does not depend on the input's dtype.
bool ReadsAnyDType(const std::string& op) { return op == "Shape" || op == "Size" || op == "Rank"; }

// Whether `node` qualifies at all: one float32 output, no bfloat16 input already.
bool Convertible(const Node& node) {
  if (node.num_outputs() != 1 || node.output_dtype(0) != DType::kFloat) return false;
  for (const Output& in : node.inputs()) {
    if (in.dtype() == DType::kBFloat16) return false;
  }
  return true;
}

// The nodes that run on bfloat16, in one pass over the graph in topological order
// (Graph adds nodes only after their inputs).
absl::flat_hash_set<const Node*> ChooseLowNodes(const Graph& g) {
  absl::flat_hash_set<const Node*> low;
  for (const auto& node : g.nodes()) {
    if (!Convertible(*node)) continue;
    if (IsAllowed(node->op())) {
      low.insert(node.get());
      continue;
    }
    if (!FollowsInputs(node->op())) continue;
    for (const Output& in : node->inputs()) {
      if (low.contains(in.node)) {
        low.insert(node.get());
        break;
      }
    }
  }
  return low;
}

// The bfloat16 MatMuls and Conv2DBackpropFilters that only float32 ops consume (the
// weight gradients the optimizer reads): they write float32 directly (attr Tout), so
// their float32 accumulators are never rounded to bfloat16 and cast back.
absl::flat_hash_set<const Node*> ChooseFloat32Outputs(const absl::flat_hash_set<const Node*>& low) {
  absl::flat_hash_set<const Node*> wide;
  for (const Node* node : low) {
    if (node->op() != "MatMul" && node->op() != "Conv2DBackpropFilter") continue;
    bool float_consumers = true;
    for (const auto& [consumer, slot] : node->out_edges()) {
      if (low.contains(consumer) || ReadsAnyDType(consumer->op())) float_consumers = false;
    }
    if (float_consumers) wide.insert(node);
  }
  return wide;
}

proto::AttrValue TypeAttr(DType dtype) {
  proto::AttrValue v;
  v.set_type(static_cast<proto::DataType>(dtype));
  return v;
}

proto::NodeDef CastDef(std::string name, std::string input, DType from, DType to,
                       std::string device) {
  proto::NodeDef cast;
  cast.set_name(std::move(name));
  cast.set_op("Cast");
  cast.add_input(std::move(input));
  cast.set_device(std::move(device));
  (*cast.mutable_attr())["SrcT"] = TypeAttr(from);
  (*cast.mutable_attr())["DstT"] = TypeAttr(to);
  return cast;
}

// Emits the rewritten GraphDef.
class Rewriter {
 public:
  Rewriter(const proto::GraphDef& def, const Graph& g, absl::flat_hash_set<const Node*> low)
      : def_(def), g_(g), low_(std::move(low)), wide_(ChooseFloat32Outputs(low_)) {
    for (const auto& n : def.node()) taken_.insert(n.name());
  }

  proto::GraphDef Run(MixedPrecisionReport* report) {
    proto::GraphDef out;
    out.set_version(def_.version());
    for (const auto& n : def_.node()) low_names_[n.name()] = LowName(n.name());
    for (const proto::NodeDef& original : def_.node()) {
      const Node* node = g_.FindNode(original.name());
      const bool is_low = low_.contains(node);
      const bool is_wide = wide_.contains(node);
      proto::NodeDef copy = original;
      if (is_low) {
        copy.set_name(low_names_.at(original.name()));
        if (copy.attr().contains("T")) (*copy.mutable_attr())["T"] = TypeAttr(DType::kBFloat16);
        if (is_wide) (*copy.mutable_attr())["Tout"] = TypeAttr(DType::kFloat);
        ++report->converted[original.op()];
        report->float32_outputs += is_wide;
      }
      for (int i = 0; i < copy.input_size(); ++i) {
        RewireInput(*node, i, is_low, copy.device(), copy.mutable_input(i), &out);
      }
      *out.add_node() = std::move(copy);
      if (is_low && !is_wide) {
        proto::NodeDef back = CastDef(original.name(), low_names_.at(original.name()) + ":0",
                                      DType::kBFloat16, DType::kFloat, original.device());
        if (original.attr().contains("_class")) {
          (*back.mutable_attr())["_class"] = original.attr().at("_class");
        }
        *out.add_node() = std::move(back);
      }
    }
    report->casts_to_bfloat16 = static_cast<int>(casts_.size());
    return out;
  }

 private:
  std::string Unique(const std::string& base) {
    std::string name = base;
    for (int k = 1; taken_.contains(name); ++k) name = absl::StrCat(base, "_", k);
    taken_.insert(name);
    return name;
  }

  std::string LowName(const std::string& name) {
    const Node* node = g_.FindNode(name);
    if (!low_.contains(node) || wide_.contains(node)) return name;
    return Unique(name + "/bfloat16");
  }

  // Points data input i of `node` (whose NodeDef input string is *input) at the
  // tensor of the right dtype, adding a cast to bfloat16 when needed.
  void RewireInput(const Node& node, int i, bool is_low, const std::string& device,
                   std::string* input, proto::GraphDef* out) {
    if (input->empty() || (*input)[0] == '^' || i >= node.num_inputs()) return;
    const Output& src = node.input(i);
    if (low_.contains(src.node) && !wide_.contains(src.node)) {
      if (is_low || ReadsAnyDType(node.op())) {
        *input = absl::StrCat(low_names_.at(src.node->name()), ":", src.index);
      }
      return;  // Float32 consumers read the Cast that carries the original name.
    }
    if (!is_low || src.dtype() != DType::kFloat) return;
    const std::pair<std::string, std::string> key{src.name(), device};
    auto it = casts_.find(key);
    if (it == casts_.end()) {
      std::string name = Unique(absl::StrCat(src.node->name(), "/", src.index, "/to_bfloat16"));
      *out->add_node() = CastDef(name, src.name(), DType::kFloat, DType::kBFloat16, device);
      it = casts_.emplace(key, name).first;
    }
    *input = it->second + ":0";
  }

  const proto::GraphDef& def_;
  const Graph& g_;
  const absl::flat_hash_set<const Node*> low_;
  const absl::flat_hash_set<const Node*> wide_;  // Low nodes with a float32 output.
  absl::flat_hash_set<std::string> taken_;
  absl::flat_hash_map<std::string, std::string> low_names_;
  absl::flat_hash_map<std::pair<std::string, std::string>, std::string> casts_;
};

}  // namespace

absl::StatusOr<Precision> ParsePrecision(absl::string_view name) {
  if (name == "float32") return Precision::kFloat32;
  if (name == "mixed_bfloat16") return Precision::kMixedBfloat16;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown precision '", name, "' (expected \"float32\" or \"mixed_bfloat16\")"));
}

absl::string_view PrecisionName(Precision precision) {
  return precision == Precision::kMixedBfloat16 ? "mixed_bfloat16" : "float32";
}

absl::StatusOr<proto::GraphDef> RewriteForMixedBfloat16(const proto::GraphDef& def,
                                                        const OpRegistry* registry,
                                                        MixedPrecisionReport* report) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, Graph::FromGraphDef(def, registry));
  MixedPrecisionReport local;
  return Rewriter(def, *g, ChooseLowNodes(*g)).Run(report != nullptr ? report : &local);
}

Precision PrecisionForCpu(Precision requested) {
  if (requested != Precision::kMixedBfloat16 || onednn::HasNativeBf16()) return requested;
  const char* allow = std::getenv("TANDEM_ALLOW_EMULATED_BF16");
  const bool keep = allow != nullptr && std::string(allow) == "1";
  static std::atomic<bool> logged{false};
  if (!logged.exchange(true)) {
    LOG(WARNING) << "Precision mixed_bfloat16 asked for, but this CPU has no native bfloat16 "
                 << "dot product (oneDNN ISA " << onednn::EffectiveIsaName()
                 << "; bfloat16 needs avx512_core_bf16 or AMX), where bfloat16 products are "
                 << "emulated and training runs about 3x slower than in float32: "
                 << (keep ? "keeping mixed_bfloat16 (TANDEM_ALLOW_EMULATED_BF16=1)"
                          : "training in float32 instead (TANDEM_ALLOW_EMULATED_BF16=1 keeps "
                            "mixed_bfloat16)");
  }
  return keep ? requested : Precision::kFloat32;
}

absl::StatusOr<proto::GraphDef> ApplyPrecision(const proto::GraphDef& def, Precision precision) {
  if (precision == Precision::kFloat32) return def;
  MixedPrecisionReport report;
  TANDEM_ASSIGN_OR_RETURN(proto::GraphDef out,
                          RewriteForMixedBfloat16(def, OpRegistry::Global(), &report));
  static std::atomic<bool> logged{false};
  if (!logged.exchange(true)) {
    std::vector<std::string> ops;
    for (const auto& [op, n] : report.converted) ops.push_back(absl::StrCat(op, " x", n));
    LOG(INFO) << "Precision mixed_bfloat16: " << (ops.empty() ? "no op" : absl::StrJoin(ops, ", "))
              << " on bfloat16 (" << report.float32_outputs << " writing float32), "
              << report.casts_to_bfloat16
              << " float32 tensors cast to bfloat16 per step; oneDNN ISA "
              << onednn::EffectiveIsaName()
              << (onednn::HasBf16Kernels()
                      ? " (bf16 primitives)"
                      : " (no bf16 primitives: bf16 ops compute in float32, slower)");
  }
  return out;
}

}  // namespace tandem

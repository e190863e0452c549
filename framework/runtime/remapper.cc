// framework/runtime/remapper.cc
#include "framework/runtime/remapper.h"

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "framework/core/status.h"
#include "framework/graph/graph.h"

namespace tandem {
namespace {

// A Cast nothing reads: the float32 view the mixed-precision rewrite leaves beside each
// bfloat16 node. Pruned unless fetched.
bool IsUnreadCast(const Node& node) {
  return node.op() == "Cast" && node.out_edges().empty() && node.out_control_edges().empty();
}

// The one consumer of `node` other than unread casts, through output 0, or null.
const Node* SoleReader(const Node& node) {
  if (!node.out_control_edges().empty()) return nullptr;
  const Node* reader = nullptr;
  for (const auto& [consumer, slot] : node.out_edges()) {
    if (IsUnreadCast(*consumer)) continue;
    if (reader != nullptr || slot != 0) return nullptr;
    reader = consumer;
  }
  return reader;
}

bool SameDeviceAndDType(const Node& a, const Node& b) {
  return a.requested_device() == b.requested_device() && a.num_outputs() == 1 &&
         b.num_outputs() == 1 && a.output_dtype(0) == b.output_dtype(0);
}

struct Chain {
  const Node* base;  // Conv2D or MatMul
  const Node* bias;  // BiasAdd
  const Node* relu;  // Relu, or null
  const Node* last() const { return relu != nullptr ? relu : bias; }
};

// The chain ending at BiasAdd `b` or at the Relu that alone reads it, if it fuses.
bool FindChain(const Node& b, Chain* chain) {
  if (b.op() != "BiasAdd" || b.num_inputs() != 2 || b.input(0).index != 0) return false;
  const Node& base = *b.input(0).node;
  if (base.op() != "Conv2D" && base.op() != "MatMul") return false;
  if (!SameDeviceAndDType(base, b) || base.input(0).dtype() != base.output_dtype(0)) return false;
  if (SoleReader(base) != &b) return false;
  *chain = {&base, &b, nullptr};
  const Node* r = SoleReader(b);
  if (r != nullptr && r->op() == "Relu" && SameDeviceAndDType(*r, b)) chain->relu = r;
  return true;
}

std::string ChainName(const Chain& c) {
  return absl::StrCat(c.base->op(), "+BiasAdd", c.relu != nullptr ? "+Relu" : "");
}

// The node name an input string ("name", "name:1", "^name") refers to.
absl::string_view InputNode(absl::string_view input) {
  if (absl::ConsumePrefix(&input, "^")) return input;
  const size_t colon = input.rfind(':');
  return colon == absl::string_view::npos ? input : input.substr(0, colon);
}

const proto::NodeDef& DefOf(const absl::flat_hash_map<std::string, int>& index,
                            const proto::GraphDef& def, const Node& node) {
  return def.node(index.at(node.name()));
}

proto::NodeDef FusedDef(const proto::GraphDef& def,
                        const absl::flat_hash_map<std::string, int>& index, const Chain& c,
                        std::string name) {
  const proto::NodeDef& base = DefOf(index, def, *c.base);
  const proto::NodeDef& bias = DefOf(index, def, *c.bias);
  proto::NodeDef fused;
  fused.set_name(std::move(name));
  fused.set_op(c.base->op() == "Conv2D" ? "_FusedConv2D" : "_FusedMatMul");
  fused.set_device(DefOf(index, def, *c.last()).device());
  *fused.mutable_attr() = base.attr();
  (*fused.mutable_attr())["activation"].set_s(c.relu != nullptr ? "relu" : "none");
  std::vector<std::string> controls;
  auto add_inputs = [&](const proto::NodeDef& n, int data_from, int data_to) {
    for (int i = 0; i < n.input_size(); ++i) {
      if (!n.input(i).empty() && n.input(i)[0] == '^') {
        controls.push_back(n.input(i));
      } else if (i >= data_from && i < data_to) {
        fused.add_input(n.input(i));
      }
    }
  };
  add_inputs(base, 0, 2);
  add_inputs(bias, 1, 2);
  if (c.relu != nullptr) add_inputs(DefOf(index, def, *c.relu), 0, 0);
  for (std::string& control : controls) fused.add_input(std::move(control));
  return fused;
}

}  // namespace

absl::StatusOr<proto::GraphDef> FuseBiasAndRelu(const proto::GraphDef& def,
                                                const OpRegistry* registry, RemapReport* report) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, Graph::FromGraphDef(def, registry));
  absl::flat_hash_map<std::string, int> index;
  absl::flat_hash_set<std::string> taken;
  for (int i = 0; i < def.node_size(); ++i) {
    index[def.node(i).name()] = i;
    taken.insert(def.node(i).name());
  }
  // The last node of each chain -> the fused node that replaces it.
  absl::flat_hash_map<std::string, proto::NodeDef> fused_after;
  absl::flat_hash_map<std::string, std::string> renamed;
  for (const auto& node : g->nodes()) {
    Chain c;
    if (!FindChain(*node, &c)) continue;
    std::string name = c.last()->name() + "/fused";
    for (int k = 1; taken.contains(name); ++k) name = absl::StrCat(c.last()->name(), "/fused_", k);
    taken.insert(name);
    renamed[c.last()->name()] = name;
    fused_after[c.last()->name()] = FusedDef(def, index, c, name);
    if (report != nullptr) ++report->fused[ChainName(c)];
  }
  proto::GraphDef out;
  out.set_version(def.version());
  auto emit = [&](proto::NodeDef node) {
    for (std::string& input : *node.mutable_input()) {
      auto it = renamed.find(InputNode(input));
      if (it == renamed.end()) continue;
      const bool indexed = absl::StrContains(input, ':');
      input = input[0] == '^' ? absl::StrCat("^", it->second)
                              : absl::StrCat(it->second, indexed ? ":0" : "");
    }
    *out.add_node() = std::move(node);
  };
  for (const proto::NodeDef& original : def.node()) {
    emit(original);
    auto f = fused_after.find(original.name());
    if (f != fused_after.end()) emit(std::move(f->second));
  }
  return out;
}

}  // namespace tandem

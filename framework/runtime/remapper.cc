// framework/runtime/remapper.cc
#include "framework/runtime/remapper.h"

#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "framework/core/status.h"
#include "framework/graph/attr_value.h"
#include "framework/graph/graph.h"
#include "framework/ops/training_ops.h"

namespace tandem {
namespace {

// A Cast nothing reads: the float32 view the mixed-precision rewrite leaves beside each
// bfloat16 node. Pruned unless fetched.
bool IsUnreadCast(const Node& node) {
  return node.op() == "Cast" && node.out_edges().empty() && node.out_control_edges().empty();
}

// The one consumer of `node` other than unread casts, reading it at its input
// `input_slot`, or null.
const Node* SoleReader(const Node& node, int input_slot = 0) {
  if (!node.out_control_edges().empty()) return nullptr;
  const Node* reader = nullptr;
  for (const auto& [consumer, slot] : node.out_edges()) {
    if (IsUnreadCast(*consumer)) continue;
    if (reader != nullptr || slot != input_slot) return nullptr;
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

// A rewrite of a GraphDef that keeps every node: new nodes are emitted after named
// ones, and every reader of a renamed node (data and control) reads its replacement.
struct Rewrite {
  absl::flat_hash_set<std::string> taken;  // names in use
  absl::flat_hash_map<std::string, std::vector<proto::NodeDef>> added_after;
  absl::flat_hash_map<std::string, std::string> renamed;
  absl::flat_hash_map<std::string, std::string> renamed_outputs;   // "node:k" -> "node:j"
  absl::flat_hash_map<std::string, std::string> renamed_controls;  // node -> node

  explicit Rewrite(const proto::GraphDef& def) {
    for (const proto::NodeDef& n : def.node()) taken.insert(n.name());
  }
  // `base` + suffix, or with a counter where that name is taken.
  std::string NewName(const std::string& base, const std::string& suffix) {
    std::string name = base + suffix;
    for (int k = 1; taken.contains(name); ++k) name = absl::StrCat(base, suffix, "_", k);
    taken.insert(name);
    return name;
  }
  // Emits `replacement` after the node `original` and points every reader of
  // `original` at it.
  void Replace(const std::string& original, proto::NodeDef replacement) {
    renamed[original] = replacement.name();
    added_after[original].push_back(std::move(replacement));
  }
  // Points every reader of `original` at output `index` of the node `replacement`
  // (control inputs at the node).
  void Redirect(const std::string& original, const std::string& replacement, int index) {
    renamed[original] = absl::StrCat(replacement, ":", index);
  }
  // Points every reader of output `index` of `original` at `replacement` ("node:k"), and
  // its control readers at that node; readers of its other outputs keep reading it.
  void RedirectOutput(const std::string& original, int index, const std::string& replacement) {
    renamed_outputs[absl::StrCat(original, ":", index)] = replacement;
    renamed_controls[original] = std::string(InputNode(replacement));
  }
  proto::GraphDef Apply(const proto::GraphDef& def) {
    proto::GraphDef out;
    out.set_version(def.version());
    auto emit = [&](proto::NodeDef node) {
      for (std::string& input : *node.mutable_input()) {
        if (input.empty()) continue;
        if (input[0] == '^') {
          auto c = renamed_controls.find(InputNode(input));
          if (c != renamed_controls.end()) {
            input = absl::StrCat("^", c->second);
            continue;
          }
        } else {
          auto o = renamed_outputs.find(absl::StrContains(input, ':') ? input
                                                                      : absl::StrCat(input, ":0"));
          if (o != renamed_outputs.end()) {
            input = o->second;
            continue;
          }
        }
        auto it = renamed.find(InputNode(input));
        if (it == renamed.end()) continue;
        const bool indexed = absl::StrContains(input, ':');
        const bool to_output = absl::StrContains(it->second, ':');  // Redirect's
        if (input[0] == '^') {
          input = absl::StrCat("^", InputNode(it->second));
        } else {
          input = to_output ? it->second : absl::StrCat(it->second, indexed ? ":0" : "");
        }
      }
      *out.add_node() = std::move(node);
    };
    for (const proto::NodeDef& original : def.node()) {
      emit(original);
      auto added = added_after.find(original.name());
      if (added == added_after.end()) continue;
      for (proto::NodeDef& node : added->second) emit(std::move(node));
    }
    return out;
  }
};

// Appends the control inputs ("^name") of every node in `from` to `to`.
void AddControlInputs(std::initializer_list<const proto::NodeDef*> from, proto::NodeDef* to) {
  for (const proto::NodeDef* n : from) {
    for (const std::string& input : n->input()) {
      if (!input.empty() && input[0] == '^') to->add_input(input);
    }
  }
}

// A pool's window attrs (ksize, strides, padding) on a fused node, as pool_ksize,
// pool_strides and pool_padding.
void CopyPoolWindow(const proto::NodeDef& pool, proto::NodeDef* to) {
  for (const char* key : {"ksize", "strides", "padding"}) {
    auto it = pool.attr().find(key);
    if (it != pool.attr().end()) (*to->mutable_attr())[absl::StrCat("pool_", key)] = it->second;
  }
}

absl::flat_hash_map<std::string, int> IndexOf(const proto::GraphDef& def) {
  absl::flat_hash_map<std::string, int> index;
  for (int i = 0; i < def.node_size(); ++i) index[def.node(i).name()] = i;
  return index;
}

// Calls visit(node, index, rewrite) for every node of `def`'s graph (index: each node's
// place in def), then applies the rewrite.
template <typename Visit>
absl::StatusOr<proto::GraphDef> RewriteEachNode(const proto::GraphDef& def,
                                                const OpRegistry* registry, Visit visit) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, Graph::FromGraphDef(def, registry));
  const absl::flat_hash_map<std::string, int> index = IndexOf(def);
  Rewrite rewrite(def);
  for (const auto& node : g->nodes()) visit(*node, index, rewrite);
  return rewrite.Apply(def);
}

bool SamePoolGeometry(const Node& a, const Node& b) {
  for (const char* key : {"ksize", "strides", "padding", "data_format"}) {
    auto x = a.attrs().find(key), y = b.attrs().find(key);
    if (x == a.attrs().end() || y == b.attrs().end() ||
        AttrValueDebugString(x->second) != AttrValueDebugString(y->second)) {
      return false;
    }
  }
  return true;
}

// When `r` is ReluGrad(MaxPoolGrad(a, MaxPool(a), g), a), the ReLU's mask applied after
// the pooling gradient scattered g back to a's size, and may move before it: the
// MaxPoolGrad. Else null.
const Node* MaskablePoolGrad(const Node& r) {
  if (r.op() != "ReluGrad" || r.num_inputs() != 2 || r.input(0).index != 0) return nullptr;
  const Node& pg = *r.input(0).node;
  if (pg.op() != "MaxPoolGrad" || pg.num_inputs() != 3 || SoleReader(pg) != &r) return nullptr;
  const Output& a = pg.input(0);
  if (!(r.input(1) == a) || pg.input(1).index != 0) return nullptr;
  const Node& pool = *pg.input(1).node;
  if (pool.op() != "MaxPool" || pool.num_inputs() != 1 || !(pool.input(0) == a)) return nullptr;
  if (!SameDeviceAndDType(r, pg) || !SameDeviceAndDType(pg, pool) || !SamePoolGeometry(pool, pg)) {
    return nullptr;
  }
  return &pg;
}

// When `b` is BiasAddGrad(MaxPoolGrad(a, m, g)) on the MaxPoolGrad's device, reading g's
// dtype, the MaxPoolGrad; else null.
const Node* PoolGradUnderBiasGrad(const Node& b) {
  if (b.op() != "BiasAddGrad" || b.num_inputs() != 1 || b.input(0).index != 0) return nullptr;
  const Node& pg = *b.input(0).node;
  if (pg.op() != "MaxPoolGrad" || pg.num_inputs() != 3 || pg.num_outputs() != 1 ||
      pg.requested_device() != b.requested_device() || pg.input(2).dtype() != pg.output_dtype(0)) {
    return nullptr;
  }
  return &pg;
}

// When `pool` is a MaxPool of 2x2 windows of stride 2 over output 0 of a _FusedConv2D
// on its device and dtype, and the convolution's only MaxPool, the convolution; else
// null.
const Node* ConvUnderMaxPool(const Node& pool) {
  if (pool.op() != "MaxPool" || pool.num_inputs() != 1 || pool.input(0).index != 0) return nullptr;
  const Node& conv = *pool.input(0).node;
  if (conv.op() != "_FusedConv2D" || !SameDeviceAndDType(conv, pool)) return nullptr;
  for (const char* key : {"ksize", "strides"}) {
    if (GetAttrOr<std::vector<int64_t>>(pool.attrs(), key, {}) !=
        std::vector<int64_t>{1, 2, 2, 1}) {
      return nullptr;
    }
  }
  int pools = 0;
  for (const auto& [reader, slot] : conv.out_edges()) pools += reader->op() == "MaxPool";
  return pools == 1 ? &conv : nullptr;
}

// Whether nothing takes `node`'s outputs: no control edges out, and every reader
// likewise (a first layer's input gradient, which no update reads; the BiasAddGrad
// that BiasGradBeforeMaxPoolGrad replaced). Runs prune such nodes unless one of them is
// fetched. At most `*budget` nodes are visited, in all; past it, the answer is no.
bool Unread(const Node& node, int* budget) {
  if (!node.out_control_edges().empty() || --*budget < 0) return false;
  for (const auto& [reader, slot] : node.out_edges()) {
    if (!Unread(*reader, budget)) return false;
  }
  return true;
}

// When `f` is Conv2DBackpropFilter(x, sizes, MaxPoolGrad(a, m, g)) on the MaxPoolGrad's
// device and dtype, and every other reader of the MaxPoolGrad is Unread, the
// MaxPoolGrad; else null.
const Node* PoolGradUnderFilterGrad(const Node& f) {
  if (f.op() != "Conv2DBackpropFilter" || f.num_inputs() != 3 || f.input(2).index != 0) {
    return nullptr;
  }
  const Node& pg = *f.input(2).node;
  if (pg.op() != "MaxPoolGrad" || pg.num_inputs() != 3 || pg.num_outputs() != 1 ||
      pg.requested_device() != f.requested_device() || pg.output_dtype(0) != f.input(0).dtype() ||
      !pg.out_control_edges().empty()) {
    return nullptr;
  }
  for (const auto& [reader, slot] : pg.out_edges()) {
    int budget = 64;  // the nodes a pruned input gradient feeds: a handful
    if (reader != &f && !Unread(*reader, &budget)) return nullptr;
  }
  return &pg;
}

// When `conv` is a _FusedConv2DWithMaxPool whose output 0 (the convolution's) is read,
// apart from Unread readers, only by _Conv2DBackpropFilterOfMaxPoolGrad nodes requested
// on its device, as their orig_input beside its output 1 as their orig_output: true, and
// those nodes in `*filter_grads` (none in a graph without gradients). Else false.
bool ArgmaxServesConvOutput(const Node& conv, std::vector<const Node*>* filter_grads) {
  if (conv.op() != "_FusedConv2DWithMaxPool" || conv.num_outputs() != 2) return false;
  for (const auto& [reader, slot] : conv.out_edges()) {
    if (reader->input(slot).index != 0) continue;  // The pool's readers: any.
    if (reader->op() == "_Conv2DBackpropFilterOfMaxPoolGrad" && reader->num_inputs() == 5 &&
        slot == 2 && reader->input(3).node == &conv && reader->input(3).index == 1 &&
        reader->requested_device() == conv.requested_device()) {
      filter_grads->push_back(reader);
      continue;
    }
    int budget = 64;  // the nodes the earlier rewrites left unread: a handful
    if (!Unread(*reader, &budget)) return false;
  }
  return true;
}

// When `cast` is Cast(ReadVariableOp(handle)) from float32 to bfloat16 on one device,
// with nothing ordered after the read by a control edge, the read; else null.
const Node* CastVariableRead(const Node& cast) {
  if (cast.op() != "Cast" || cast.num_inputs() != 1 || cast.input(0).index != 0) return nullptr;
  if (cast.num_outputs() != 1 || cast.output_dtype(0) != DType::kBFloat16) return nullptr;
  const Node& read = *cast.input(0).node;
  if (read.op() != "ReadVariableOp" || read.num_inputs() != 1 || read.num_outputs() != 1 ||
      read.output_dtype(0) != DType::kFloat || !read.out_control_edges().empty() ||
      read.requested_device() != cast.requested_device()) {
    return nullptr;
  }
  return &read;
}

// When `apply` is a dense update whose gradient (input `*grad`) is a float32 MatMul that
// nothing else reads, requested on the update's device and on its variable's, the
// MatMul; else null. An update runs where its variable is (the placer colocates them),
// so a MatMul requested elsewhere, e.g. on a worker for a variable on a ps, stays.
const Node* GradientMatMul(const Node& apply, int* grad) {
  *grad = ops::DenseApplyGradientInput(apply.op());
  if (*grad < 0 || apply.num_inputs() <= *grad || apply.input(*grad).index != 0) return nullptr;
  const Node& m = *apply.input(*grad).node;
  if (m.op() != "MatMul" || m.num_inputs() != 2 || m.num_outputs() != 1 ||
      m.output_dtype(0) != DType::kFloat || SoleReader(m, *grad) != &apply ||
      m.requested_device() != apply.requested_device() ||
      m.requested_device() != apply.input(0).node->requested_device()) {
    return nullptr;
  }
  return &m;
}

}  // namespace

absl::StatusOr<proto::GraphDef> FuseBiasAndRelu(const proto::GraphDef& def,
                                                const OpRegistry* registry, RemapReport* report) {
  return RewriteEachNode(def, registry, [&](const Node& node, const auto& index, Rewrite& rewrite) {
    Chain c;
    if (!FindChain(node, &c)) return;
    rewrite.Replace(c.last()->name(),
                    FusedDef(def, index, c, rewrite.NewName(c.last()->name(), "/fused")));
    if (report != nullptr) ++report->fused[ChainName(c)];
  });
}

absl::StatusOr<proto::GraphDef> MaskBeforeMaxPoolGrad(const proto::GraphDef& def,
                                                      const OpRegistry* registry,
                                                      RemapReport* report) {
  return RewriteEachNode(def, registry, [&](const Node& node, const auto& index, Rewrite& rewrite) {
    const Node* pg = MaskablePoolGrad(node);
    if (pg == nullptr) return;
    const proto::NodeDef& pool_grad = DefOf(index, def, *pg);
    const proto::NodeDef& relu_grad = DefOf(index, def, node);
    // ReluGrad(g, MaxPool(a)): the mask on the pooled gradient, a quarter of the size
    // for 2x2 windows.
    proto::NodeDef masked = relu_grad;
    masked.set_name(rewrite.NewName(relu_grad.name(), "/pooled"));
    masked.clear_input();
    masked.add_input(pool_grad.input(2));
    masked.add_input(pool_grad.input(1));
    // MaxPoolGrad(a, MaxPool(a), that): in place of the ReluGrad for all its readers.
    proto::NodeDef routed = pool_grad;
    routed.set_name(rewrite.NewName(relu_grad.name(), "/routed"));
    *routed.mutable_input(2) = masked.name();
    AddControlInputs({&pool_grad, &relu_grad}, &masked);
    rewrite.added_after[relu_grad.name()].push_back(std::move(masked));
    rewrite.Replace(relu_grad.name(), std::move(routed));
    if (report != nullptr) ++report->masks_before_pool_grad;
  });
}

absl::StatusOr<proto::GraphDef> BiasGradBeforeMaxPoolGrad(const proto::GraphDef& def,
                                                          const OpRegistry* registry,
                                                          RemapReport* report) {
  return RewriteEachNode(def, registry, [&](const Node& node, const auto& index, Rewrite& rewrite) {
    const Node* pg = PoolGradUnderBiasGrad(node);
    if (pg == nullptr) return;
    const proto::NodeDef& pool_grad = DefOf(index, def, *pg);
    const proto::NodeDef& bias_grad = DefOf(index, def, node);
    // BiasAddGrad(g): the sums of the pooled gradient, in place of the BiasAddGrad for
    // all its readers.
    proto::NodeDef pooled = bias_grad;
    pooled.set_name(rewrite.NewName(bias_grad.name(), "/pooled"));
    pooled.clear_input();
    pooled.add_input(pool_grad.input(2));
    AddControlInputs({&pool_grad, &bias_grad}, &pooled);
    rewrite.Replace(bias_grad.name(), std::move(pooled));
    if (report != nullptr) ++report->bias_grads_before_pool_grad;
  });
}

absl::StatusOr<proto::GraphDef> FilterGradOfMaxPoolGrad(const proto::GraphDef& def,
                                                        const OpRegistry* registry,
                                                        RemapReport* report) {
  return RewriteEachNode(def, registry, [&](const Node& node, const auto& index, Rewrite& rewrite) {
    const Node* pg = PoolGradUnderFilterGrad(node);
    if (pg == nullptr) return;
    const proto::NodeDef& pool_grad = DefOf(index, def, *pg);
    const proto::NodeDef& filter_grad = DefOf(index, def, node);
    proto::NodeDef fused;
    fused.set_name(rewrite.NewName(filter_grad.name(), "/of_pool_grad"));
    fused.set_op("_Conv2DBackpropFilterOfMaxPoolGrad");
    fused.set_device(filter_grad.device());
    *fused.mutable_attr() = filter_grad.attr();
    CopyPoolWindow(pool_grad, &fused);
    int data = 0;
    for (const proto::NodeDef* n : {&filter_grad, &pool_grad}) {
      for (const std::string& input : n->input()) {
        if (input.empty() || input[0] == '^') continue;
        if (n == &pool_grad || data++ < 2) fused.add_input(input);
      }
    }
    AddControlInputs({&filter_grad, &pool_grad}, &fused);
    rewrite.Replace(filter_grad.name(), std::move(fused));
    if (report != nullptr) ++report->filter_grads_of_pool_grad;
  });
}

absl::StatusOr<proto::GraphDef> FuseConvAndMaxPool(const proto::GraphDef& def,
                                                   const OpRegistry* registry,
                                                   RemapReport* report) {
  return RewriteEachNode(def, registry, [&](const Node& node, const auto& index, Rewrite& rewrite) {
    const Node* c = ConvUnderMaxPool(node);
    if (c == nullptr) return;
    const proto::NodeDef& conv = DefOf(index, def, *c);
    const proto::NodeDef& pool = DefOf(index, def, node);
    proto::NodeDef fused = conv;
    fused.set_name(rewrite.NewName(conv.name(), "/with_pool"));
    fused.set_op("_FusedConv2DWithMaxPool");
    CopyPoolWindow(pool, &fused);
    AddControlInputs({&pool}, &fused);
    rewrite.Redirect(pool.name(), fused.name(), 1);
    rewrite.Replace(conv.name(), std::move(fused));
    if (report != nullptr) ++report->pools_inside_convs;
  });
}

absl::StatusOr<proto::GraphDef> KeepPoolArgmax(const proto::GraphDef& def,
                                               const OpRegistry* registry, RemapReport* report) {
  return RewriteEachNode(def, registry, [&](const Node& node, const auto& index, Rewrite& rewrite) {
    std::vector<const Node*> filter_grads;
    if (!ArgmaxServesConvOutput(node, &filter_grads)) return;
    const proto::NodeDef& conv = DefOf(index, def, node);
    proto::NodeDef argmax = conv;
    argmax.set_name(rewrite.NewName(conv.name(), "/argmax"));
    argmax.set_op("_FusedConv2DWithMaxPoolArgmax");
    const std::string codes = absl::StrCat(argmax.name(), ":1");
    for (const Node* f : filter_grads) {
      const proto::NodeDef& grad = DefOf(index, def, *f);
      proto::NodeDef routed;
      routed.set_name(rewrite.NewName(grad.name(), "/by_argmax"));
      routed.set_op("_Conv2DBackpropFilterOfMaxPoolArgmax");
      routed.set_device(grad.device());
      *routed.mutable_attr() = grad.attr();
      // (input, filter_sizes, orig_input, orig_output, grad) -> (input, filter_sizes,
      // codes, grad).
      int data = 0;
      for (const std::string& input : grad.input()) {
        if (input.empty() || input[0] == '^') continue;
        if (data == 2) routed.add_input(codes);
        if (data != 2 && data != 3) routed.add_input(input);
        ++data;
      }
      AddControlInputs({&grad}, &routed);
      rewrite.Replace(grad.name(), std::move(routed));
    }
    rewrite.RedirectOutput(conv.name(), 1, absl::StrCat(argmax.name(), ":0"));
    rewrite.added_after[conv.name()].push_back(std::move(argmax));
    if (report != nullptr) ++report->pool_argmaxes_kept;
  });
}

absl::StatusOr<proto::GraphDef> ReadVariablesAsBfloat16(const proto::GraphDef& def,
                                                        const OpRegistry* registry,
                                                        RemapReport* report) {
  return RewriteEachNode(def, registry, [&](const Node& node, const auto& index, Rewrite& rewrite) {
    const Node* r = CastVariableRead(node);
    if (r == nullptr) return;
    const proto::NodeDef& read = DefOf(index, def, *r);
    const proto::NodeDef& cast = DefOf(index, def, node);
    proto::NodeDef fused;
    fused.set_name(rewrite.NewName(cast.name(), "/from_variable"));
    fused.set_op("_ReadVariableAsBfloat16");
    fused.set_device(cast.device());
    fused.add_input(read.input(0));
    // Whatever the read and the cast waited for, the fused read waits for.
    AddControlInputs({&read, &cast}, &fused);
    auto dtype = read.attr().find("dtype");
    if (dtype != read.attr().end()) (*fused.mutable_attr())["dtype"] = dtype->second;
    rewrite.Replace(cast.name(), std::move(fused));
    if (report != nullptr) ++report->variables_read_as_bfloat16;
  });
}

absl::StatusOr<proto::GraphDef> FuseGradientMatMulIntoApply(const proto::GraphDef& def,
                                                            const OpRegistry* registry,
                                                            RemapReport* report) {
  return RewriteEachNode(def, registry, [&](const Node& node, const auto& index, Rewrite& rewrite) {
    int grad = 0;
    const Node* m = GradientMatMul(node, &grad);
    if (m == nullptr) return;
    const proto::NodeDef& apply = DefOf(index, def, node);
    const proto::NodeDef& matmul = DefOf(index, def, *m);
    proto::NodeDef fused;
    fused.set_name(rewrite.NewName(apply.name(), "/with_matmul"));
    fused.set_op(absl::StrCat("_", apply.op(), "WithMatMul"));
    fused.set_device(apply.device());
    *fused.mutable_attr() = apply.attr();
    for (const char* attr : {"transpose_a", "transpose_b"}) {
      auto it = matmul.attr().find(attr);
      if (it != matmul.attr().end()) (*fused.mutable_attr())[attr] = it->second;
    }
    int data = 0;
    for (const std::string& input : apply.input()) {
      if (!input.empty() && input[0] == '^') continue;
      if (data++ != grad) {
        fused.add_input(input);
        continue;
      }
      for (const std::string& operand : matmul.input()) {
        if (operand.empty() || operand[0] != '^') fused.add_input(operand);
      }
    }
    AddControlInputs({&apply, &matmul}, &fused);
    rewrite.Replace(apply.name(), std::move(fused));
    if (report != nullptr) ++report->gradients_computed_in_updates;
  });
}

}  // namespace tandem

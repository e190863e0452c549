#include "framework/graph/graph.h"

#include <deque>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "glog/logging.h"

namespace tandem {

DType Output::dtype() const { return node->output_dtype(index); }
const PartialShape& Output::shape() const { return node->output_shape(index); }
std::string Output::name() const { return absl::StrCat(node->name(), ":", index); }

std::vector<std::string> Node::ColocationGroups() const {
  std::vector<std::string> groups;
  auto it = attrs_.find("_class");
  if (it == attrs_.end()) return groups;
  if (const auto* v = std::get_if<std::vector<std::string>>(&it->second)) {
    for (const auto& s : *v) {
      if (s.rfind("loc:@", 0) == 0) groups.push_back(s.substr(5));
    }
  }
  return groups;
}

bool ParseTensorName(absl::string_view s, std::string* node, int* index, bool* control) {
  *control = false;
  *index = 0;
  if (!s.empty() && s[0] == '^') {
    *control = true;
    s.remove_prefix(1);
  }
  auto colon = s.rfind(':');
  if (colon != absl::string_view::npos && !*control) {
    int idx;
    if (!absl::SimpleAtoi(s.substr(colon + 1), &idx) || idx < 0) return false;
    *index = idx;
    s = s.substr(0, colon);
  }
  if (s.empty()) return false;
  *node = std::string(s);
  return true;
}

Graph::Graph(const OpRegistry* registry) : registry_(registry) {}

absl::StatusOr<Node*> Graph::AddNode(NodeSpec spec) {
  auto context = [&spec] { return absl::StrCat("node '", spec.name, "' (", spec.op, ")"); };
  if (spec.name.empty()) return absl::InvalidArgumentError(context() + ": empty node name");
  if (by_name_.contains(spec.name)) {
    return absl::AlreadyExistsError(absl::StrCat(context(), ": a node of that name exists"));
  }
  auto def = registry_->Lookup(spec.op);
  if (!def.ok()) return AnnotateStatus(def.status(), context());
  const OpDef& op_def = **def;
  int n = static_cast<int>(spec.inputs.size());
  if (n < op_def.min_inputs || (op_def.max_inputs >= 0 && n > op_def.max_inputs)) {
    return absl::InvalidArgumentError(absl::StrCat(
        context(), ": takes ",
        op_def.max_inputs == op_def.min_inputs
            ? absl::StrCat(op_def.min_inputs)
            : absl::StrCat(op_def.min_inputs, " to ",
                           op_def.max_inputs < 0 ? "any" : absl::StrCat(op_def.max_inputs)),
        " inputs, got ", n));
  }
  std::vector<InferenceContext::Input> in;
  in.reserve(n);
  for (int i = 0; i < n; ++i) {
    const Output& o = spec.inputs[i];
    if (!o.valid() || o.index < 0 || o.index >= o.node->num_outputs()) {
      return absl::InvalidArgumentError(absl::StrCat(context(), ": input ", i, " is invalid"));
    }
    InferenceContext::Input info = o.node->output(o.index);
    if (o.node->op() == "Const") {
      auto it = o.node->attrs().find("value");
      if (it != o.node->attrs().end()) info.constant = std::get_if<Tensor>(&it->second);
    }
    in.push_back(std::move(info));
  }
  for (const auto& [key, value] : op_def.default_attrs) spec.attrs.try_emplace(key, value);

  auto node = std::make_unique<Node>();
  node->attrs_ = std::move(spec.attrs);
  InferenceContext ctx(spec.name, spec.op, &node->attrs_, std::move(in));
  TANDEM_RETURN_IF_ERROR(op_def.infer(ctx));
  if (!op_def.strings) {
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      if (ctx.input_dtype(i) == DType::kString) {
        return absl::InvalidArgumentError(absl::StrCat(
            context(), ": input ", i, " is a string tensor, and ", spec.op,
            " takes none (string tensors go to placeholders, Identity, Reshape and the "
            "feature-column ops: framework/ops/feature_ops.h)"));
      }
    }
    for (const auto& out : ctx.outputs()) {
      if (out.dtype == DType::kString) {
        return absl::InvalidArgumentError(
            absl::StrCat(context(), ": ", spec.op, " cannot make a string tensor"));
      }
    }
  }
  for (const auto& out : ctx.outputs())
    node->outputs_.push_back({out.dtype, out.shape, nullptr, out.handle});
  node->id_ = static_cast<int>(nodes_.size());
  node->name_ = std::move(spec.name);
  node->op_def_ = &op_def;
  node->requested_device_ = std::move(spec.device);
  node->inputs_ = std::move(spec.inputs);
  node->control_inputs_ = std::move(spec.control_inputs);
  Node* raw = node.get();
  for (int i = 0; i < n; ++i) raw->inputs_[i].node->out_edges_.push_back({raw, i});
  for (Node* c : raw->control_inputs_) c->out_control_.push_back(raw);
  by_name_[raw->name_] = raw;
  name_counts_.try_emplace(raw->name_, 0);
  nodes_.push_back(std::move(node));
  return raw;
}

void Graph::AddControlEdge(Node* src, Node* dst) {
  for (Node* c : dst->control_inputs_)
    if (c == src) return;
  dst->control_inputs_.push_back(src);
  src->out_control_.push_back(dst);
}

Node* Graph::FindNode(absl::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

absl::StatusOr<Output> Graph::FindOutput(absl::string_view name) const {
  std::string node_name;
  int index;
  bool control;
  if (!ParseTensorName(name, &node_name, &index, &control) || control) {
    return absl::InvalidArgumentError(absl::StrCat("malformed tensor name '", name, "'"));
  }
  Node* n = FindNode(node_name);
  if (n == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("tensor '", name, "': no node named '", node_name, "' in the graph"));
  }
  if (index >= n->num_outputs()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': node '", node_name,
                                                   "' has ", n->num_outputs(), " outputs"));
  }
  return Output(n, index);
}

std::string Graph::UniqueName(absl::string_view base) {
  std::string name(base);
  auto [it, inserted] = name_counts_.try_emplace(name, 0);
  if (inserted && !by_name_.contains(name)) return name;
  for (;;) {
    std::string candidate = absl::StrCat(base, "_", ++it->second);
    if (!by_name_.contains(candidate) && !name_counts_.contains(candidate)) {
      name_counts_.emplace(candidate, 0);
      return candidate;
    }
  }
}

void Graph::AddToCollection(const std::string& key, const std::string& node_name) {
  collections_[key].push_back(node_name);
}

const std::vector<std::string>& Graph::GetCollection(const std::string& key) const {
  static const std::vector<std::string> kEmpty;
  auto it = collections_.find(key);
  return it == collections_.end() ? kEmpty : it->second;
}

void Graph::ToGraphDef(proto::GraphDef* out) const {
  out->Clear();
  for (const auto& n : nodes_) {
    proto::NodeDef* nd = out->add_node();
    nd->set_name(n->name());
    nd->set_op(n->op());
    nd->set_device(n->requested_device());
    for (const Output& in : n->inputs()) {
      nd->add_input(in.index == 0 ? in.node->name() : in.name());
    }
    for (Node* c : n->control_inputs()) nd->add_input("^" + c->name());
    for (const auto& [key, value] : n->attrs()) {
      AttrValueToProto(value, &(*nd->mutable_attr())[key]);
    }
  }
}

absl::Status Graph::AddGraphDef(const proto::GraphDef& def) {
  // Index the new nodes, then add them in an order where inputs come first.
  absl::flat_hash_map<std::string, int> index;
  for (int i = 0; i < def.node_size(); ++i) {
    const std::string& name = def.node(i).name();
    if (by_name_.contains(name)) continue;
    if (!index.emplace(name, i).second) {
      return absl::InvalidArgumentError(absl::StrCat("GraphDef has two nodes named '", name, "'"));
    }
  }
  struct Parsed {
    std::vector<std::pair<std::string, int>> data;
    std::vector<std::string> control;
  };
  std::vector<Parsed> parsed(def.node_size());
  std::vector<int> pending(def.node_size(), 0);
  std::vector<std::vector<int>> consumers(def.node_size());
  std::deque<int> ready;
  for (const auto& [name, i] : index) {
    const proto::NodeDef& nd = def.node(i);
    for (const std::string& in : nd.input()) {
      std::string src;
      int idx;
      bool control;
      if (!ParseTensorName(in, &src, &idx, &control)) {
        return absl::InvalidArgumentError(
            absl::StrCat("node '", name, "': malformed input '", in, "'"));
      }
      if (control) {
        parsed[i].control.push_back(src);
      } else {
        if (!parsed[i].control.empty()) {
          return absl::InvalidArgumentError(
              absl::StrCat("node '", name, "': data input '", in, "' after a control input"));
        }
        parsed[i].data.push_back({src, idx});
      }
      auto it = index.find(src);
      if (it != index.end()) {
        ++pending[i];
        consumers[it->second].push_back(i);
      } else if (!by_name_.contains(src)) {
        return absl::InvalidArgumentError(
            absl::StrCat("node '", name, "': input '", in, "' names no node"));
      }
    }
    if (pending[i] == 0) ready.push_back(i);
  }
  size_t added = 0;
  while (!ready.empty()) {
    int i = ready.front();
    ready.pop_front();
    const proto::NodeDef& nd = def.node(i);
    NodeSpec spec{nd.name(), nd.op(), {}, {}, {}, nd.device()};
    for (const auto& [src, idx] : parsed[i].data) {
      Node* s = FindNode(src);
      if (idx >= s->num_outputs()) {
        return absl::InvalidArgumentError(
            absl::StrCat("node '", nd.name(), "': input '", src, ":", idx, "' does not exist"));
      }
      spec.inputs.push_back(Output(s, idx));
    }
    for (const auto& src : parsed[i].control) spec.control_inputs.push_back(FindNode(src));
    for (const auto& [key, value] : nd.attr()) {
      auto v = AttrValueFromProto(value);
      if (!v.ok()) {
        return AnnotateStatus(v.status(), absl::StrCat("node '", nd.name(), "' attr '", key, "'"));
      }
      spec.attrs.emplace(key, std::move(*v));
    }
    TANDEM_RETURN_IF_ERROR(AddNode(std::move(spec)).status());
    ++added;
    for (int c : consumers[i]) {
      if (--pending[c] == 0) ready.push_back(c);
    }
  }
  if (added != index.size()) {
    return absl::InvalidArgumentError("GraphDef has a cycle among its nodes");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Graph>> Graph::FromGraphDef(const proto::GraphDef& def,
                                                           const OpRegistry* registry) {
  auto g = std::make_unique<Graph>(registry);
  TANDEM_RETURN_IF_ERROR(g->AddGraphDef(def));
  return g;
}

}  // namespace tandem

#include "framework/runtime/partitioner.h"

#include <algorithm>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/graph/device_spec.h"
#include "framework/tensor/tensor.h"

namespace tandem {
namespace {

// A Const read in another location is copied there up to this size; a larger one is
// sent (a copy in every partition would cost more memory than its transfer saves).
constexpr int64_t kMaxCopiedConstBytes = 64 << 10;
// Control sources whose descendants the partitioner traces (one walk of the graph each).
constexpr size_t kMaxTracedControlSources = 1024;

void SetAttr(proto::NodeDef* nd, const std::string& name, AttrValue value) {
  AttrValueToProto(value, &(*nd->mutable_attr())[name]);
}

class Partitioner {
 public:
  Partitioner(const Graph& graph, const PartitionOptions& options)
      : graph_(graph), options_(options) {
    for (const auto& n : graph.nodes()) names_.insert(n->name());
  }

  absl::StatusOr<std::map<std::string, proto::GraphDef>> Run() {
    graph_.ToGraphDef(&full_);
    locs_.resize(graph_.num_nodes());
    for (const auto& n : graph_.nodes()) {
      if (n->assigned_device().empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "cannot partition: node '", n->name(), "' (", n->op(), ") has no assigned device"));
      }
      locs_[n->id()] = options_.node_to_loc ? options_.node_to_loc(*n) : n->assigned_device();
    }
    for (const auto& n : graph_.nodes()) {
      const std::string& loc = locs_[n->id()];
      proto::NodeDef* nd = parts_[loc].add_node();
      *nd = full_.node(n->id());
      nd->clear_input();
      nd->set_device(n->assigned_device());
      for (const Output& in : n->inputs()) {
        if (locs_[in.node->id()] == loc) {
          nd->add_input(in.name());
        } else if (CanCopyConst(*in.node, *n)) {
          nd->add_input(CopyConst(*in.node, *n) + ":0");
        } else {
          TANDEM_ASSIGN_OR_RETURN(std::string recv, RecvFor(in, *n));
          nd->add_input(recv);
        }
      }
      // Control inputs from other locations: one dummy tensor per source location,
      // waiting for all of them (a train op after N remote updates is one transfer).
      std::map<std::string, std::vector<Node*>> remote;
      const bool sink = options_.drop_remote_control_into_sinks && n->op() == "NoOp" &&
                        n->out_edges().empty() && n->out_control_edges().empty();
      for (Node* c : n->control_inputs()) {
        if (locs_[c->id()] == loc) {
          nd->add_input("^" + c->name());
        } else if (!sink && !ImpliedByOtherInputs(c, *n)) {
          remote[locs_[c->id()]].push_back(c);
        }
      }
      for (auto& [src_loc, sources] : remote) {
        TANDEM_ASSIGN_OR_RETURN(std::string recv, RecvForControl(sources, *n));
        nd->add_input("^" + recv);
      }
    }
    return std::move(parts_);
  }

 private:
  std::string FreshName(absl::string_view base) {
    std::string name(base);
    for (int k = 1; names_.contains(name); ++k) name = absl::StrCat(base, "_", k);
    names_.insert(name);
    return name;
  }

  // True when `src`, a Const in another location than `dst`, is better copied into
  // `dst`'s location than sent there every step: small, on a device of the same type,
  // and each of its control inputs either in `dst`'s location (the copy keeps it) or
  // one that `dst` runs after anyway (the copy drops it: nothing but `dst` sees when
  // the copy runs).
  bool CanCopyConst(const Node& src, const Node& dst) {
    if (src.op() != "Const") return false;
    auto value = src.attrs().find("value");
    if (value == src.attrs().end() || !std::holds_alternative<Tensor>(value->second) ||
        std::get<Tensor>(value->second).TotalBytes() > kMaxCopiedConstBytes) {
      return false;
    }
    for (Node* c : src.control_inputs()) {
      if (locs_[c->id()] != locs_[dst.id()] && !RunsAfter(dst, c, &src)) return false;
    }
    auto a = DeviceSpec::Parse(src.assigned_device());
    auto b = DeviceSpec::Parse(dst.assigned_device());
    return a.ok() && b.ok() && a->type == b->type;
  }

  // The name of `src`'s copy in `dst`'s location (on `dst`'s device) with the control
  // inputs it has there, made on first use.
  std::string CopyConst(const Node& src, const Node& dst) {
    const std::string& dst_loc = locs_[dst.id()];
    auto key = std::make_pair(src.id(), dst_loc);
    auto it = const_copies_.find(key);
    if (it != const_copies_.end()) return it->second;
    proto::NodeDef* copy = parts_[dst_loc].add_node();
    *copy = full_.node(src.id());
    copy->set_name(FreshName(src.name()));
    copy->set_device(dst.assigned_device());
    copy->clear_input();
    for (const Node* c : src.control_inputs()) {
      if (locs_[c->id()] == dst_loc) copy->add_input("^" + c->name());
    }
    const_copies_.emplace(key, copy->name());
    return copy->name();
  }

  // True when an input of `dst` other than `control` and `except`, data or control,
  // runs after `control` (is it or one of its descendants).
  bool RunsAfter(const Node& dst, Node* control, const Node* except) {
    const std::vector<bool>* after = Descendants(control);
    if (after == nullptr) return false;
    for (const Output& in : dst.inputs()) {
      if (in.node != except && (*after)[in.node->id()]) return true;
    }
    for (const Node* c : dst.control_inputs()) {
      if (c != control && c != except && (*after)[c->id()]) return true;
    }
    return false;
  }

  // A remote control input that another input of `dst` already orders it after adds
  // no order and need not cross. The model_fn's control dependency on the global
  // step's read, which every node built in model_fn carries, then crosses to a
  // partition once per step.
  bool ImpliedByOtherInputs(Node* control, const Node& dst) {
    return RunsAfter(dst, control, nullptr);
  }

  // Nodes that run after `n` (itself included), by id; null past kMaxTracedControlSources
  // distinct sources, which bounds the work to that many walks of the graph.
  const std::vector<bool>* Descendants(Node* n) {
    auto it = descendants_.find(n->id());
    if (it != descendants_.end()) return &it->second;
    if (descendants_.size() >= kMaxTracedControlSources) return nullptr;
    std::vector<bool>& seen = descendants_[n->id()];
    seen.assign(graph_.num_nodes(), false);
    std::vector<Node*> stack = {n};
    seen[n->id()] = true;
    while (!stack.empty()) {
      Node* x = stack.back();
      stack.pop_back();
      auto visit = [&](Node* y) {
        if (!seen[y->id()]) {
          seen[y->id()] = true;
          stack.push_back(y);
        }
      };
      for (const auto& [consumer, slot] : x->out_edges()) visit(consumer);
      for (Node* consumer : x->out_control_edges()) visit(consumer);
    }
    return &seen;
  }

  // The _Recv in `dst`'s location of a dummy scalar made once every node of `sources`
  // (all in one other location) has run.
  absl::StatusOr<std::string> RecvForControl(std::vector<Node*> sources, const Node& dst) {
    std::sort(sources.begin(), sources.end(),
              [](const Node* a, const Node* b) { return a->id() < b->id(); });
    sources.erase(std::unique(sources.begin(), sources.end()), sources.end());
    std::vector<int> ids;
    for (const Node* n : sources) ids.push_back(n->id());
    auto key = std::make_pair(ids, locs_[dst.id()]);
    auto it = control_recvs_.find(key);
    if (it != control_recvs_.end()) return it->second;
    TANDEM_ASSIGN_OR_RETURN(std::string recv, RecvFor(Output(sources[0], -1), dst, sources));
    control_recvs_.emplace(key, recv);
    return recv;
  }

  // The _Recv in `dst`'s location for `src`, creating it and its _Send on first use.
  // For a control edge (src.index -1) a dummy Const waiting for `control_sources` is
  // sent instead.
  absl::StatusOr<std::string> RecvFor(const Output& src, const Node& dst,
                                      const std::vector<Node*>& control_sources = {}) {
    const std::string& dst_loc = locs_[dst.id()];
    auto key = std::make_tuple(src.node->id(), src.index, dst_loc);
    if (src.index >= 0) {
      auto it = recvs_.find(key);
      if (it != recvs_.end()) return it->second;
    }

    const Node& producer = *src.node;
    const std::string& send_device = producer.assigned_device();
    auto inc = options_.incarnations.find(send_device);
    if (inc == options_.incarnations.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot partition: no incarnation for device '", send_device, "' of node '",
          producer.name(), "', which sends to node '", dst.name(), "' on ", dst.assigned_device()));
    }
    const std::string tensor_name = absl::StrCat("edge_", next_edge_++, "_", producer.name());
    proto::GraphDef& src_part = parts_[locs_[producer.id()]];

    std::string sent = src.name();
    DType dtype = src.index >= 0 ? src.dtype() : DType::kFloat;
    PartialShape shape = src.index >= 0 ? src.shape() : PartialShape::Unknown(0);
    if (src.index < 0) {  // Control edge: send a dummy scalar that waits for the source.
      proto::NodeDef* dummy = src_part.add_node();
      dummy->set_name(FreshName(absl::StrCat("_ctrl/", tensor_name)));
      dummy->set_op("Const");
      dummy->set_device(send_device);
      for (const Node* c : control_sources) dummy->add_input("^" + c->name());
      SetAttr(dummy, "dtype", DType::kFloat);
      SetAttr(dummy, "value", Tensor::Scalar<float>(0.0f));
      sent = dummy->name() + ":0";
    }
    auto edge_attrs = [&](proto::NodeDef* nd) {
      SetAttr(nd, "tensor_name", tensor_name);
      SetAttr(nd, "send_device", send_device);
      SetAttr(nd, "send_device_incarnation", static_cast<int64_t>(inc->second));
      SetAttr(nd, "recv_device", dst.assigned_device());
      SetAttr(nd, "client_terminated", false);
    };
    proto::NodeDef* send = src_part.add_node();
    send->set_name(FreshName(absl::StrCat("_send/", tensor_name)));
    send->set_op("_Send");
    send->set_device(send_device);
    send->add_input(sent);
    SetAttr(send, "T", dtype);
    edge_attrs(send);

    proto::NodeDef* recv = parts_[dst_loc].add_node();
    recv->set_name(FreshName(absl::StrCat("_recv/", tensor_name)));
    recv->set_op("_Recv");
    recv->set_device(dst.assigned_device());
    SetAttr(recv, "tensor_type", dtype);
    SetAttr(recv, "shape", shape);
    edge_attrs(recv);
    if (src.index >= 0) recvs_.emplace(key, recv->name());
    return recv->name();
  }

  const Graph& graph_;
  const PartitionOptions& options_;
  proto::GraphDef full_;           // The whole graph; node i has id i.
  std::vector<std::string> locs_;  // By node id.
  std::map<std::string, proto::GraphDef> parts_;
  std::map<std::tuple<int, int, std::string>, std::string> recvs_;
  // (sorted control source ids, destination location) -> its _Recv.
  std::map<std::pair<std::vector<int>, std::string>, std::string> control_recvs_;
  // (Const id, destination location) -> the name of its copy there.
  std::map<std::pair<int, std::string>, std::string> const_copies_;
  // Control source id -> Descendants().
  absl::flat_hash_map<int, std::vector<bool>> descendants_;
  absl::flat_hash_set<std::string> names_;
  int next_edge_ = 0;
};

}  // namespace

std::string SplitByTask(const Node& node) {
  auto spec = DeviceSpec::Parse(node.assigned_device());
  if (!spec.ok()) return node.assigned_device();
  spec->type.reset();
  spec->id.reset();
  return spec->ToString();
}

absl::StatusOr<std::map<std::string, proto::GraphDef>> PartitionGraph(
    const Graph& graph, const PartitionOptions& options) {
  return Partitioner(graph, options).Run();
}

}  // namespace tandem

#include "framework/runtime/subgraph.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "framework/core/status.h"

namespace tandem {

absl::StatusOr<std::unique_ptr<Graph>> BuildExecutableGraph(const Graph& graph,
                                                            absl::Span<const std::string> feeds,
                                                            absl::Span<const std::string> fetches,
                                                            absl::Span<const std::string> targets) {
  absl::flat_hash_map<Output, int> fed;  // Endpoint -> feed index.
  std::vector<Output> feed_outputs;
  for (size_t i = 0; i < feeds.size(); ++i) {
    auto o = graph.FindOutput(feeds[i]);
    if (!o.ok()) return AnnotateStatus(o.status(), "feed");
    if (!fed.emplace(*o, static_cast<int>(i)).second) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", feeds[i], "' is fed twice"));
    }
    feed_outputs.push_back(*o);
  }
  std::vector<Output> fetch_outputs;
  std::vector<char> needed(graph.num_nodes(), 0);
  std::vector<int> stack;
  auto need = [&](Node* n) {
    if (!needed[n->id()]) {
      needed[n->id()] = 1;
      stack.push_back(n->id());
    }
  };
  for (const std::string& f : fetches) {
    auto o = graph.FindOutput(f);
    if (!o.ok()) return AnnotateStatus(o.status(), "fetch");
    fetch_outputs.push_back(*o);
    if (!fed.contains(*o)) need(o->node);
  }
  for (const std::string& t : targets) {
    std::string name = t;
    if (auto colon = name.rfind(':'); colon != std::string::npos) name.resize(colon);
    Node* n = graph.FindNode(name);
    if (n == nullptr) {
      return absl::NotFoundError(absl::StrCat("target '", t, "': no such node in the graph"));
    }
    need(n);
  }
  while (!stack.empty()) {
    const Node* n = graph.nodes()[stack.back()].get();
    stack.pop_back();
    for (const Output& in : n->inputs()) {
      if (!fed.contains(in)) need(in.node);
    }
    for (Node* c : n->control_inputs()) need(c);
  }

  auto out = std::make_unique<Graph>(graph.registry());
  std::vector<Node*> args(feed_outputs.size(), nullptr);
  auto arg_for = [&](const Output& o) -> absl::StatusOr<Output> {
    int i = fed.at(o);
    if (args[i] == nullptr) {
      NodeSpec spec;
      spec.name = absl::StrCat("_arg_", absl::StrReplaceAll(o.node->name(), {{"/", "_"}}), "_",
                               o.index, "_", i);
      spec.op = "_Arg";
      spec.attrs = {{"T", o.dtype()}, {"index", int64_t{i}}, {"shape", o.shape()}};
      TANDEM_ASSIGN_OR_RETURN(args[i], out->AddNode(std::move(spec)));
    }
    return Output(args[i], 0);
  };
  std::vector<Node*> mapped(graph.num_nodes(), nullptr);
  for (const auto& node : graph.nodes()) {  // Ids are topological.
    if (!needed[node->id()]) continue;
    NodeSpec spec;
    spec.name = node->name();
    spec.op = node->op();
    spec.attrs = node->attrs();
    spec.device = node->requested_device();
    for (const Output& in : node->inputs()) {
      if (fed.contains(in)) {
        TANDEM_ASSIGN_OR_RETURN(Output a, arg_for(in));
        spec.inputs.push_back(a);
      } else {
        spec.inputs.push_back(Output(mapped[in.node->id()], in.index));
      }
    }
    for (Node* c : node->control_inputs()) spec.control_inputs.push_back(mapped[c->id()]);
    TANDEM_ASSIGN_OR_RETURN(mapped[node->id()], out->AddNode(std::move(spec)));
    mapped[node->id()]->set_assigned_device(node->assigned_device());
  }
  for (size_t j = 0; j < fetch_outputs.size(); ++j) {
    const Output& f = fetch_outputs[j];
    Output src;
    if (fed.contains(f)) {
      TANDEM_ASSIGN_OR_RETURN(src, arg_for(f));
    } else {
      src = Output(mapped[f.node->id()], f.index);
    }
    NodeSpec spec;
    spec.name = absl::StrCat("_retval_", j);
    spec.op = "_Retval";
    spec.inputs = {src};
    spec.attrs = {{"T", f.dtype()}, {"index", static_cast<int64_t>(j)}};
    TANDEM_RETURN_IF_ERROR(out->AddNode(std::move(spec)).status());
  }
  // Every _Arg must exist even if nothing consumes it, so indices line up.
  for (size_t i = 0; i < feed_outputs.size(); ++i) {
    if (args[i] == nullptr) TANDEM_RETURN_IF_ERROR(arg_for(feed_outputs[i]).status());
  }
  return out;
}

std::string RunSignature(std::vector<std::string>& feeds, absl::Span<const std::string> fetches,
                         std::vector<std::string>& targets) {
  std::sort(feeds.begin(), feeds.end());
  std::sort(targets.begin(), targets.end());
  return absl::StrCat(absl::StrJoin(feeds, ","), "|", absl::StrJoin(fetches, ","), "|",
                      absl::StrJoin(targets, ","));
}

}  // namespace tandem

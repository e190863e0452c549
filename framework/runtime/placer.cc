#include "framework/runtime/placer.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/status.h"
#include "framework/kernels/kernel_registry.h"
#include "framework/runtime/runtime_kernels.h"

namespace tandem {
namespace {

struct Candidate {
  std::string name;
  DeviceSpec spec;
};

// Sort key: job, replica, task, type (GPU first), index.
auto Rank(const DeviceSpec& d) {
  return std::make_tuple(*d.job, *d.replica, *d.task, *d.type == "GPU" ? 0 : 1, *d.type, *d.id);
}

class UnionFind {
 public:
  explicit UnionFind(int n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  int Find(int x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  void Union(int a, int b) {
    a = Find(a);
    b = Find(b);
    if (a != b) parent_[std::max(a, b)] = std::min(a, b);
  }

 private:
  std::vector<int> parent_;
};

// The explicit device of a node: its assignment if it has one, else its request.
const std::string& ExplicitDevice(const Node& n) {
  return n.assigned_device().empty() ? n.requested_device() : n.assigned_device();
}

class GroupPlacer {
 public:
  GroupPlacer(std::vector<Candidate> devices, const DeviceSpec& default_spec,
              const PlacerOptions& options)
      : devices_(std::move(devices)), default_spec_(default_spec), options_(options) {
    for (const Candidate& c : devices_) types_.insert(*c.spec.type);
  }

  // The device for a group of `members` (ids into `graph`).
  absl::StatusOr<std::string> Place(const Graph& graph, const std::vector<int>& members) {
    DeviceSpec want;
    const Node* first_explicit = nullptr;
    for (int id : members) {
      const Node& n = *graph.nodes()[id];
      const std::string& dev = ExplicitDevice(n);
      if (dev.empty()) continue;
      auto spec = DeviceSpec::Parse(dev);
      if (!spec.ok()) {
        return AnnotateStatus(spec.status(), absl::StrCat("placing node '", n.name(), "'"));
      }
      if (first_explicit != nullptr && !want.IsCompatibleWith(*spec)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "cannot colocate node '", n.name(), "' (device '", dev, "') with node '",
            first_explicit->name(), "' (device '", ExplicitDevice(*first_explicit),
            "'): they are in one colocation group (\"_class\" or a resource edge) but their "
            "devices conflict"));
      }
      want.MergeFrom(*spec);
      if (first_explicit == nullptr) first_explicit = &n;
    }
    if (first_explicit == nullptr) {
      want = default_spec_;
    } else if (!want.job) {
      // A job-less request stays on the client's task.
      DeviceSpec task = default_spec_;
      task.type.reset();
      task.id.reset();
      task.MergeFrom(want);
      want = task;
    }
    const Candidate* found = FindDevice(graph, members, want);
    if (found == nullptr && options_.allow_soft_placement && (want.type || want.id)) {
      DeviceSpec relaxed = want;
      relaxed.type.reset();
      relaxed.id.reset();
      found = FindDevice(graph, members, relaxed);
    }
    if (found != nullptr) return found->name;
    const Node& culprit = first_explicit != nullptr ? *first_explicit : *graph.nodes()[members[0]];
    std::vector<std::string> names;
    for (const Candidate& c : devices_) names.push_back(c.name);
    std::string group;
    if (members.size() > 1) {
      std::vector<std::string> others;
      for (int id : members) others.push_back(graph.nodes()[id]->name());
      group = absl::StrCat(" (colocated with ", absl::StrJoin(others, ", "), ")");
    }
    return absl::InvalidArgumentError(
        absl::StrCat("cannot assign a device for node '", culprit.name(), "' (", culprit.op(), ")",
                     group, ": requested device '", ExplicitDevice(culprit), "' (resolved to '",
                     want.ToString(), "') matches no available device with kernels for its ops",
                     options_.allow_soft_placement ? "" : " (soft placement is off)",
                     "; available devices: [", absl::StrJoin(names, ", "), "]",
                     options_.device_filters.empty()
                         ? ""
                         : absl::StrCat(" after device filters [",
                                        absl::StrJoin(options_.device_filters, ", "), "]")));
  }

 private:
  bool Supports(const Graph& graph, const std::vector<int>& members, const std::string& type) {
    KernelRegistry* kernels = KernelRegistry::Global();
    for (int id : members) {
      const Node& node = *graph.nodes()[id];
      if (kernels->Supports(node, DeviceType{type})) continue;
      // A node no listed device type can run is left to the executor to report.
      bool anywhere = false;
      for (const std::string& t : types_) anywhere = anywhere || kernels->Supports(node, {t});
      if (anywhere) return false;
    }
    return true;
  }

  const Candidate* FindDevice(const Graph& graph, const std::vector<int>& members,
                              const DeviceSpec& want) {
    for (const Candidate& c : devices_) {
      if (want.Matches(c.spec) && Supports(graph, members, *c.spec.type)) return &c;
    }
    return nullptr;
  }

  std::vector<Candidate> devices_;  // Sorted by Rank.
  std::set<std::string> types_;
  DeviceSpec default_spec_;
  const PlacerOptions& options_;
};

}  // namespace

absl::Status PlaceGraph(Graph* graph, absl::Span<const std::string> devices,
                        const PlacerOptions& options) {
  EnsureKernels();
  std::vector<DeviceSpec> filters;
  for (const std::string& f : options.device_filters) {
    auto spec = DeviceSpec::Parse(f);
    if (!spec.ok()) return AnnotateStatus(spec.status(), "device filter");
    filters.push_back(*spec);
  }
  std::vector<Candidate> candidates;
  for (const std::string& name : devices) {
    auto spec = DeviceSpec::Parse(name);
    if (!spec.ok()) return AnnotateStatus(spec.status(), "device list");
    if (!spec->job || !spec->replica || !spec->task || !spec->type || !spec->id) {
      return absl::InvalidArgumentError(
          absl::StrCat("device list: '", name, "' is not a full device name"));
    }
    bool kept = filters.empty();
    for (const DeviceSpec& f : filters) kept = kept || f.Matches(*spec);
    if (kept) candidates.push_back({spec->ToString(), *spec});
  }
  if (candidates.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no device to place the graph on: ", devices.size(), " devices given, device filters [",
        absl::StrJoin(options.device_filters, ", "), "]"));
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& a, const Candidate& b) { return Rank(a.spec) < Rank(b.spec); });
  auto default_spec = DeviceSpec::Parse(options.default_device);
  if (!default_spec.ok()) return AnnotateStatus(default_spec.status(), "default device");

  // Colocation groups: "_class" names, and both ends of resource edges.
  const int n = graph->num_nodes();
  UnionFind groups(n);
  std::map<std::string, int> by_class;
  for (const auto& node : graph->nodes()) {
    for (const std::string& cls : node->ColocationGroups()) {
      if (Node* target = graph->FindNode(cls)) groups.Union(node->id(), target->id());
      auto [it, inserted] = by_class.emplace(cls, node->id());
      if (!inserted) groups.Union(node->id(), it->second);
    }
    for (const Output& in : node->inputs()) {
      if (in.dtype() == DType::kResource) groups.Union(node->id(), in.node->id());
    }
  }
  std::map<int, std::vector<int>> members;
  for (int id = 0; id < n; ++id) members[groups.Find(id)].push_back(id);

  GroupPlacer placer(std::move(candidates), *default_spec, options);
  std::vector<std::string> assigned(n);
  for (const auto& [root, ids] : members) {
    TANDEM_ASSIGN_OR_RETURN(std::string device, placer.Place(*graph, ids));
    for (int id : ids) assigned[id] = device;
  }
  // TensorFlow's heuristic A, widened: a generator (no inputs, e.g. a Const) with no
  // device of its own whose consumers are all on one device goes there, so that an
  // optimizer's hyper-parameters are not sent to the ps on every step.
  for (const auto& [root, ids] : members) {
    if (ids.size() != 1) continue;
    const Node& node = *graph->nodes()[ids[0]];
    if (!ExplicitDevice(node).empty() || node.num_inputs() > 0 || !node.control_inputs().empty() ||
        node.out_edges().empty() || !node.out_control_edges().empty() || node.num_outputs() != 1) {
      continue;
    }
    const std::string& consumer = assigned[node.out_edges()[0].first->id()];
    bool one_device = true;
    for (const auto& [c, slot] : node.out_edges()) one_device &= assigned[c->id()] == consumer;
    if (!one_device) continue;
    auto spec = DeviceSpec::Parse(consumer);
    if (spec.ok() && spec->type &&
        KernelRegistry::Global()->Supports(node, DeviceType{*spec->type})) {
      assigned[ids[0]] = consumer;
    }
  }
  for (int id = 0; id < n; ++id) graph->nodes()[id]->set_assigned_device(assigned[id]);
  return absl::OkStatus();
}

}  // namespace tandem

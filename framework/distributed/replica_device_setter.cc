// The replica device setter (see replica_device_setter.h).
#include "framework/distributed/replica_device_setter.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/graph/device_spec.h"
#include "glog/logging.h"

namespace tandem {
namespace {

// Colocation targets named in a spec's "_class" attr ("loc:@name").
std::vector<std::string> ColocationTargets(const NodeSpec& spec) {
  std::vector<std::string> names;
  auto it = spec.attrs.find("_class");
  if (it == spec.attrs.end()) return names;
  if (const auto* v = std::get_if<std::vector<std::string>>(&it->second)) {
    for (const std::string& s : *v) {
      if (s.rfind("loc:@", 0) == 0) names.push_back(s.substr(5));
    }
  }
  return names;
}

// The state of one device function (shared by its copies).
class Chooser {
 public:
  Chooser(int ps_tasks, DeviceSpec ps_device, DeviceSpec worker_device, bool merge_devices,
          std::vector<std::string> ps_ops, std::function<bool(const NodeSpec&)> is_ps_op,
          std::vector<int> task_ids, PsStrategy strategy, DeviceErrorSink on_error)
      : ps_tasks_(ps_tasks),
        ps_device_(std::move(ps_device)),
        worker_device_(std::move(worker_device)),
        merge_devices_(merge_devices),
        ps_ops_(ps_ops.begin(), ps_ops.end()),
        is_ps_op_(std::move(is_ps_op)),
        task_ids_(std::move(task_ids)),
        strategy_(std::move(strategy)),
        on_error_(std::move(on_error)) {}

  std::string Choose(const NodeSpec& spec) {
    std::string device = ChooseUncolocated(spec);
    for (const std::string& target : ColocationTargets(spec)) {
      if (std::optional<std::string> d = KnownDevice(spec, target)) {
        device = *d;
        break;
      }
    }
    placed_[spec.name] = device;
    return device;
  }

 private:
  // The device of colocation target `name`, if known.
  std::optional<std::string> KnownDevice(const NodeSpec& spec, const std::string& name) const {
    for (const Output& in : spec.inputs) {
      if (in.node != nullptr && in.node->name() == name) return in.node->requested_device();
    }
    auto it = placed_.find(name);
    if (it != placed_.end()) return it->second;
    return std::nullopt;
  }

  // TensorFlow's _ReplicaDeviceChooser.device_function.
  std::string ChooseUncolocated(const NodeSpec& spec) {
    if (!merge_devices_ && !spec.device.empty()) return spec.device;
    absl::StatusOr<DeviceSpec> current = DeviceSpec::Parse(spec.device);
    if (!current.ok()) {  // Scope::WithDevice validates, so only a hand-made spec.
      Fail(AnnotateStatus(current.status(), absl::StrCat("placing node '", spec.name, "'")));
      return spec.device;
    }
    if (ps_tasks_ > 0 && (is_ps_op_ ? is_ps_op_(spec) : ps_ops_.contains(spec.op))) {
      DeviceSpec ps = ps_device_;
      if (ps.job.has_value() && (!current->job.has_value() || *current->job == *ps.job)) {
        if (std::optional<int> task = NextTask(spec)) ps.task = *task;
      }
      ps.MergeFrom(*current);
      return ps.ToString();
    }
    DeviceSpec worker = worker_device_;
    worker.MergeFrom(*current);
    return worker.ToString();
  }

  std::optional<int> NextTask(const NodeSpec& spec) {
    absl::StatusOr<int> k = strategy_(spec);
    if (!k.ok()) {
      Fail(AnnotateStatus(k.status(), absl::StrCat("replica device setter: placing ", spec.op, " '",
                                                   spec.name, "'")));
      return std::nullopt;
    }
    if (*k < 0 || *k >= ps_tasks_) {
      Fail(absl::InvalidArgumentError(
          absl::StrCat("replica device setter: the ps strategy chose task ", *k, " for ", spec.op,
                       " '", spec.name, "', but there are ", ps_tasks_, " ps tasks")));
      return std::nullopt;
    }
    return task_ids_.empty() ? *k : task_ids_[*k];
  }

  void Fail(const absl::Status& s) {
    if (on_error_) {
      on_error_(s);
    } else {
      LOG(ERROR) << s;
    }
  }

  const int ps_tasks_;
  const DeviceSpec ps_device_;
  const DeviceSpec worker_device_;
  const bool merge_devices_;
  const absl::flat_hash_set<std::string> ps_ops_;
  const std::function<bool(const NodeSpec&)> is_ps_op_;  // Empty: ps_ops_ decides.
  const std::vector<int> task_ids_;  // Strategy index -> task id; empty: identity.
  PsStrategy strategy_;
  DeviceErrorSink on_error_;
  absl::flat_hash_map<std::string, std::string> placed_;  // Node name -> device.
};

}  // namespace

const std::vector<std::string>& StandardPsOps() {
  static const auto* ops = new std::vector<std::string>{
      "Variable",
      "VariableV2",
      "AutoReloadVariable",
      "MutableHashTable",
      "MutableHashTableV2",
      "MutableHashTableOfTensors",
      "MutableHashTableOfTensorsV2",
      "MutableDenseHashTable",
      "MutableDenseHashTableV2",
      "VarHandleOp",
      "BoostedTreesEnsembleResourceHandleOp",
      "BoostedTreesQuantileStreamResourceHandleOp",
      "ResourceConditionalAccumulator",
      "DecisionTree",
      "DecisionTreeResource",
      "TensorForestTreeResourceHandleOp",
      "TensorForestFertileStatsResourceHandleOp",
  };
  return *ops;
}

PsStrategy RoundRobinStrategy(int num_tasks) {
  CHECK_GE(num_tasks, 1);
  auto next = std::make_shared<int>(0);
  return [num_tasks, next](const NodeSpec&) -> absl::StatusOr<int> {
    int task = *next;
    *next = (*next + 1) % num_tasks;
    return task;
  };
}

PsStrategy GreedyLoadBalancingStrategy(int num_tasks, PsLoadFn load_fn) {
  CHECK_GE(num_tasks, 1);
  auto loads = std::make_shared<std::vector<double>>(num_tasks, 0.0);
  return [loads, load_fn = std::move(load_fn)](const NodeSpec& spec) -> absl::StatusOr<int> {
    TANDEM_ASSIGN_OR_RETURN(double load, load_fn(spec));
    int task = static_cast<int>(std::min_element(loads->begin(), loads->end()) - loads->begin());
    (*loads)[task] += load;
    return task;
  };
}

absl::StatusOr<double> ByteSizeLoadFn(const NodeSpec& spec) {
  auto fail = [&spec](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("byte size load of ", spec.op, " '", spec.name, "': ", why));
  };
  absl::StatusOr<DType> dtype = GetAttr<DType>(spec.attrs, "dtype");
  if (!dtype.ok()) return fail(dtype.status().message());
  PartialShape shape = GetAttrOr<PartialShape>(spec.attrs, "shape", PartialShape());
  if (!shape.IsFullyDefined()) {
    return fail(absl::StrCat("shape ", shape.DebugString(),
                             " is not fully defined; greedy placement needs the variable's size"));
  }
  return static_cast<double>(shape.num_elements()) * static_cast<double>(DTypeSize(*dtype));
}

absl::StatusOr<DeviceFunction> ReplicaDeviceSetter(const ReplicaDeviceSetterOptions& options,
                                                   DeviceErrorSink on_error) {
  auto context = [](absl::string_view what, absl::string_view value) {
    return absl::StrCat("replica device setter: ", what, " '", value, "'");
  };
  absl::StatusOr<DeviceSpec> ps_device = DeviceSpec::Parse(options.ps_device);
  if (!ps_device.ok()) {
    return AnnotateStatus(ps_device.status(), context("ps_device", options.ps_device));
  }
  absl::StatusOr<DeviceSpec> worker_device = DeviceSpec::Parse(options.worker_device);
  if (!worker_device.ok()) {
    return AnnotateStatus(worker_device.status(), context("worker_device", options.worker_device));
  }
  int ps_tasks = options.ps_tasks;
  std::vector<int> task_ids;
  if (options.cluster.has_value()) {
    // TF: the ps job is ps_device's job; no such job in the cluster -> None.
    if (!ps_device->job.has_value() || !options.cluster->HasJob(*ps_device->job)) {
      return DeviceFunction();
    }
    task_ids = options.cluster->TaskIndices(*ps_device->job);
    ps_tasks = static_cast<int>(task_ids.size());
  } else if (ps_tasks < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("replica device setter: ps_tasks must be >= 0, got ", ps_tasks));
  }
  if (ps_tasks == 0) return DeviceFunction();
  PsStrategy strategy = options.ps_strategy;
  if (!strategy) {
    strategy = options.placement == PsPlacement::kGreedyByteSize
                   ? GreedyLoadBalancingStrategy(ps_tasks, ByteSizeLoadFn)
                   : RoundRobinStrategy(ps_tasks);
  }
  auto chooser = std::make_shared<Chooser>(
      ps_tasks, *std::move(ps_device), *std::move(worker_device), options.merge_devices,
      options.ps_ops.empty() ? StandardPsOps() : options.ps_ops, options.is_ps_op,
      std::move(task_ids), std::move(strategy), std::move(on_error));
  return DeviceFunction([chooser](const NodeSpec& spec) { return chooser->Choose(spec); });
}

Scope WithReplicaDeviceSetter(const Scope& scope, const ReplicaDeviceSetterOptions& options) {
  // The sink holds a copy of the scope: its status is shared by every scope of the graph.
  absl::StatusOr<DeviceFunction> fn =
      ReplicaDeviceSetter(options, [scope](const absl::Status& s) { scope.UpdateStatus(s); });
  if (!fn.ok()) {
    scope.UpdateStatus(fn.status());
    return scope;
  }
  if (!*fn) return scope;
  return scope.WithDeviceFunction(*std::move(fn));
}

}  // namespace tandem

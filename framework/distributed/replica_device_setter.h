// framework/distributed/replica_device_setter.h
//
// The replica device setter of between-graph replication, as TensorFlow 1.x's
// tf.compat.v1.train.replica_device_setter: a DeviceFunction (framework/graph/scope.h)
// that puts every "ps op" (a variable handle, by default; see StandardPsOps) on a
// parameter-server task and every other op on this replica's worker device:
//
//   ReplicaDeviceSetterOptions o;
//   o.cluster = run_config.cluster();               // or o.ps_tasks = 2
//   o.worker_device = "/job:worker/task:1";
//   Scope model = WithReplicaDeviceSetter(root, o);  // build model_fn in `model`
//
// Rules, in TensorFlow's order, for a node whose scope asks for device `d` (possibly
// partial, possibly ""):
//  - merge_devices == false and `d` non-empty: `d` unchanged (TF's deprecated mode).
//  - ps op: ps_device; its task comes from the ps strategy when ps_device names a job
//    and `d` names no job or the same job; then the fields `d` sets win (TF's
//    merge_devices: the node's own requested fields override the setter's).
//  - any other op: worker_device with the fields of `d` winning.
// The strategy is asked only for ps ops that get a task, in creation order:
// round-robin (default, TF's _RoundRobinStrategy) or greedy by byte size (TF's
// GreedyLoadBalancingStrategy with byte_size_load_fn: the task with the least load so
// far, the first of equal ones, gets the op; load = elements of the "shape" attr times
// the size of "dtype").
//
// Colocation (an addition to TF's function, giving TF's end result): in TensorFlow,
// ops built under colocate_with(var) bypass the device functions and take var's
// device. tandem's Scope::AddNode calls the device function for colocated ops too
// (the spec then carries "_class" = ["loc:@var"]), so this function does TF's step
// itself: a node colocated with a node whose device it knows (a node it placed
// earlier, or an input of the node, e.g. the handle of a read, an assign, a
// ResourceGather or an optimizer's Apply* op) gets exactly that device. A node
// colocated with a node it does not know keeps the scope's device `d`, and the placer
// resolves the colocation group (explicit device > colocation > device function).
// Optimizer slots are built by Optimizer in a fresh scope colocated with their
// variable (no device function); they get no requested device and follow their
// variable through the colocation group at placement.
//
// Cluster: when options.cluster is set, the number of ps tasks is the number of tasks
// of ps_device's job in it, and the strategy's k-th task is the k-th task index of
// that job (so sparse TF_CONFIG task ids stay valid); a cluster without that job, or
// ps_tasks == 0, gives an empty DeviceFunction (TensorFlow returns None): no device
// function at all, the worker device is not applied either.
//
// Thread safety: the returned function keeps strategy state (round-robin position,
// loads, placed devices); use it from one graph-building thread at a time, like the
// Scope it is installed in.
#ifndef TANDEM_FRAMEWORK_DISTRIBUTED_REPLICA_DEVICE_SETTER_H_
#define TANDEM_FRAMEWORK_DISTRIBUTED_REPLICA_DEVICE_SETTER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "framework/distributed/cluster_spec.h"
#include "framework/graph/scope.h"

namespace tandem {

// TensorFlow's STANDARD_PS_OPS, plus tandem's variable op "VarHandleOp".
const std::vector<std::string>& StandardPsOps();

// Chooses the ps task, in [0, num_tasks), of a ps op about to be added.
using PsStrategy = std::function<absl::StatusOr<int>(const NodeSpec& spec)>;
// The load a ps op puts on its task (for GreedyLoadBalancingStrategy).
using PsLoadFn = std::function<absl::StatusOr<double>(const NodeSpec& spec)>;

// 0, 1, ..., num_tasks - 1, 0, ... REQUIRES: num_tasks >= 1.
PsStrategy RoundRobinStrategy(int num_tasks);
// The task with the smallest load so far (the lowest index among equal loads), whose
// load then grows by load_fn(spec). REQUIRES: num_tasks >= 1.
PsStrategy GreedyLoadBalancingStrategy(int num_tasks, PsLoadFn load_fn);
// Bytes of the variable an op creates: elements of attr "shape" times the size of
// attr "dtype". INVALID_ARGUMENT when the shape is not fully defined or the attrs are
// missing.
absl::StatusOr<double> ByteSizeLoadFn(const NodeSpec& spec);

enum class PsPlacement {
  kRoundRobin,      // TF's default.
  kGreedyByteSize,  // GreedyLoadBalancingStrategy(ps_tasks, ByteSizeLoadFn).
};

struct ReplicaDeviceSetterOptions {
  // Number of ps tasks; ignored when `cluster` is set.
  int ps_tasks = 0;
  std::string ps_device = "/job:ps";
  std::string worker_device = "/job:worker";
  bool merge_devices = true;
  // When set, ps_tasks is the number of tasks of ps_device's job in it.
  std::optional<ClusterSpec> cluster;
  // Op types placed on the ps; empty: StandardPsOps().
  std::vector<std::string> ps_ops;
  // When set, decides instead of ps_ops which nodes are ps ops (the hybrid strategy:
  // only the handles of tables, ops::kTableAttr).
  std::function<bool(const NodeSpec& spec)> is_ps_op;
  // Used when ps_strategy is null.
  PsPlacement placement = PsPlacement::kRoundRobin;
  // A custom strategy (returns a task in [0, ps_tasks)); overrides `placement`.
  PsStrategy ps_strategy;
};

// Receives errors found while placing a node (a strategy or load function failing).
using DeviceErrorSink = std::function<void(const absl::Status& status)>;

// The device function, or an empty one when there are no ps tasks (see above).
// INVALID_ARGUMENT for negative ps_tasks and malformed ps/worker device names.
// Errors while placing a node go to `on_error` (null: logged); the node then gets
// the device the rules give without a task from the strategy.
absl::StatusOr<DeviceFunction> ReplicaDeviceSetter(const ReplicaDeviceSetterOptions& options,
                                                   DeviceErrorSink on_error = nullptr);

// `scope` with the replica device setter installed; construction and placement
// errors are recorded in the scope (scope.status()). With no ps tasks the scope is
// returned unchanged.
Scope WithReplicaDeviceSetter(const Scope& scope, const ReplicaDeviceSetterOptions& options);

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_DISTRIBUTED_REPLICA_DEVICE_SETTER_H_

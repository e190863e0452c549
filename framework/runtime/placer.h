// framework/runtime/placer.h
//
// The placer gives every node of a Graph a full device name (Node::assigned_device)
// from a cluster's device list, as TensorFlow 1.x's master does. For each colocation
// group the device is chosen by these rules, in order:
//
//   1. Colocation groups: nodes naming the same "_class" entry ("loc:@v", as
//      Scope::ColocateWith writes it), the node named by it, and the two ends of every
//      resource-typed edge (a variable handle and the ops that read or update it) form
//      one group; every member lands on the same device. Members' explicit devices
//      must be compatible ("/job:ps" and "/job:ps/task:1" are; "/job:ps/task:0" and
//      "/job:ps/task:1" are not: INVALID_ARGUMENT naming both nodes and devices).
//   2. An explicit device (a node's requested device, or a device it was already
//      assigned) wins. A spec without a job ("/device:CPU:0") stays on the client's
//      task: it takes job, replica and task from `default_device`. A partial spec
//      ("/job:ps") is completed to the first matching device in the order
//      job, replica, task, type (GPU before CPU), index: the lowest task and index.
//   3. Otherwise the group goes to `default_device` (the client's task), except a
//      generator (no inputs, one output: a Const) whose consumers are all on one
//      device, which goes there (TensorFlow's heuristic A, for any number of
//      consumers).
//
// Only devices with a kernel for every node of the group qualify, for the node's op and
// dtype (a node with no kernel on any listed device type is not a constraint: the
// executor reports it). So on a GPU task a float32 variable and its updates go to the
// GPU while an int64 step counter stays on the CPU. With
// soft placement, a request that no device satisfies (a GPU on a CPU-only task) falls
// back to any qualifying device of the requested task (its CPU). Devices outside
// `device_filters` are never used. A group that cannot be placed is INVALID_ARGUMENT
// naming the node, its requested device and the available devices.
//
// Thread safety: PlaceGraph mutates `graph` and must not run concurrently with other
// users of it.
#ifndef TANDEM_FRAMEWORK_RUNTIME_PLACER_H_
#define TANDEM_FRAMEWORK_RUNTIME_PLACER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "framework/graph/graph.h"

namespace tandem {

struct PlacerOptions {
  // Device of nodes with no explicit device, usually the client's task
  // ("/job:worker/replica:0/task:0"); may be partial or empty (then the first device).
  std::string default_device;
  // A request no device satisfies falls back to a device of the requested task.
  bool allow_soft_placement = false;
  // Partial device specs ("/job:ps", "/job:worker/task:1"); when non-empty only
  // devices matching at least one are used (TensorFlow's ConfigProto.device_filters).
  std::vector<std::string> device_filters;
};

// Sets assigned_device on every node of `graph`, choosing among `devices` (full
// device names, e.g. "/job:ps/replica:0/task:0/device:CPU:0"). On error no node's
// assignment is changed.
absl::Status PlaceGraph(Graph* graph, absl::Span<const std::string> devices,
                        const PlacerOptions& options);

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_RUNTIME_PLACER_H_

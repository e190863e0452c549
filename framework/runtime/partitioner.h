// framework/runtime/partitioner.h
//
// The partitioner cuts a placed Graph (every node has an assigned device, see
// placer.h) into one GraphDef per location (a device, or a task with SplitByTask) and
// puts a _Send/_Recv pair on every edge that crosses locations, as TensorFlow's
// graph_partition does:
//
//   - One _Send per (source output, destination location) and one _Recv in that
//     location, shared by every consumer there: a tensor read by two nodes of another
//     partition crosses once.
//   - Control edges across locations: a node's control inputs from one other location
//     become a single scalar float Const there, control-dependent on all of them, sent
//     like a tensor; the received value is a control input of the node (a train op
//     waiting for N updates on a ps costs one transfer, not N). Nodes with the same
//     set of remote control inputs share it. A sink NoOp drops them instead
//     (PartitionOptions::drop_remote_control_into_sinks). A remote control input that
//     another input of the node already runs after (it, or a node downstream of it)
//     does not cross; nor do repeated ones. TensorFlow prunes such control inputs when
//     it builds the graph; here the model_fn's control dependency on the global
//     step's read reaches a partition once per step instead of once per node set.
//   - A small Const (up to 64 KiB) read in another location on a device of the same
//     type is copied there instead of sent every step (a learning rate, the global
//     step's increment), when each of its control inputs is in that location (the
//     copy keeps it) or one the consumer runs after through its other inputs (the
//     copy drops it).
//   - Tensor names are "edge_<k>_<source node>", unique in the graph and therefore
//     within a step; keys carry the sending device's incarnation (`incarnations`)
//     and the receiving device (the first consumer's device in that location).
//
// Each partition's NodeDefs keep their names and attrs, and get `device` set to the
// assigned device. The _Recv carries the shape of the sent tensor so that inference
// downstream keeps what it knew.
//
// Thread safety: PartitionGraph only reads `graph`; it may run concurrently with other
// readers.
#ifndef TANDEM_FRAMEWORK_RUNTIME_PARTITIONER_H_
#define TANDEM_FRAMEWORK_RUNTIME_PARTITIONER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "framework/graph/graph.h"
#include "framework/protos/graph.pb.h"

namespace tandem {

struct PartitionOptions {
  // The location (partition key) of a placed node; null: its assigned device.
  std::function<std::string(const Node&)> node_to_loc;
  // The incarnation of every device that sends across locations, by full device name.
  absl::flat_hash_map<std::string, uint64_t> incarnations;
  // A NoOp with no outgoing edges (a train op that is only a target) loses its control
  // inputs from other locations: nothing can observe when it runs, and a step ends
  // only when every partition has, so crossing would only cost a transfer per step.
  // Right only for callers that wait for every partition of a step, as the master
  // does.
  bool drop_remote_control_into_sinks = true;
};

// The task part of a node's assigned device ("/job:ps/replica:0/task:0"); use as
// PartitionOptions::node_to_loc to get one partition per task.
std::string SplitByTask(const Node& node);

// Location -> partition. FAILED_PRECONDITION names a node that is not placed;
// INVALID_ARGUMENT a sending device with no incarnation or a malformed device name.
absl::StatusOr<std::map<std::string, proto::GraphDef>> PartitionGraph(
    const Graph& graph, const PartitionOptions& options);

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_RUNTIME_PARTITIONER_H_

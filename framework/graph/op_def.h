// framework/graph/op_def.h
//
// OpDef describes an operation type: how many inputs it takes, its default attrs,
// whether it is stateful (never pruned as duplicate, never constant-folded) or cheap
// (run inline by the executor), whether it may see string tensors, and its inference
// function, which computes every output's dtype and (partial) shape from the inputs and
// attrs at graph-building time.
//
// InferenceContext is what an inference function sees. Its Error() helper builds the
// INVALID_ARGUMENT a user gets for a bad graph: it names the node, the op and every
// input shape, e.g.
//   node 'dense/MatMul' (MatMul): inner dimensions differ: 784 vs 100;
//   input shapes: [?,784], [100,10]
//
// Thread safety: OpDefs are immutable once registered.
#ifndef TANDEM_FRAMEWORK_GRAPH_OP_DEF_H_
#define TANDEM_FRAMEWORK_GRAPH_OP_DEF_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "framework/graph/attr_value.h"
#include "framework/tensor/tensor.h"

namespace tandem {

class InferenceContext;
using InferFn = std::function<absl::Status(InferenceContext& ctx)>;

struct OpDef {
  std::string name;
  int min_inputs = 0;
  int max_inputs = 0;  // -1: any number >= min_inputs.
  AttrMap default_attrs;
  bool stateful = false;
  bool cheap = false;
  InferFn infer;
  // May take or make string tensors. Graph::AddNode refuses a string input or output
  // of any other op: its kernels copy raw bytes, which would corrupt std::string objects.
  bool strings = false;
};

// What a resource output refers to (a variable's dtype and shape), so that reads of
// a handle infer their output shape.
struct HandleData {
  DType dtype = DType::kInvalid;
  PartialShape shape;
};

class InferenceContext {
 public:
  struct Input {
    DType dtype;
    PartialShape shape;
    const Tensor* constant = nullptr;  // Set when the input is a Const node's value.
    HandleData handle;                 // For resource inputs.
  };
  InferenceContext(std::string node_name, std::string op, const AttrMap* attrs,
                   std::vector<Input> inputs)
      : node_name_(std::move(node_name)),
        op_(std::move(op)),
        attrs_(attrs),
        inputs_(std::move(inputs)) {}

  const std::string& node_name() const { return node_name_; }
  const std::string& op() const { return op_; }
  const AttrMap& attrs() const { return *attrs_; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  DType input_dtype(int i) const { return inputs_[i].dtype; }
  const PartialShape& input_shape(int i) const { return inputs_[i].shape; }
  // The value of input i when it is a constant, else null.
  const Tensor* input_constant(int i) const { return inputs_[i].constant; }
  const HandleData& input_handle(int i) const { return inputs_[i].handle; }

  template <typename T>
  absl::StatusOr<T> GetAttr(absl::string_view name) const {
    auto v = tandem::GetAttr<T>(*attrs_, name);
    if (!v.ok()) return Error(v.status().message());
    return v;
  }

  // Appends an output.
  void AddOutput(DType dtype, PartialShape shape, HandleData handle = {}) {
    outputs_.push_back({dtype, std::move(shape), nullptr, std::move(handle)});
  }
  const std::vector<Input>& outputs() const { return outputs_; }
  // Removes output i: for an op whose outputs are another op's less one.
  void EraseOutput(int i) { outputs_.erase(outputs_.begin() + i); }

  // INVALID_ARGUMENT naming the node, the op and the input dtypes and shapes.
  absl::Status Error(absl::string_view message) const;
  // Checks input i has dtype `want`.
  absl::Status ExpectDType(int i, DType want) const;
  // Checks inputs i and j have equal dtypes.
  absl::Status ExpectSameDType(int i, int j) const;
  // Checks input i has rank `rank` (if known).
  absl::Status ExpectRank(int i, int rank) const;

 private:
  std::string node_name_;
  std::string op_;
  const AttrMap* attrs_;  // Not owned.
  std::vector<Input> inputs_;
  std::vector<Input> outputs_;
};

// Common inference functions.
namespace shape_fn {
// One output like input 0.
absl::Status Unchanged(InferenceContext& ctx);
// No outputs.
absl::Status NoOutputs(InferenceContext& ctx);
// A scalar output of input 0's dtype.
absl::Status ScalarOfInput0(InferenceContext& ctx);
// Numpy broadcasting of two partial shapes; error mentions both shapes.
absl::StatusOr<PartialShape> Broadcast(const InferenceContext& ctx, const PartialShape& a,
                                       const PartialShape& b);
}  // namespace shape_fn

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_GRAPH_OP_DEF_H_

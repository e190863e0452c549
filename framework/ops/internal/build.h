// framework/ops/internal/build.h
//
// Helpers for op builder functions (not for use outside framework/ops).
#ifndef TANDEM_FRAMEWORK_OPS_INTERNAL_BUILD_H_
#define TANDEM_FRAMEWORK_OPS_INTERNAL_BUILD_H_

#include <vector>

#include "absl/strings/string_view.h"
#include "framework/graph/scope.h"
#include "framework/ops/standard_ops.h"

namespace tandem::ops::internal {

// Adds a node (registering the standard ops first) and returns the node, or null
// with the error recorded in `scope`.
inline Node* BuildNode(const Scope& scope, absl::string_view op, std::vector<Output> inputs,
                       AttrMap attrs = {}, absl::string_view default_name = {}) {
  EnsureStandardOps();
  return scope.AddNode(op, default_name.empty() ? op : default_name, std::move(inputs),
                       std::move(attrs));
}

// As BuildNode, returning output 0 (invalid on error).
inline Output Build(const Scope& scope, absl::string_view op, std::vector<Output> inputs,
                    AttrMap attrs = {}, absl::string_view default_name = {}) {
  Node* n = BuildNode(scope, op, std::move(inputs), std::move(attrs), default_name);
  if (n == nullptr || n->num_outputs() == 0) return Output();
  return Output(n, 0);
}

// A scope for auxiliary nodes (shapes, constants): the same name scope, no op name.
inline Scope Aux(const Scope& scope) { return scope.NewSubScope(""); }

// All outputs of a node (empty on error).
inline std::vector<Output> AllOutputs(Node* n) {
  std::vector<Output> outs;
  if (n == nullptr) return outs;
  for (int i = 0; i < n->num_outputs(); ++i) outs.push_back(Output(n, i));
  return outs;
}

}  // namespace tandem::ops::internal

#endif  // TANDEM_FRAMEWORK_OPS_INTERNAL_BUILD_H_

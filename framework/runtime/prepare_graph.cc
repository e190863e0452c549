// framework/runtime/prepare_graph.cc
#include "framework/runtime/prepare_graph.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/status.h"
#include "framework/graph/op_registry.h"
#include "framework/runtime/remapper.h"
#include "glog/logging.h"

namespace tandem {

namespace {

// What the remapper's passes did, for the log; empty where they did nothing.
std::string Summary(const RemapReport& report) {
  std::vector<std::string> chains, parts;
  for (const auto& [chain, n] : report.fused) chains.push_back(absl::StrCat(chain, " x", n));
  if (!chains.empty()) {
    parts.push_back(
        absl::StrCat("Fused into one oneDNN primitive each: ", absl::StrJoin(chains, ", ")));
  }
  if (report.masks_before_pool_grad > 0) {
    parts.push_back(absl::StrCat("ReLU gradients masked before their MaxPoolGrad: ",
                                 report.masks_before_pool_grad));
  }
  if (report.bias_grads_before_pool_grad > 0) {
    parts.push_back(absl::StrCat("bias gradients summed before their MaxPoolGrad: ",
                                 report.bias_grads_before_pool_grad));
  }
  if (report.variables_read_as_bfloat16 > 0) {
    parts.push_back(absl::StrCat("variables read as the bfloat16 copies their updates write: ",
                                 report.variables_read_as_bfloat16));
  }
  if (report.filter_grads_of_pool_grad > 0) {
    parts.push_back(absl::StrCat("filter gradients routing their MaxPoolGrad image by image: ",
                                 report.filter_grads_of_pool_grad));
  }
  if (report.pools_inside_convs > 0) {
    parts.push_back(
        absl::StrCat("MaxPools computed inside their convolutions: ", report.pools_inside_convs));
  }
  if (report.pool_argmaxes_kept > 0) {
    parts.push_back(absl::StrCat("MaxPools keeping their argmax in place of the convolution: ",
                                 report.pool_argmaxes_kept));
  }
  if (report.gradients_computed_in_updates > 0) {
    parts.push_back(absl::StrCat("gradient MatMuls computed inside their updates: ",
                                 report.gradients_computed_in_updates));
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace

absl::StatusOr<proto::GraphDef> PrepareGraph(const proto::GraphDef& def, Precision precision,
                                             bool variables_on_cpu) {
  TANDEM_ASSIGN_OR_RETURN(proto::GraphDef typed, ApplyPrecision(def, precision));
  RemapReport report;
  TANDEM_ASSIGN_OR_RETURN(proto::GraphDef fused,
                          FuseBiasAndRelu(typed, OpRegistry::Global(), &report));
  TANDEM_ASSIGN_OR_RETURN(proto::GraphDef out,
                          MaskBeforeMaxPoolGrad(fused, OpRegistry::Global(), &report));
  TANDEM_ASSIGN_OR_RETURN(out, BiasGradBeforeMaxPoolGrad(out, OpRegistry::Global(), &report));
  if (variables_on_cpu) {
    TANDEM_ASSIGN_OR_RETURN(out, FilterGradOfMaxPoolGrad(out, OpRegistry::Global(), &report));
    TANDEM_ASSIGN_OR_RETURN(out, FuseConvAndMaxPool(out, OpRegistry::Global(), &report));
    TANDEM_ASSIGN_OR_RETURN(out, KeepPoolArgmax(out, OpRegistry::Global(), &report));
    TANDEM_ASSIGN_OR_RETURN(out, ReadVariablesAsBfloat16(out, OpRegistry::Global(), &report));
    TANDEM_ASSIGN_OR_RETURN(out, FuseGradientMatMulIntoApply(out, OpRegistry::Global(), &report));
  }
  static std::atomic<bool> logged{false};
  const std::string summary = Summary(report);
  if (!summary.empty() && !logged.exchange(true)) LOG(INFO) << summary;
  return out;
}

absl::StatusOr<proto::GraphDef> PreparedGraph::Prepare(const proto::GraphDef& extension) const {
  proto::GraphDef out;
  out.set_version(extension.version());
  const bool adds =
      std::any_of(extension.node().begin(), extension.node().end(),
                  [&](const proto::NodeDef& n) { return !given_names_.contains(n.name()); });
  if (!adds && !held_.empty()) return out;  // Nothing new: no copy, no passes.
  proto::GraphDef whole = given_;
  for (const proto::NodeDef& node : extension.node()) {
    if (!given_names_.contains(node.name())) *whole.add_node() = node;
  }
  TANDEM_ASSIGN_OR_RETURN(proto::GraphDef prepared,
                          PrepareGraph(whole, precision_, variables_on_cpu_));
  for (proto::NodeDef& node : *prepared.mutable_node()) {
    if (!held_.contains(node.name())) *out.add_node() = std::move(node);
  }
  return out;
}

void PreparedGraph::Commit(const proto::GraphDef& extension, const proto::GraphDef& prepared) {
  for (const proto::NodeDef& node : extension.node()) {
    if (given_names_.insert(node.name()).second) *given_.add_node() = node;
  }
  for (const proto::NodeDef& node : prepared.node()) held_.insert(node.name());
}

}  // namespace tandem

// framework/ops/summary_ops.cc
//
// The ScalarSummary op (definition, no-gradient mark) and the summary builders
// declared in summary_ops.h. The CPU kernel is in kernels/cpu/summary_kernels.cc.
//
// Decisions worth knowing:
//  - ScalarSummary(value): attrs "tag" (string, non-empty) and "T" (the input dtype:
//    float32, bfloat16, int32, int64 or uint8). Its output is the one element of the
//    input cast to float32, a scalar. Inference rejects an input with a known
//    dimension other than 1 (it can never hold exactly one element); the kernel
//    checks the element count of the value it gets.
//  - The node is named after the (deduplicated) tag, under the scope's name scope,
//    with characters a node name cannot hold replaced by '_'; the tag attr itself is
//    kept as given.
#include "framework/ops/summary_ops.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "framework/ops/gradients.h"
#include "framework/ops/internal/build.h"
#include "framework/ops/standard_ops.h"
#include "framework/ops/state_ops.h"

namespace tandem::ops {
namespace {

constexpr char kScalarSummaryOp[] = "ScalarSummary";

bool IsSummarizable(DType dtype) {
  return dtype == DType::kFloat || dtype == DType::kBFloat16 || dtype == DType::kInt32 ||
         dtype == DType::kInt64 || dtype == DType::kUInt8;
}

absl::Status InferScalarSummary(InferenceContext& ctx) {
  TANDEM_ASSIGN_OR_RETURN(std::string tag, ctx.GetAttr<std::string>("tag"));
  if (tag.empty()) return ctx.Error("attr 'tag' must not be empty");
  const DType dtype = ctx.input_dtype(0);
  if (!IsSummarizable(dtype)) {
    return ctx.Error(absl::StrCat("tag '", tag, "': cannot summarise a ", DTypeName(dtype),
                                  " tensor; expected float32, bfloat16, int32, int64 or uint8"));
  }
  DType t = GetAttrOr<DType>(ctx.attrs(), "T", dtype);
  if (t != dtype) {
    return ctx.Error(
        absl::StrCat("attr T is ", DTypeName(t), " but the input is ", DTypeName(dtype)));
  }
  const PartialShape& shape = ctx.input_shape(0);
  if (shape.known_rank()) {
    for (int64_t d : shape.dims()) {
      if (d >= 0 && d != 1) {
        return ctx.Error(absl::StrCat("tag '", tag,
                                      "': a scalar summary needs a tensor with exactly one "
                                      "element, got shape ",
                                      shape.DebugString()));
      }
    }
  }
  ctx.AddOutput(DType::kFloat, PartialShape({}));
  return absl::OkStatus();
}

// `tag` with characters outside [A-Za-z0-9_./-] replaced by '_' (a usable node name).
std::string NodeNameForTag(absl::string_view tag) {
  std::string name(tag);
  for (char& c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '/' || c == '-';
    if (!ok) c = '_';
  }
  // No empty path components ("a//b", leading or trailing '/').
  std::string out;
  for (char c : name) {
    if (c == '/' && (out.empty() || out.back() == '/')) continue;
    out.push_back(c);
  }
  while (!out.empty() && out.back() == '/') out.pop_back();
  return out.empty() ? std::string("summary") : out;
}

}  // namespace

void RegisterSummaryOps(OpRegistry* r) {
  r->Register({.name = kScalarSummaryOp,
               .min_inputs = 1,
               .max_inputs = 1,
               .cheap = true,
               .infer = InferScalarSummary});
}

void RegisterSummaryGradients(GradientRegistry* r) { r->RegisterNoGradient(kScalarSummaryOp); }

namespace summary {

Output Scalar(const Scope& scope, absl::string_view tag, Output value) {
  if (!scope.ok()) return Output();
  if (tag.empty()) {
    scope.UpdateStatus(absl::InvalidArgumentError("summary::Scalar: the tag must not be empty"));
    return Output();
  }
  if (!value.valid()) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat("summary::Scalar '", tag, "': the value is an invalid Output")));
    return Output();
  }
  Graph* graph = scope.graph();
  absl::flat_hash_set<std::string> used;
  for (const ScalarSummaryTensor& s : ScalarSummaries(*graph)) used.insert(s.tag);
  std::string unique(tag);
  for (int i = 1; used.contains(unique); ++i) unique = absl::StrCat(tag, "_", i);

  Node* node = internal::BuildNode(scope.WithOpName(NodeNameForTag(unique)), kScalarSummaryOp,
                                   {value}, {{"tag", unique}, {"T", value.dtype()}});
  if (node == nullptr) return Output();
  graph->AddToCollection(kSummaries, node->name());
  return Output(node, 0);
}

std::vector<ScalarSummaryTensor> ScalarSummaries(const Graph& graph) {
  std::vector<ScalarSummaryTensor> out;
  for (const std::string& name : graph.GetCollection(kSummaries)) {
    const Node* node = graph.FindNode(name);
    if (node == nullptr || node->op() != kScalarSummaryOp) continue;
    out.push_back({GetAttrOr<std::string>(node->attrs(), "tag", name), absl::StrCat(name, ":0")});
  }
  return out;
}

}  // namespace summary
}  // namespace tandem::ops

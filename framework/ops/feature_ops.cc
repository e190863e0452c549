// framework/ops/feature_ops.cc
//
// Op definitions, builders and gradients of the feature-column ops (feature_ops.h).
// Kernels: framework/kernels/cpu/feature_kernels.cc.
#include "framework/ops/feature_ops.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/ops/gradients.h"
#include "framework/ops/internal/build.h"
#include "framework/ops/standard_ops.h"

namespace tandem::ops {
namespace {

bool IsIdInput(DType d) { return d == DType::kInt64 || d == DType::kInt32; }

// The [batch, n] shape of categorical values given as [batch] or [batch, n].
absl::StatusOr<PartialShape> IdsShape(InferenceContext& ctx, int i) {
  const PartialShape& s = ctx.input_shape(i);
  if (!s.known_rank()) return PartialShape::Unknown(2);
  if (s.rank() == 1) return PartialShape({s.dim(0), 1});
  if (s.rank() == 2) return s;
  return ctx.Error(absl::StrCat("input ", i, " must be [batch] or [batch, n], has shape ",
                                s.DebugString()));
}

// Categorical transforms of one input: int64 ids of the input's [batch, n] shape.
absl::Status InferIdsFromValues(InferenceContext& ctx, bool strings_allowed,
                                bool floats_allowed) {
  const DType d = ctx.input_dtype(0);
  const bool ok = IsIdInput(d) || (strings_allowed && d == DType::kString) ||
                  (floats_allowed && d == DType::kFloat);
  if (!ok) {
    return ctx.Error(absl::StrCat("input must be ", strings_allowed ? "string or " : "",
                                  floats_allowed ? "float32 or " : "", "int32/int64, got ",
                                  DTypeName(d)));
  }
  TANDEM_ASSIGN_OR_RETURN(PartialShape shape, IdsShape(ctx, 0));
  ctx.AddOutput(DType::kInt64, shape);
  return absl::OkStatus();
}

absl::Status CheckPositive(InferenceContext& ctx, const char* attr) {
  TANDEM_ASSIGN_OR_RETURN(int64_t n, ctx.GetAttr<int64_t>(attr));
  if (n < 1) return ctx.Error(absl::StrCat(attr, " must be >= 1, got ", n));
  return absl::OkStatus();
}

absl::Status InferHash(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(CheckPositive(ctx, "num_buckets"));
  return InferIdsFromValues(ctx, /*strings_allowed=*/true, /*floats_allowed=*/false);
}

absl::Status InferVocabulary(InferenceContext& ctx) {
  TANDEM_ASSIGN_OR_RETURN(int64_t oov, ctx.GetAttr<int64_t>("num_oov_buckets"));
  if (oov < 0) return ctx.Error(absl::StrCat("num_oov_buckets must be >= 0, got ", oov));
  return InferIdsFromValues(ctx, true, false);
}

absl::Status InferIdentity(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(CheckPositive(ctx, "num_buckets"));
  return InferIdsFromValues(ctx, false, false);
}

absl::Status InferBucketize(InferenceContext& ctx) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<float> b, ctx.GetAttr<std::vector<float>>("boundaries"));
  if (!std::is_sorted(b.begin(), b.end()) ||
      std::adjacent_find(b.begin(), b.end()) != b.end()) {
    return ctx.Error("boundaries must be sorted and distinct");
  }
  return InferIdsFromValues(ctx, false, true);
}

absl::Status InferCross(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(CheckPositive(ctx, "num_buckets"));
  PartialShape batch = PartialShape::Unknown(2);
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const DType d = ctx.input_dtype(i);
    if (d != DType::kString && !IsIdInput(d)) {
      return ctx.Error(
          absl::StrCat("input ", i, " must be string or int32/int64, got ", DTypeName(d)));
    }
    TANDEM_RETURN_IF_ERROR(IdsShape(ctx, i).status());
  }
  const PartialShape& s0 = ctx.input_shape(0);
  ctx.AddOutput(DType::kInt64, PartialShape({s0.known_rank() ? s0.dim(0) : -1, -1}));
  return absl::OkStatus();
}

absl::Status ExpectIds(InferenceContext& ctx, int i) {
  if (ctx.input_dtype(i) != DType::kInt64) {
    return ctx.Error(absl::StrCat("input ", i, " (ids) must be int64, got ",
                                  DTypeName(ctx.input_dtype(i))));
  }
  return IdsShape(ctx, i).status();
}

// Optional weights: input `i` when the node has it, float32 of the ids' shape.
absl::Status ExpectWeights(InferenceContext& ctx, int i) {
  if (ctx.num_inputs() <= i) return absl::OkStatus();
  if (ctx.input_dtype(i) != DType::kFloat) {
    return ctx.Error(absl::StrCat("weights must be float32, got ", DTypeName(ctx.input_dtype(i))));
  }
  TANDEM_ASSIGN_OR_RETURN(PartialShape ids, IdsShape(ctx, 0));
  TANDEM_ASSIGN_OR_RETURN(PartialShape w, IdsShape(ctx, i));
  if (!ids.IsCompatibleWith(w)) {
    return ctx.Error(absl::StrCat("weights of shape ", ctx.input_shape(i).DebugString(),
                                  " do not match ids of shape ",
                                  ctx.input_shape(0).DebugString()));
  }
  return absl::OkStatus();
}

absl::Status InferPrepareBag(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ExpectIds(ctx, 0));
  TANDEM_RETURN_IF_ERROR(ExpectWeights(ctx, 1));
  TANDEM_ASSIGN_OR_RETURN(std::string combiner, ctx.GetAttr<std::string>("combiner"));
  if (combiner != "sum" && combiner != "mean" && combiner != "sqrtn") {
    return ctx.Error(absl::StrCat("combiner must be sum, mean or sqrtn, got ", combiner));
  }
  ctx.AddOutput(DType::kInt64, PartialShape({-1}));  // unique_ids
  ctx.AddOutput(DType::kInt32, PartialShape({-1}));  // index
  ctx.AddOutput(DType::kInt32, PartialShape({-1}));  // segment
  ctx.AddOutput(DType::kFloat, PartialShape({-1}));  // scale
  return absl::OkStatus();
}

// BagCombine(rows [u, d], index, segment, scale, ids) -> [batch, d].
absl::Status InferBagCombine(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ctx.ExpectDType(0, DType::kFloat));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(0, 2));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectDType(1, DType::kInt32));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectDType(2, DType::kInt32));
  TANDEM_RETURN_IF_ERROR(ctx.ExpectDType(3, DType::kFloat));
  const PartialShape& rows = ctx.input_shape(0);
  const PartialShape& ids = ctx.input_shape(4);
  ctx.AddOutput(DType::kFloat, PartialShape({ids.known_rank() && ids.rank() >= 1 ? ids.dim(0) : -1,
                                             rows.known_rank() ? rows.dim(1) : -1}));
  return absl::OkStatus();
}

// BagCombineGrad(grad [batch, d], index, segment, scale, rows) -> [u, d] like rows.
absl::Status InferBagCombineGrad(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(ctx.ExpectDType(0, DType::kFloat));
  ctx.AddOutput(DType::kFloat, ctx.input_shape(4));
  return absl::OkStatus();
}

absl::Status InferMultiHot(InferenceContext& ctx) {
  TANDEM_RETURN_IF_ERROR(CheckPositive(ctx, "depth"));
  TANDEM_RETURN_IF_ERROR(ExpectIds(ctx, 0));
  TANDEM_RETURN_IF_ERROR(ExpectWeights(ctx, 1));
  TANDEM_ASSIGN_OR_RETURN(int64_t depth, ctx.GetAttr<int64_t>("depth"));
  const PartialShape& s = ctx.input_shape(0);
  ctx.AddOutput(DType::kFloat, PartialShape({s.known_rank() ? s.dim(0) : -1, depth}));
  return absl::OkStatus();
}

absl::Status InferIdsToStrings(InferenceContext& ctx) {
  if (!IsIdInput(ctx.input_dtype(0))) {
    return ctx.Error(
        absl::StrCat("ids must be int32/int64, got ", DTypeName(ctx.input_dtype(0))));
  }
  ctx.AddOutput(DType::kString, ctx.input_shape(0));
  return absl::OkStatus();
}

absl::Status BagCombineGrad(const Scope& scope, const Node& node,
                            const std::vector<Output>& dy, std::vector<Output>* dx) {
  Output rows_grad = internal::Build(scope, "BagCombineGrad",
                                     {dy[0], node.input(1), node.input(2), node.input(3),
                                      node.input(0)});
  dx->push_back(rows_grad);
  for (int i = 1; i < node.num_inputs(); ++i) dx->push_back(Output());
  return absl::OkStatus();
}

const char* CombinerName(Combiner c) {
  switch (c) {
    case Combiner::kSum:
      return "sum";
    case Combiner::kMean:
      return "mean";
    case Combiner::kSqrtn:
      return "sqrtn";
  }
  return "sum";
}

}  // namespace

void RegisterFeatureOps(OpRegistry* r) {
  r->Register({.name = "CategoricalHash",
               .min_inputs = 1,
               .max_inputs = 1,
               .infer = InferHash,
               .strings = true});
  r->Register({.name = "CategoricalVocabulary",
               .min_inputs = 1,
               .max_inputs = 1,
               .default_attrs = {{"num_oov_buckets", int64_t{0}},
                                 {"default_value", int64_t{-1}},
                                 {"unknown_is_error", false}},
               .infer = InferVocabulary,
               .strings = true});
  r->Register({.name = "CategoricalIdentity",
               .min_inputs = 1,
               .max_inputs = 1,
               .default_attrs = {{"has_default", false}, {"default_value", int64_t{-1}}},
               .infer = InferIdentity});
  r->Register({.name = "CategoricalBucketize",
               .min_inputs = 1,
               .max_inputs = 1,
               .infer = InferBucketize});
  r->Register({.name = "CategoricalCross",
               .min_inputs = 1,
               .max_inputs = -1,
               .default_attrs = {{"hash_key", kCrossHashKey}},
               .infer = InferCross,
               .strings = true});
  r->Register({.name = "PrepareBag",
               .min_inputs = 1,
               .max_inputs = 2,
               .default_attrs = {{"combiner", std::string("sum")}},
               .infer = InferPrepareBag});
  r->Register(
      {.name = "BagCombine", .min_inputs = 5, .max_inputs = 5, .infer = InferBagCombine});
  r->Register({.name = "BagCombineGrad",
               .min_inputs = 5,
               .max_inputs = 5,
               .infer = InferBagCombineGrad});
  r->Register({.name = "MultiHot", .min_inputs = 1, .max_inputs = 2, .infer = InferMultiHot});
  r->Register({.name = "IdsToStrings",
               .min_inputs = 1,
               .max_inputs = 1,
               .infer = InferIdsToStrings,
               .strings = true});
}

void RegisterFeatureGradients(GradientRegistry* r) {
  for (const char* op : {"CategoricalHash", "CategoricalVocabulary", "CategoricalIdentity",
                         "CategoricalBucketize", "CategoricalCross", "PrepareBag", "MultiHot",
                         "IdsToStrings", "BagCombineGrad"}) {
    r->RegisterNoGradient(op);
  }
  r->Register("BagCombine", BagCombineGrad);
}

Output CategoricalHash(const Scope& scope, Output input, int64_t num_buckets) {
  return internal::Build(scope, "CategoricalHash", {input}, {{"num_buckets", num_buckets}});
}

Output CategoricalVocabulary(const Scope& scope, Output input,
                             const std::vector<std::string>& vocabulary,
                             const VocabularyOptions& options) {
  return internal::Build(scope, "CategoricalVocabulary", {input},
                         {{"vocabulary", vocabulary},
                          {"num_oov_buckets", options.num_oov_buckets},
                          {"default_value", options.default_value},
                          {"unknown_is_error", options.unknown_is_error}});
}

Output CategoricalIdentity(const Scope& scope, Output input, int64_t num_buckets,
                           bool has_default, int64_t default_value) {
  return internal::Build(scope, "CategoricalIdentity", {input},
                         {{"num_buckets", num_buckets},
                          {"has_default", has_default},
                          {"default_value", default_value}});
}

Output CategoricalBucketize(const Scope& scope, Output input,
                            const std::vector<float>& boundaries) {
  return internal::Build(scope, "CategoricalBucketize", {input}, {{"boundaries", boundaries}});
}

Output CategoricalCross(const Scope& scope, const std::vector<Output>& inputs, int64_t num_buckets,
                        int64_t hash_key) {
  return internal::Build(scope, "CategoricalCross", inputs,
                         {{"num_buckets", num_buckets}, {"hash_key", hash_key}});
}

BagPlan PrepareBag(const Scope& scope, Output ids, Output weights, Combiner combiner) {
  std::vector<Output> inputs = {ids};
  if (weights.valid()) inputs.push_back(weights);
  Node* n = internal::BuildNode(scope, "PrepareBag", inputs,
                                {{"combiner", std::string(CombinerName(combiner))}});
  BagPlan plan;
  if (n == nullptr) return plan;
  plan.unique_ids = Output(n, 0);
  plan.index = Output(n, 1);
  plan.segment = Output(n, 2);
  plan.scale = Output(n, 3);
  plan.ids = ids;
  return plan;
}

Output BagCombine(const Scope& scope, Output rows, const BagPlan& plan) {
  return internal::Build(scope, "BagCombine",
                         {rows, plan.index, plan.segment, plan.scale, plan.ids});
}

Output MultiHot(const Scope& scope, Output ids, Output weights, int64_t depth) {
  std::vector<Output> inputs = {ids};
  if (weights.valid()) inputs.push_back(weights);
  return internal::Build(scope, "MultiHot", inputs, {{"depth", depth}});
}

Output IdsToStrings(const Scope& scope, Output ids, const std::vector<std::string>& vocabulary) {
  return internal::Build(scope, "IdsToStrings", {ids}, {{"vocabulary", vocabulary}});
}

}  // namespace tandem::ops

// framework/ops/embedding_ops.cc
//
// Op definitions, builders and gradients of PartitionIds and StitchRows
// (embedding_ops.h). Kernels: framework/kernels/cpu/partition_kernels.cc.
#include "framework/ops/embedding_ops.h"

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/gradients.h"
#include "framework/ops/internal/build.h"
#include "framework/ops/standard_ops.h"

namespace tandem::ops {
namespace {

absl::Status InferPartitionIds(InferenceContext& ctx) {
  const DType d = ctx.input_dtype(0);
  if (d != DType::kInt32 && d != DType::kInt64) {
    return ctx.Error(absl::StrCat("ids must be int32 or int64, got ", DTypeName(d)));
  }
  TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(0, 1));
  TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> rows,
                          ctx.GetAttr<std::vector<int64_t>>("part_rows"));
  TANDEM_ASSIGN_OR_RETURN(std::string strategy, ctx.GetAttr<std::string>("strategy"));
  if (strategy != "mod" && strategy != "div") {
    return ctx.Error(absl::StrCat("strategy must be \"mod\" or \"div\", got \"", strategy, "\""));
  }
  if (rows.empty() || rows.size() > 1 << 16) {
    return ctx.Error(absl::StrCat("part_rows must name 1 to 65536 parts, got ", rows.size()));
  }
  for (int64_t r : rows) {
    if (r < 1) return ctx.Error(absl::StrCat("a part has ", r, " rows"));
  }
  for (size_t p = 0; p < rows.size(); ++p) ctx.AddOutput(d, PartialShape({-1}));
  for (size_t p = 0; p < rows.size(); ++p) ctx.AddOutput(DType::kInt32, PartialShape({-1}));
  return absl::OkStatus();
}

// StitchRows(positions_0..k-1, rows_0..k-1) -> [n, row...].
absl::Status InferStitchRows(InferenceContext& ctx) {
  if (ctx.num_inputs() % 2 != 0) {
    return ctx.Error(absl::StrCat("takes positions and rows of each part: an even number of "
                                  "inputs, got ", ctx.num_inputs()));
  }
  const int k = ctx.num_inputs() / 2;
  PartialShape row;
  for (int p = 0; p < k; ++p) {
    TANDEM_RETURN_IF_ERROR(ctx.ExpectDType(p, DType::kInt32));
    TANDEM_RETURN_IF_ERROR(ctx.ExpectRank(p, 1));
    if (ctx.input_dtype(k + p) != ctx.input_dtype(k)) {
      return ctx.Error("every part's rows must have one dtype");
    }
    const PartialShape& s = ctx.input_shape(k + p);
    if (!s.known_rank()) continue;
    if (s.rank() < 1) return ctx.Error("rows must have rank >= 1");
    PartialShape tail(absl::MakeConstSpan(s.dims().data() + 1, s.rank() - 1));
    if (!row.known_rank()) {
      row = tail;
    } else {
      TANDEM_ASSIGN_OR_RETURN(row, row.Merge(tail));
    }
  }
  if (!row.known_rank()) {
    ctx.AddOutput(ctx.input_dtype(k), PartialShape::UnknownRank());
    return absl::OkStatus();
  }
  Dims dims = {-1};
  dims.insert(dims.end(), row.dims().begin(), row.dims().end());
  ctx.AddOutput(ctx.input_dtype(k), PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

absl::Status StitchRowsGrad(const Scope& scope, const Node& node, const std::vector<Output>& dy,
                            std::vector<Output>* dx) {
  const int k = node.num_inputs() / 2;
  for (int p = 0; p < k; ++p) dx->push_back(Output());
  for (int p = 0; p < k; ++p) dx->push_back(Gather(scope, dy[0], node.input(p)));
  return absl::OkStatus();
}

}  // namespace

void RegisterEmbeddingOps(OpRegistry* r) {
  r->Register({.name = "PartitionIds",
               .min_inputs = 1,
               .max_inputs = 1,
               .default_attrs = {{"strategy", std::string("mod")}},
               .infer = InferPartitionIds});
  r->Register({.name = "StitchRows", .min_inputs = 2, .max_inputs = -1, .infer = InferStitchRows});
}

void RegisterEmbeddingGradients(GradientRegistry* r) {
  r->RegisterNoGradient("PartitionIds");
  r->Register("StitchRows", StitchRowsGrad);
}

PartitionedIds PartitionIds(const Scope& scope, Output ids, const std::vector<int64_t>& part_rows,
                            absl::string_view strategy) {
  Node* n = internal::BuildNode(scope, "PartitionIds", {ids},
                                {{"part_rows", part_rows}, {"strategy", std::string(strategy)}});
  PartitionedIds out;
  if (n == nullptr) return out;
  const int k = static_cast<int>(part_rows.size());
  for (int p = 0; p < k; ++p) {
    out.local_ids.push_back(Output(n, p));
    out.positions.push_back(Output(n, k + p));
  }
  return out;
}

Output StitchRows(const Scope& scope, const std::vector<Output>& positions,
                  const std::vector<Output>& rows) {
  std::vector<Output> inputs = positions;
  inputs.insert(inputs.end(), rows.begin(), rows.end());
  return internal::Build(scope, "StitchRows", inputs);
}

Output PartitionedRows(const Scope& scope, const std::vector<Variable>& parts, Output ids,
                       absl::string_view strategy) {
  if (parts.empty()) {
    scope.UpdateStatus(absl::InvalidArgumentError("PartitionedRows: no parts"));
    return Output();
  }
  const DType dtype = parts[0].dtype();
  if (parts.size() == 1) {
    return ResourceGather(scope.ColocateWith(parts[0].handle().node), parts[0].handle(), ids,
                          dtype);
  }
  std::vector<int64_t> rows;
  for (const Variable& v : parts) {
    if (!v.shape().known_rank() || v.shape().rank() < 1 || v.shape().dim(0) < 1) {
      scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
          "PartitionedRows: part ", v.name(), " has no known rows: ", v.shape().DebugString())));
      return Output();
    }
    rows.push_back(v.shape().dim(0));
  }
  PartitionedIds split = PartitionIds(scope.WithOpName("partition_ids"), ids, rows, strategy);
  if (split.local_ids.empty()) return Output();
  std::vector<Output> gathered;
  for (size_t p = 0; p < parts.size(); ++p) {
    gathered.push_back(ResourceGather(scope.ColocateWith(parts[p].handle().node)
                                          .WithOpName(absl::StrCat("part_", p, "/Gather")),
                                      parts[p].handle(), split.local_ids[p], dtype));
  }
  return StitchRows(scope.WithOpName("stitch"), split.positions, gathered);
}

}  // namespace tandem::ops

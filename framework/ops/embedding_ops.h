// framework/ops/embedding_ops.h
//
// Row-exact lookups in a table split into parts (partitioned_variables.h): each id goes
// to the one part that holds it, so each part gathers only its own ids and each part's
// gradient holds only its own rows (TensorFlow's DynamicPartition / DynamicStitch pair,
// fused for ids):
//
//   PartitionIds(ids, part_rows, strategy)  splits a vector of ids by part: for part p,
//       local_ids[p] (the rows in part p, in the order the ids came) and positions[p]
//       (where each came from in `ids`). "mod": id in part id % n at row id / n; "div":
//       the parts hold contiguous ranges, part_rows[p] rows each. An id outside the
//       table (negative, or past the last row) is INVALID_ARGUMENT naming it, as a
//       gather's.
//   StitchRows(positions, rows)  the inverse: row i of rows[p] goes to row positions[p][i]
//       of the result; the positions must cover 0..n-1 once each. Its gradient for rows[p]
//       is the result gradient's rows positions[p], so a part's gather gets a sparse
//       gradient of just its rows.
//
// PartitionedRows(scope, parts, ids, strategy) puts them together: the table's rows for
// `ids`, [len(ids), row...], one ResourceGather per part colocated with it. Callers
// deduplicate ids first (Unique; the feature columns' PrepareBag), so each row crosses
// the network once per step.
//
// Thread safety: graph building, one thread.
#ifndef TANDEM_FRAMEWORK_OPS_EMBEDDING_OPS_H_
#define TANDEM_FRAMEWORK_OPS_EMBEDDING_OPS_H_

#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "framework/graph/scope.h"
#include "framework/ops/state_ops.h"

namespace tandem::ops {

struct PartitionedIds {
  std::vector<Output> local_ids;  // Per part: same dtype as the ids.
  std::vector<Output> positions;  // Per part: int32.
};
// `ids`: an int32/int64 vector; `part_rows`: each part's row count (> 0).
PartitionedIds PartitionIds(const Scope& scope, Output ids, const std::vector<int64_t>& part_rows,
                            absl::string_view strategy);
Output StitchRows(const Scope& scope, const std::vector<Output>& positions,
                  const std::vector<Output>& rows);

// The rows of the table split into `parts` (axis 0) for the id vector `ids`.
Output PartitionedRows(const Scope& scope, const std::vector<Variable>& parts, Output ids,
                       absl::string_view strategy);

}  // namespace tandem::ops

#endif  // TANDEM_FRAMEWORK_OPS_EMBEDDING_OPS_H_

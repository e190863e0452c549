// framework/ops/gradient_rows.h
//
// GradientRows: some rows of a variable's gradient, the form in which the strategies
// move a sparse gradient between tasks (the sync-replicas accumulators, the collective
// all-gather): row indices[i] of the gradient is the sum of values[j] over every j with
// indices[j] == indices[i]; rows not named are zero. The dense shape is the variable's.
#ifndef TANDEM_FRAMEWORK_OPS_GRADIENT_ROWS_H_
#define TANDEM_FRAMEWORK_OPS_GRADIENT_ROWS_H_

#include "framework/graph/scope.h"

namespace tandem::ops {

struct GradientRows {
  Output indices;  // int32 or int64 [n].
  Output values;   // float32 [n, var.shape[1:]...].
};

}  // namespace tandem::ops

#endif  // TANDEM_FRAMEWORK_OPS_GRADIENT_ROWS_H_

// estimator/internal/warm_start.h
//
// Warm start (tf.estimator.WarmStartSettings) as a Scaffold init_fn: when variables
// are initialised rather than restored, the variables matching vars_to_warm_start
// (anchored at the start of the name, as TensorFlow's re.match) take their values from
// ckpt_to_initialize_from, looked up under var_name_to_prev_var_name's name when it
// maps them. The source is
//   - a tandem checkpoint: a model_dir (its latest checkpoint) or a prefix, CRCs
//     required; or
//   - a plain .safetensors file from any writer (Python's safetensors, PyTorch, JAX):
//     tandem's CRCs are checked when present; without them the file is still fully
//     validated (header bounds, dtypes, shapes, offsets) before any value is used.
// Every value is read and checked (present, dtype, shape) before the first variable is
// assigned, so a bad source leaves the session untouched. A map entry that names no
// warm-started variable is an error (TensorFlow's rule), as is a bad regex.
// A part of a partitioned variable (ops::PartitionedVariable) is matched and mapped by
// its logical variable's name and cut from that whole tensor, so the source may be
// partitioned in any way, or not at all.
//
// Thread safety: the returned function runs once per session creation.
#ifndef TANDEM_ESTIMATOR_INTERNAL_WARM_START_H_
#define TANDEM_ESTIMATOR_INTERNAL_WARM_START_H_

#include <functional>

#include "absl/status/status.h"
#include "estimator/estimator.h"

namespace tandem::internal {

// INVALID_ARGUMENT for a bad regex or an empty source.
absl::Status ValidateWarmStart(const WarmStartSettings& ws);

std::function<absl::Status(Session*)> WarmStartFn(Graph* graph, WarmStartSettings ws);

}  // namespace tandem::internal

#endif  // TANDEM_ESTIMATOR_INTERNAL_WARM_START_H_

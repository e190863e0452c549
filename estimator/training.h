// estimator/training.h
//
// train_and_evaluate (tf.estimator.train_and_evaluate), the local form: train until
// TrainSpec::max_steps, evaluating after each checkpoint save (except the one made when
// the session is created) when at least throttle_secs passed since the last
// evaluation, and once more at the end unless the last checkpoint was just evaluated.
// As in TensorFlow, start_delay_secs applies to a separate evaluator task only. The
// distributed roles (chief, worker, ps, evaluator from TF_CONFIG) are not wired to the
// distributed runtime yet; for them this returns UNIMPLEMENTED naming the task type.
//
// Thread safety: one call at a time per Estimator.
#ifndef TANDEM_ESTIMATOR_TRAINING_H_
#define TANDEM_ESTIMATOR_TRAINING_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "estimator/estimator.h"

namespace tandem {

struct TrainSpec {
  InputFn input_fn;
  std::optional<int64_t> max_steps;  // Unset: until the input ends.
  std::vector<std::shared_ptr<SessionRunHook>> hooks;
};

struct EvalSpec {
  InputFn input_fn;
  std::optional<int64_t> steps = 100;  // Unset: until the input ends.
  std::string name;
  std::vector<std::shared_ptr<SessionRunHook>> hooks;
  int64_t start_delay_secs = 120;
  int64_t throttle_secs = 600;
};

// Returns the final evaluation.
absl::StatusOr<EvalResult> TrainAndEvaluate(Estimator& estimator, const TrainSpec& train_spec,
                                            const EvalSpec& eval_spec);

}  // namespace tandem

#endif  // TANDEM_ESTIMATOR_TRAINING_H_

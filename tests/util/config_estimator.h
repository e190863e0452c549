// tests/util/config_estimator.h
//
// ConfiguredEstimator: a job config's model and Estimator, made as the trainer makes
// them (the model from the registry with the job, EstimatorOptions from the config),
// for tests that train shipped or inline configs through the Estimator; and
// TrainThenEvaluate, the accuracy tests' run.
#ifndef TANDEM_TESTS_UTIL_CONFIG_ESTIMATOR_H_
#define TANDEM_TESTS_UTIL_CONFIG_ESTIMATOR_H_

#include <chrono>
#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "estimator/estimator.h"
#include "framework/core/status.h"

namespace tandem::testing {

struct ConfiguredEstimator {
  JobConfig job;
  std::unique_ptr<Model> model;
  std::unique_ptr<Estimator> estimator;
  // Every mode's input, as the trainer binds it.
  InputFn input() const { return BindInputFn(model.get(), &job); }
};

// Heap-held, so that input()'s pointer to the job stays valid.
inline absl::StatusOr<std::unique_ptr<ConfiguredEstimator>> MakeConfiguredEstimator(
    JobConfig job, const ModelRegistry& registry) {
  auto c = std::make_unique<ConfiguredEstimator>();
  c->job = std::move(job);
  TANDEM_ASSIGN_OR_RETURN(c->model, registry.Create(c->job.model.name, c->job));
  EstimatorOptions eo;
  eo.model_fn = BindModelFn(c->model.get());
  eo.config = c->job.run_config();
  eo.params = c->job.model;
  TANDEM_ASSIGN_OR_RETURN(c->estimator, Estimator::Create(eo));
  return c;
}

// Trains to the job's [train] max_steps, then evaluates the whole eval input: the
// global step reached, the wall seconds of training, and the result.
struct TrainedAndEvaluated {
  int64_t global_step = 0;
  double train_seconds = 0;
  EvalResult eval;
};
inline absl::StatusOr<TrainedAndEvaluated> TrainThenEvaluate(ConfiguredEstimator& c) {
  TrainedAndEvaluated out;
  const auto start = std::chrono::steady_clock::now();
  TrainOptions to;
  to.max_steps = c.job.train.max_steps;
  TANDEM_ASSIGN_OR_RETURN(out.global_step, c.estimator->Train(c.input(), to));
  out.train_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  TANDEM_ASSIGN_OR_RETURN(out.eval, c.estimator->Evaluate(c.input(), EvalOptions{}));
  return out;
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_UTIL_CONFIG_ESTIMATOR_H_

// apps/examples/session_trainer.h
//
// Trains a Fashion-MNIST example model with a plain DirectSession loop (no
// Estimator): shuffled mini-batches fed through placeholders, Adam, loss logged every
// `log_every` steps; then evaluates test accuracy in a second, inference-mode graph
// whose variables are copied from the trained session. Used by the quick-start app,
// the slow accuracy test and the benchmarks.
//
// Results are deterministic for a given seed: initial weights, shuffling and dropout
// all derive from it (the steps themselves run ops in parallel, but every kernel is
// deterministic).
#ifndef TANDEM_APPS_EXAMPLES_SESSION_TRAINER_H_
#define TANDEM_APPS_EXAMPLES_SESSION_TRAINER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/data/fashion_mnist.h"
#include "framework/runtime/mixed_precision.h"

namespace tandem::examples {

struct SessionTrainOptions {
  std::string model = "mlp";                 // "mlp" or "cnn".
  std::vector<int64_t> hidden = {256, 128};  // MLP hidden layer sizes.
  int epochs = 1;
  int64_t max_steps = -1;     // > 0: stop after this many steps (overrides epochs).
  int64_t untimed_steps = 0;  // Steps run before the clock starts (kernel warm-up).
  int64_t batch_size = 128;
  float learning_rate = 0.001f;
  int64_t seed = 1;
  int threads = 0;  // Intra-op threads (ops run one at a time); 0 = one per core.
  Precision precision = Precision::kFloat32;  // SessionOptions::precision.
  int64_t log_every = 100;                    // 0: no progress log.
  bool evaluate = true;
};

struct SessionTrainResult {
  int64_t steps = 0;
  double train_seconds = 0;
  double examples_per_second = 0;
  float final_loss = 0;
  double test_accuracy = -1;  // -1 when not evaluated.
  std::vector<float> losses;  // Loss at every step.
};

absl::StatusOr<SessionTrainResult> TrainFashionModel(const data::FashionMnist& data,
                                                     const SessionTrainOptions& options);

}  // namespace tandem::examples

#endif  // TANDEM_APPS_EXAMPLES_SESSION_TRAINER_H_

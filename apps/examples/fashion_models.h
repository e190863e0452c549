// apps/examples/fashion_models.h
//
// The Fashion-MNIST example models as graph builders over a Scope:
//   mlp: 784-256-128-10 ReLU (the benchmarks' MLP), or any hidden sizes;
//   cnn: conv5x5x32 ReLU, maxpool 2, conv5x5x64 ReLU, maxpool 2, dense 1024 ReLU,
//        dropout 0.4 (training only), dense 10 (TensorFlow's documented CNN).
// Both take images float32 [batch, 784] and return logits [batch, 10].
#ifndef TANDEM_APPS_EXAMPLES_FASHION_MODELS_H_
#define TANDEM_APPS_EXAMPLES_FASHION_MODELS_H_

#include <cstdint>
#include <vector>

#include "framework/graph/scope.h"

namespace tandem::examples {

Output BuildMlp(const Scope& scope, Output images, const std::vector<int64_t>& hidden,
                int64_t seed);
Output BuildCnn(const Scope& scope, Output images, bool training, int64_t seed);

}  // namespace tandem::examples

#endif  // TANDEM_APPS_EXAMPLES_FASHION_MODELS_H_

// apps/trainer/stock_models.cc
//
// The models of the stock `trainer` binary: the examples of apps/examples/models.h.
#include "apps/examples/models.h"
#include "apps/trainer/trainer_main.h"
#include "glog/logging.h"

namespace tandem {

void RegisterModels(ModelRegistry& registry) {
  absl::Status s = examples::RegisterExampleModels(registry);
  CHECK(s.ok()) << s;  // Only fails on a duplicate name: a bug in this file.
}

}  // namespace tandem

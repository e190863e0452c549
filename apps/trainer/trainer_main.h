// apps/trainer/trainer_main.h
//
// The trainer command line, shared by the stock `trainer` binary and every trainer a
// user builds with tandem_add_trainer():
//
//   trainer train    --config job.toml [--set section.key=value ...]
//   trainer evaluate --config job.toml [--checkpoint PREFIX] [--set ...]
//   trainer predict  --config job.toml --output predictions.jsonl [--checkpoint PREFIX]
//   trainer predict  --exported DIR --input instances.jsonl [--output F]
//   trainer export   --config job.toml --output DIR [--checkpoint PREFIX]
//   trainer train_and_evaluate --config job.toml [--set ...]
//   trainer launch --ps N --workers M [--evaluator] --config job.toml [--set ...]
//   trainer serve  --cluster ... --job ps --task 0   one bare task of a cluster
//   trainer models                        lists the registered models
//   trainer <command> --print_config      prints the resolved config and exits
//   trainer --version
//
// The config is resolved as JobConfig::LoadWithEnvironment (TOML < TF_CONFIG < --set).
// TF_CONFIG gives this process its role (estimator/training.h): train and
// train_and_evaluate run as the chief, a worker, a ps or (train_and_evaluate only) the
// evaluator of a cluster; evaluate and predict always run locally. Every role of one
// cluster runs the same command line. The cluster token comes from
// TANDEM_CLUSTER_TOKEN. Exit codes: apps/trainer/exit_codes.h (0, 1 runtime, 2 usage
// or config).
//
// A user's trainer defines RegisterModels(); the main() of the library
// tandem::trainer_main calls TrainerMain(argc, argv, RegisterModels).
#ifndef TANDEM_APPS_TRAINER_TRAINER_MAIN_H_
#define TANDEM_APPS_TRAINER_TRAINER_MAIN_H_

#include <functional>

#include "estimator/model.h"

namespace tandem {

// Defined by each trainer binary: registers its models.
void RegisterModels(ModelRegistry& registry);

int TrainerMain(int argc, char** argv, const std::function<void(ModelRegistry&)>& register_models);

}  // namespace tandem

#endif  // TANDEM_APPS_TRAINER_TRAINER_MAIN_H_

// apps/trainer/trainer_main.h
//
// The trainer command line, shared by the stock `trainer` binary and every trainer a
// user builds with tandem_add_trainer():
//
//   trainer train    --config job.toml [--set section.key=value ...]
//   trainer evaluate --config job.toml [--checkpoint PREFIX] [--set ...]
//   trainer predict  --config job.toml --output predictions.jsonl [--checkpoint PREFIX]
//   trainer train_and_evaluate --config job.toml [--set ...]
//   trainer models                        lists the registered models
//   trainer <command> --print_config      prints the resolved config and exits
//
// The config is resolved as JobConfig::LoadWithEnvironment (TOML < TF_CONFIG < --set).
// Exit status: 0 on success, 1 on a runtime error, 2 on a usage or config error; the
// error is printed on stderr.
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

// apps/trainer/export_commands.h
//
// The trainer's export side:
//   trainer export  --config job.toml [--checkpoint PREFIX] --output DIR
//       exports the checkpoint (default: the latest) as a new version under DIR and
//       prints the version directory; the serving inputs are the PREDICT input's
//       features.
//   trainer predict --exported DIR --input examples.jsonl [--output F] [--predict_keys K]
//       loads an exported model (DIR: a version, or a base whose newest version is
//       used) without the job config or the model code and writes the same JSON Lines
//       as `trainer predict --config`. Each input line is one instance in TensorFlow
//       Serving's row format: the value of the single input, or {"<input>": value}.
// and the [export] section as the EvalSpec's exporter.
//
// Thread safety: functions of their arguments.
#ifndef TANDEM_APPS_TRAINER_EXPORT_COMMANDS_H_
#define TANDEM_APPS_TRAINER_EXPORT_COMMANDS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "estimator/estimator.h"
#include "estimator/exporter.h"
#include "estimator/job_config.h"

namespace tandem {

// The exporter [export] asks for, or null for strategy "none".
std::shared_ptr<Exporter> ExporterFromConfig(const JobConfig& job, const InputFn& input_fn);

// `trainer export`: returns the new version directory.
absl::StatusOr<std::string> ExportCommand(Estimator& estimator, const JobConfig& job,
                                          const InputFn& input_fn, const std::string& checkpoint,
                                          const std::string& output);

// `trainer predict --exported`: returns the number of predictions written.
absl::StatusOr<int64_t> PredictExported(const std::string& exported, const std::string& input,
                                        const std::string& output,
                                        const std::vector<std::string>& predict_keys);

}  // namespace tandem

#endif  // TANDEM_APPS_TRAINER_EXPORT_COMMANDS_H_

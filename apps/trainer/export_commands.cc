// apps/trainer/export_commands.cc
#include "apps/trainer/export_commands.h"

#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "apps/trainer/json_lines.h"
#include "framework/core/status.h"
#include "glog/logging.h"
#include "serving/exported_model.h"
#include "serving/rest_json.h"

namespace tandem {
namespace {

// Lines of --input predicted at once.
constexpr int kLinesPerBatch = 256;
// Longest input line read (one instance).
constexpr size_t kMaxLineBytes = 64 << 20;

// The model name exports record: [export] model_name, else [model] name.
std::string ExportModelName(const JobConfig& job) {
  return job.export_.model_name.empty() ? job.model.name : job.export_.model_name;
}

}  // namespace

std::shared_ptr<Exporter> ExporterFromConfig(const JobConfig& job, const InputFn& input_fn) {
  const ExportSection& e = job.export_;
  if (e.strategy == "none") return nullptr;
  ExporterOptions o;
  o.strategy = e.strategy == "final"    ? ExporterOptions::Strategy::kFinal
               : e.strategy == "latest" ? ExporterOptions::Strategy::kLatest
                                        : ExporterOptions::Strategy::kBest;
  o.name = e.name;
  o.serving_input_fn = input_fn;
  o.model_name = ExportModelName(job);
  o.keep = static_cast<int>(e.keep);
  o.metric = e.metric;
  o.lower_is_better = e.metric_mode.empty() ? true : e.metric_mode == "min";
  return std::make_shared<Exporter>(std::move(o));
}

absl::StatusOr<std::string> ExportCommand(Estimator& estimator, const JobConfig& job,
                                          const InputFn& input_fn, const std::string& checkpoint,
                                          const std::string& output) {
  TANDEM_ASSIGN_OR_RETURN(ServingInputSpec inputs, Estimator::ServingInputFromInputFn(input_fn));
  ExportOptions eo;
  eo.checkpoint_path = checkpoint;
  eo.model_name = ExportModelName(job);
  return estimator.ExportSavedModel(output, inputs, eo);
}

absl::StatusOr<int64_t> PredictExported(const std::string& exported, const std::string& input,
                                        const std::string& output,
                                        const std::vector<std::string>& predict_keys) {
  TANDEM_ASSIGN_OR_RETURN(auto model, serving::LoadExportedModel(exported));
  LOG(INFO) << "Loaded " << model->signature().model_name << " version " << model->version()
            << " (global step " << model->signature().global_step << ") from " << model->path();
  std::ifstream in_file;
  std::istream* in = &std::cin;
  if (input != "-") {
    in_file.open(input);
    if (!in_file) return absl::NotFoundError(absl::StrCat("cannot open --input ", input));
    in = &in_file;
  }
  std::ofstream out_file;
  std::ostream* out = &std::cout;
  if (output != "-") {
    out_file.open(output, std::ios::trunc);
    if (!out_file) return absl::NotFoundError(absl::StrCat("cannot open --output ", output));
    out = &out_file;
  }
  JsonLinesWriter writer(out);
  serving::RestLimits limits;
  limits.max_instances = kLinesPerBatch;
  int64_t line_number = 0;
  std::string line;
  bool done = false;
  while (!done) {
    std::string body = "{\"instances\": [";
    int lines = 0;
    const int64_t first_line = line_number + 1;
    while (lines < kLinesPerBatch) {
      if (!std::getline(*in, line)) {
        done = true;
        break;
      }
      ++line_number;
      if (line.size() > kMaxLineBytes) {
        return absl::InvalidArgumentError(
            absl::StrCat(input, ":", line_number, ": longer than ", kMaxLineBytes, " bytes"));
      }
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      if (lines > 0) body += ",";
      body += line;
      ++lines;
    }
    if (lines == 0) break;
    body += "]}";
    absl::StatusOr<serving::PredictRequest> request =
        serving::ParsePredictRequest(body, model->signature(), limits);
    if (!request.ok()) {
      return AnnotateStatus(request.status(),
                            absl::StrCat(input, " lines ", first_line, "-", line_number));
    }
    TANDEM_ASSIGN_OR_RETURN(serving::NamedTensors predictions,
                            model->Predict(request->inputs, predict_keys));
    TANDEM_RETURN_IF_ERROR(writer.Write(predictions));
  }
  if (in->bad()) return absl::DataLossError(absl::StrCat("reading ", input, " failed"));
  out->flush();
  return writer.count();
}

}  // namespace tandem

// tests/estimator/tf_config_corpus_test.cc
//
// Every TF_CONFIG of tests/estimator/data/tf_config_corpus.json (TensorFlow's own
// RunConfig tests and what Kubeflow, SageMaker, Vertex AI / AI Platform, Spark and
// Slurm setups emit) through tandem's RunConfig, compared with what TensorFlow 1.x's
// Estimator RunConfig gives: task type and index, chief, master, evaluation master,
// replica counts and global id, or an error. A case where tandem differs on purpose
// says what tandem gives and why, and is listed in the table of differences of
// docs/clusters.md.
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "estimator/run_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tandem {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

json Corpus() {
  return json::parse(
      ReadFile(std::string(TANDEM_SOURCE_DIR) + "/tests/estimator/data/tf_config_corpus.json"));
}

// What tandem must give for `c`: its own "tandem" entry, else TensorFlow's.
const json& Expected(const json& c) { return c.contains("tandem") ? c["tandem"] : c["tensorflow"]; }

void Check(const json& c) {
  SCOPED_TRACE(c["name"].get<std::string>());
  const std::string text =
      c.contains("tf_config_text") ? c["tf_config_text"].get<std::string>() : c["tf_config"].dump();
  absl::StatusOr<RunConfig> config = [&]() -> absl::StatusOr<RunConfig> {
    absl::StatusOr<TfConfig> tf_config = ParseTfConfig(text);
    if (!tf_config.ok()) return tf_config.status();
    return RunConfig::Create({}, *tf_config);
  }();
  const json& want = Expected(c);
  if (want.contains("error")) {
    ASSERT_FALSE(config.ok()) << text;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string part = c.contains("tandem") ? want["error"].get<std::string>()
                                                  : c["tandem_error"].get<std::string>();
    EXPECT_THAT(config.status().message(), HasSubstr(part));
    return;
  }
  ASSERT_TRUE(config.ok()) << config.status() << " for " << text;
  EXPECT_EQ(config->task_type(), want["task_type"].get<std::string>());
  EXPECT_EQ(config->task_id(), want["task_id"].get<int>());
  EXPECT_EQ(config->is_chief(), want["is_chief"].get<bool>());
  EXPECT_EQ(config->master(), want["master"].get<std::string>());
  EXPECT_EQ(config->evaluation_master(), want["evaluation_master"].get<std::string>());
  EXPECT_EQ(config->num_ps_replicas(), want["num_ps_replicas"].get<int>());
  EXPECT_EQ(config->num_worker_replicas(), want["num_worker_replicas"].get<int>());
  const json& id = want["global_id_in_cluster"];
  EXPECT_EQ(config->global_id_in_cluster(),
            id.is_null() ? std::nullopt : std::optional<int>(id.get<int>()));
}

TEST(TfConfigCorpusTest, EveryCaseGivesWhatTensorFlowGivesOrItsStatedDifference) {
  const json corpus = Corpus();
  ASSERT_GE(corpus["cases"].size(), 40u);
  for (const json& c : corpus["cases"]) Check(c);
}

TEST(TfConfigCorpusTest, EveryDifferenceIsExplainedAndInTheReadme) {
  const json corpus = Corpus();
  const std::string readme = ReadFile(std::string(TANDEM_SOURCE_DIR) + "/docs/clusters.md");
  ASSERT_FALSE(readme.empty());
  int differences = 0;
  for (const json& c : corpus["cases"]) {
    const std::string name = c["name"].get<std::string>();
    const bool differs = c.contains("tandem");
    EXPECT_EQ(differs, c.contains("why")) << name << ": a difference needs a reason, and only one";
    if (c["tensorflow"].contains("error") && !differs) {
      EXPECT_TRUE(c.contains("tandem_error")) << name;
    }
    if (!differs) continue;
    ++differences;
    EXPECT_THAT(readme, HasSubstr("`" + name + "`")) << name << " is missing from docs/clusters.md";
  }
  EXPECT_GT(differences, 0);
}

}  // namespace
}  // namespace tandem

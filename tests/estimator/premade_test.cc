// Tests of the premade estimators configured by TOML alone (estimator/canned/): each one
// trains a small fixture to a stated loss through the Estimator, as the trainer runs
// it; weights weigh the metrics; tf.Example input trains as CSV does; the exported
// model takes raw strings and predicts what Estimator::Predict does; the input's bad
// declarations are config errors naming them; [distribute] partitioner splits the
// tables without changing what the model computes, and its checkpoints restore into
// another partitioning.
//
// The fixture: rows of a color ("red", "green", "blue"), a size in [-1, 1] and a list of
// tags from {a, b, c}; the label is "yes" exactly when the color is red, or when it is
// blue and the tags hold "a". An indicator per color and per tag separates it, so a
// linear model can drive the loss towards 0 from its start at ln 2 = 0.693.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "checkpoint/checkpoint_reader.h"
#include "estimator/canned/canned_model.h"
#include "estimator/estimator.h"
#include "framework/core/env.h"
#include "framework/core/record_io.h"
#include "framework/protos/example.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "serving/exported_model.h"
#include "serving/rest_json.h"
#include "tests/util/config_estimator.h"
#include "tests/util/temp_dir.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

struct Row {
  std::string color;
  float size;
  std::vector<std::string> tags;
  std::string label;
};

std::vector<Row> Rows(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const char* colors[] = {"red", "green", "blue"};
  std::vector<Row> rows;
  for (int i = 0; i < n; ++i) {
    Row r;
    r.color = colors[rng() % 3];
    r.size = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 1000.f;
    for (const char* t : {"a", "b", "c"}) {
      if (rng() % 2) r.tags.push_back(t);
    }
    const bool has_a = !r.tags.empty() && r.tags[0] == "a";
    r.label = r.color == "red" || (r.color == "blue" && has_a) ? "yes" : "no";
    rows.push_back(r);
  }
  return rows;
}

std::string Csv(const std::vector<Row>& rows) {
  std::string out;
  for (const Row& r : rows) {
    absl::StrAppend(&out, r.color, ",", r.size, ",", absl::StrJoin(r.tags, "|"), ",", r.label,
                    "\n");
  }
  return out;
}

constexpr char kFeatures[] = R"(
[features]
color = { type = "vocabulary_list", vocabulary = ["red", "green", "blue"] }
tags = { type = "vocabulary_list", vocabulary = ["a", "b", "c"] }
size = { type = "numeric" }
color_indicator = { type = "indicator", categorical = "color" }
tags_embedding = { type = "embedding", categorical = "tags", dimension = 3, combiner = "sum" }
)";

class PremadeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(env::WriteFileAtomic(Path("train.csv"), Csv(Rows(400, 1))).ok());
    ASSERT_TRUE(env::WriteFileAtomic(Path("eval.csv"), Csv(Rows(200, 2))).ok());
    ASSERT_TRUE(canned::RegisterPremadeEstimators(registry_).ok());
  }
  std::string Path(const std::string& name) const { return env::JoinPath(dir_.path(), name); }

  // A job for premade `model` with `params` over the fixture.
  std::string Toml(const std::string& model, const std::string& params,
                   const std::string& data_extra = "") const {
    return absl::StrCat("[model]\nname = \"", model, "\"\n[model.params]\n", params, R"(
[data]
format = "csv"
train_path = ")", Path("train.csv"), R"("
eval_path = ")", Path("eval.csv"), R"("
column_names = ["color", "size", "tags", "label"]
column_defaults = ["", 0.0, "", ""]
value_separators = { tags = "|" }
label_name = "label"
shuffle_buffer = 400
)", data_extra, R"(
[train]
batch_size = 20
[run]
model_dir = ")", Path("m_" + model), R"("
random_seed = 1
save_checkpoints_steps = 100000
)", kFeatures);
  }

  // Trains `steps` and evaluates the eval file.
  absl::StatusOr<EvalResult> TrainAndEvaluate(const std::string& toml, int64_t steps) {
    TANDEM_ASSIGN_OR_RETURN(JobConfig job, JobConfig::Parse(toml, "premade.toml"));
    TANDEM_ASSIGN_OR_RETURN(c_, testing::MakeConfiguredEstimator(std::move(job), registry_));
    TrainOptions to;
    to.max_steps = steps;
    TANDEM_RETURN_IF_ERROR(c_->estimator->Train(c_->input(), to).status());
    return c_->estimator->Evaluate(c_->input());
  }

  testing::TempDir dir_;
  ModelRegistry registry_;
  std::unique_ptr<testing::ConfiguredEstimator> c_;
};

TEST_F(PremadeTest, LinearClassifierLearnsTheRule) {
  absl::StatusOr<EvalResult> r = TrainAndEvaluate(
      Toml("linear_classifier", "feature_columns = [\"color\", \"tags\"]\n"
                                "label_vocabulary = [\"no\", \"yes\"]\n"),
      400);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(r->metrics.at("average_loss"), 0.1f);
  EXPECT_GE(r->metrics.at("accuracy"), 0.99f);
  EXPECT_GE(r->metrics.at("auc"), 0.99f);
  for (const char* m : {"accuracy_baseline", "auc_precision_recall", "label/mean",
                        "prediction/mean", "precision", "recall", "loss"}) {
    EXPECT_TRUE(r->metrics.contains(m)) << m;
  }
  const float mean = r->metrics.at("label/mean");
  EXPECT_FLOAT_EQ(r->metrics.at("accuracy_baseline"), std::max(mean, 1 - mean));
}

TEST_F(PremadeTest, DnnClassifierLearnsTheRule) {
  absl::StatusOr<EvalResult> r = TrainAndEvaluate(
      Toml("dnn_classifier",
           "feature_columns = [\"color_indicator\", \"tags_embedding\", \"size\"]\n"
           "hidden_units = [16, 8]\nlabel_vocabulary = [\"no\", \"yes\"]\n"),
      600);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(r->metrics.at("average_loss"), 0.2f);
  EXPECT_GE(r->metrics.at("accuracy"), 0.95f);
}

TEST_F(PremadeTest, WideAndDeepTrainsEachPartWithItsOptimizer) {
  absl::StatusOr<EvalResult> r = TrainAndEvaluate(
      Toml("dnn_linear_combined_classifier",
           "linear_feature_columns = [\"color\", \"tags\"]\n"
           "dnn_feature_columns = [\"color_indicator\", \"tags_embedding\"]\n"
           "dnn_hidden_units = [8]\nlabel_vocabulary = [\"no\", \"yes\"]\n"
           "linear_learning_rate = 0.2\ndnn_learning_rate = 0.05\n"),
      400);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(r->metrics.at("average_loss"), 0.15f);
  auto reader = checkpoint::CheckpointReader::Open(c_->estimator->LatestCheckpoint());
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<std::string> names = reader->get()->TensorNames();
  auto has = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  EXPECT_TRUE(has("linear/linear_model/color/weights/Ftrl")) << absl::StrJoin(names, " ");
  EXPECT_TRUE(has("dnn/hiddenlayer_0/kernel/Adagrad")) << absl::StrJoin(names, " ");
  EXPECT_TRUE(has("dnn/input_from_feature_columns/input_layer/tags_embedding/embedding_weights"))
      << absl::StrJoin(names, " ");
}

TEST_F(PremadeTest, MultiClassAndRegression) {
  // Three classes, the row's color, told by its one tag (a: red, b: green, c: blue).
  std::string csv;
  for (const Row& r : Rows(400, 4)) {
    const char* tag = r.color == "red" ? "a" : r.color == "green" ? "b" : "c";
    absl::StrAppend(&csv, tag, ",", r.color, "\n");
  }
  ASSERT_TRUE(env::WriteFileAtomic(Path("multi.csv"), csv).ok());
  const std::string toml = absl::StrCat(R"([model]
name = "linear_classifier"
[model.params]
feature_columns = ["tags"]
n_classes = 3
label_vocabulary = ["red", "green", "blue"]
[data]
format = "csv"
train_path = ")", Path("multi.csv"), R"("
eval_path = ")", Path("multi.csv"), R"("
column_names = ["tags", "color"]
column_defaults = ["", ""]
label_name = "color"
[train]
batch_size = 20
[run]
model_dir = ")", Path("m_multi"), R"("
random_seed = 1
[features]
tags = { type = "vocabulary_list", vocabulary = ["a", "b", "c"] }
)");
  absl::StatusOr<EvalResult> multi = TrainAndEvaluate(toml, 200);
  ASSERT_TRUE(multi.ok()) << multi.status();
  EXPECT_LT(multi->metrics.at("average_loss"), 0.1f);  // ln 3 = 1.10 at the start.
  EXPECT_FLOAT_EQ(multi->metrics.at("accuracy"), 1.f);
  EXPECT_FALSE(multi->metrics.contains("auc"));  // A binary metric only.

  // size -> 2 * size + 3 [red]: a linear regressor fits it.
  std::vector<Row> rows = Rows(400, 3);
  csv.clear();
  for (const Row& r : rows) {
    absl::StrAppend(&csv, r.color, ",", r.size, ",", absl::StrJoin(r.tags, "|"), ",",
                    2 * r.size + (r.color == "red" ? 3 : 0), "\n");
  }
  ASSERT_TRUE(env::WriteFileAtomic(Path("train.csv"), csv).ok());
  ASSERT_TRUE(env::WriteFileAtomic(Path("eval.csv"), csv).ok());
  auto regressor = [&](const std::string& model, const std::string& params) {
    return TrainAndEvaluate(
        absl::StrReplaceAll(Toml(model, params), {{"column_defaults = [\"\", 0.0, \"\", \"\"]",
                                                   "column_defaults = [\"\", 0.0, \"\", 0.0]"}}),
        800);
  };
  // The labels' variance is about 2.3: each regressor fits them to a small fraction.
  absl::StatusOr<EvalResult> reg =
      regressor("linear_regressor", "feature_columns = [\"color\", \"size\"]\n");
  ASSERT_TRUE(reg.ok()) << reg.status();
  EXPECT_LT(reg->metrics.at("average_loss"), 0.05f);
  EXPECT_TRUE(reg->metrics.contains("label/mean"));
  EXPECT_TRUE(reg->metrics.contains("prediction/mean"));
  absl::StatusOr<EvalResult> dnn = regressor(
      "dnn_regressor", "feature_columns = [\"color_indicator\", \"size\"]\nhidden_units = [8]\n");
  ASSERT_TRUE(dnn.ok()) << dnn.status();
  EXPECT_LT(dnn->metrics.at("average_loss"), 0.1f);
  absl::StatusOr<EvalResult> both =
      regressor("dnn_linear_combined_regressor",
                "linear_feature_columns = [\"color\", \"size\"]\n"
                "dnn_feature_columns = [\"color_indicator\", \"size\"]\ndnn_hidden_units = [8]\n"
                "linear_learning_rate = 0.2\ndnn_learning_rate = 0.05\n");
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_LT(both->metrics.at("average_loss"), 0.1f);
  std::printf("average_loss: linear %.4f, dnn %.4f, wide & deep %.4f regressor\n",
              reg->metrics.at("average_loss"), dnn->metrics.at("average_loss"),
              both->metrics.at("average_loss"));
}

TEST_F(PremadeTest, WeightColumnWeighsTheMetrics) {
  // Weight 3 on every "yes" row of the eval file: label/mean is 3p / (3p + 1 - p).
  std::vector<Row> rows = Rows(200, 2);
  std::string csv;
  double yes = 0;
  for (const Row& r : rows) {
    yes += r.label == "yes";
    absl::StrAppend(&csv, r.color, ",", r.size, ",", absl::StrJoin(r.tags, "|"), ",", r.label, ",",
                    r.label == "yes" ? 3 : 1, "\n");
  }
  ASSERT_TRUE(env::WriteFileAtomic(Path("train.csv"), csv).ok());
  ASSERT_TRUE(env::WriteFileAtomic(Path("eval.csv"), csv).ok());
  std::string toml = absl::StrReplaceAll(
      Toml("linear_classifier", "feature_columns = [\"color\", \"tags\"]\nweight_column = \"w\"\n"
                                "label_vocabulary = [\"no\", \"yes\"]\n"),
      {{"[\"color\", \"size\", \"tags\", \"label\"]", "[\"color\", \"size\", \"tags\", \"label\", \"w\"]"},
       {"[\"\", 0.0, \"\", \"\"]", "[\"\", 0.0, \"\", \"\", 1.0]"}});
  absl::StatusOr<EvalResult> r = TrainAndEvaluate(toml, 50);
  ASSERT_TRUE(r.ok()) << r.status();
  const double p = yes / rows.size();
  EXPECT_NEAR(r->metrics.at("label/mean"), 3 * p / (3 * p + 1 - p), 1e-5);
}

TEST_F(PremadeTest, TfExampleInputTrainsAsCsvDoes) {
  // The fixture as tf.train.Example records (TensorFlow's wire format).
  std::string path = Path("train.tfrecord");
  {
    auto w = io::RecordWriter::Open(path);
    ASSERT_TRUE(w.ok());
    for (const Row& r : Rows(400, 1)) {
      proto::Example e;
      auto& f = *e.mutable_features()->mutable_feature();
      f["color"].mutable_bytes_list()->add_value(r.color);
      f["size"].mutable_float_list()->add_value(r.size);
      for (const std::string& t : r.tags) f["tags"].mutable_bytes_list()->add_value(t);
      f["label"].mutable_bytes_list()->add_value(r.label);
      ASSERT_TRUE((*w)->WriteRecord(e.SerializeAsString()).ok());
    }
    ASSERT_TRUE((*w)->Close().ok());
  }
  const std::string toml = absl::StrCat(R"([model]
name = "linear_classifier"
[model.params]
feature_columns = ["color", "tags"]
label_vocabulary = ["no", "yes"]
[data]
format = "tfrecord_example"
train_path = ")", path, R"("
eval_path = ")", path, R"("
label_name = "label"
[train]
batch_size = 20
[run]
model_dir = ")", Path("m_tfrecord"), R"("
random_seed = 1
)", kFeatures);
  absl::StatusOr<EvalResult> r = TrainAndEvaluate(toml, 400);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(r->metrics.at("average_loss"), 0.1f);
}

TEST_F(PremadeTest, ExportedModelTakesRawStringsAndPredictsAsTheEstimator) {
  ASSERT_TRUE(TrainAndEvaluate(Toml("dnn_linear_combined_classifier",
                                    "linear_feature_columns = [\"color\", \"tags\"]\n"
                                    "dnn_feature_columns = [\"color_indicator\", \"size\"]\n"
                                    "dnn_hidden_units = [4]\n"
                                    "label_vocabulary = [\"no\", \"yes\"]\n"),
                               200)
                  .ok());
  InputFn input = c_->input();
  absl::StatusOr<ServingInputSpec> spec = Estimator::ServingInputFromInputFn(input);
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::string> dir = c_->estimator->ExportSavedModel(Path("export"), *spec);
  ASSERT_TRUE(dir.ok()) << dir.status();
  auto model = serving::LoadExportedModel(*dir);
  ASSERT_TRUE(model.ok()) << model.status();
  const serving::Signature& sig = (*model)->signature();
  EXPECT_EQ(sig.inputs.at("color").dtype, DType::kString);
  EXPECT_EQ(sig.inputs.at("tags").shape, PartialShape({-1, -1}));  // A list per example.

  // The eval file's first rows, as JSON instances of raw columns.
  std::vector<Row> rows = Rows(200, 2);
  std::vector<std::string> instances;
  for (int i = 0; i < 5; ++i) {
    std::vector<std::string> tags;
    for (const std::string& t : rows[i].tags) tags.push_back("\"" + t + "\"");
    instances.push_back(absl::StrCat("{\"color\": \"", rows[i].color, "\", \"size\": ", rows[i].size,
                                     ", \"tags\": [", absl::StrJoin(tags, ", "), "]}"));
  }
  const std::string body = absl::StrCat("{\"instances\": [", absl::StrJoin(instances, ", "), "]}");
  absl::StatusOr<serving::PredictRequest> req = serving::ParsePredictRequest(body, sig, {});
  ASSERT_TRUE(req.ok()) << req.status();
  absl::StatusOr<serving::NamedTensors> served = (*model)->Predict(req->inputs);
  ASSERT_TRUE(served.ok()) << served.status();
  std::vector<std::map<std::string, Tensor>> predicted;
  ASSERT_TRUE(c_->estimator
                  ->Predict(input, [&](const std::map<std::string, Tensor>& b) {
                    predicted.push_back(b);
                    return absl::OkStatus();
                  })
                  .ok());
  ASSERT_FALSE(predicted.empty());
  const Tensor& want_p = predicted[0].at("probabilities");
  const Tensor& got_p = served->at("probabilities");
  for (int i = 0; i < 5 * 2; ++i) {
    EXPECT_FLOAT_EQ(got_p.data<float>()[i], want_p.data<float>()[i]) << i;
  }
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(served->at("classes").StringAt(i), predicted[0].at("classes").StringAt(i));
  }
  // A missing or mistyped column is refused, named.
  auto missing = serving::ParsePredictRequest(
      "{\"instances\": [{\"color\": \"red\", \"size\": 1}]}", sig, {});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("lacks input 'tags'"));
  auto mistyped = serving::ParsePredictRequest(
      "{\"instances\": [{\"color\": 3, \"size\": 1, \"tags\": []}]}", sig, {});
  EXPECT_THAT(std::string(mistyped.status().message()), HasSubstr("color"));
  EXPECT_THAT(std::string(mistyped.status().message()), HasSubstr("expected a string"));
}

TEST_F(PremadeTest, InputMistakesAreConfigErrors) {
  auto fails = [&](const std::string& toml) {
    absl::StatusOr<EvalResult> r = TrainAndEvaluate(toml, 10);
    EXPECT_FALSE(r.ok());
    EXPECT_TRUE(IsConfigError(r.status())) << r.status();
    return std::string(r.status().message());
  };
  // A feature column reading a column the CSV does not have.
  EXPECT_THAT(fails(absl::StrReplaceAll(
                  Toml("linear_classifier", "feature_columns = [\"color\", \"shape\"]\n"
                                            "label_vocabulary = [\"no\", \"yes\"]\n"),
                  {{"[features]", "[features]\nshape = { type = \"hash_bucket\", "
                                  "hash_bucket_size = 5 }"}})),
              HasSubstr("no column named 'shape'"));
  EXPECT_THAT(fails(Toml("linear_classifier", "feature_columns = [\"colour\"]\n")),
              HasSubstr("no feature column 'colour' (did you mean 'color'?)"));
  EXPECT_THAT(fails(Toml("linear_classifier", "feature_columns = [\"color\"]\n")),
              HasSubstr("set [model.params] label_vocabulary"));
  // A mistyped key fails JobConfig::Parse (which the trainer reports as a usage error).
  absl::StatusOr<EvalResult> typo = TrainAndEvaluate(
      Toml("linear_classifier", "feature_columns = [\"size\"]\n", "skip_bad_rows = 3\n"), 10);
  EXPECT_THAT(std::string(typo.status().message()), HasSubstr("skip_bad_rows must be a boolean"));
}

// The linear classifier with its tables in 3 parts (1 row each) computes exactly what
// it computes with whole tables: the same ids reach the same rows and FTRL updates the
// same rows. Its checkpoint holds each table as one logical tensor of slices, and an
// Estimator whose tables are whole restores it and evaluates the same.
TEST_F(PremadeTest, PartitionedTablesTrainAsWholeTablesAndRestoreIntoThem) {
  const std::string params =
      "feature_columns = [\"color\", \"tags\"]\nlabel_vocabulary = [\"no\", \"yes\"]\n";
  absl::StatusOr<EvalResult> whole = TrainAndEvaluate(Toml("linear_classifier", params), 60);
  ASSERT_TRUE(whole.ok()) << whole.status();
  auto whole_ckpt = checkpoint::CheckpointReader::Open(c_->estimator->LatestCheckpoint());
  ASSERT_TRUE(whole_ckpt.ok()) << whole_ckpt.status();

  const std::string parted_toml =
      absl::StrReplaceAll(Toml("linear_classifier", params),
                          {{"m_linear_classifier", "m_parted"},
                           {"[train]", "[distribute]\npartitioner = \"fixed_size\"\n"
                                       "num_shards = 3\n[train]"}});
  absl::StatusOr<EvalResult> parted = TrainAndEvaluate(parted_toml, 60);
  ASSERT_TRUE(parted.ok()) << parted.status();
  EXPECT_EQ(parted->metrics.at("loss"), whole->metrics.at("loss"));
  EXPECT_EQ(parted->metrics.at("auc"), whole->metrics.at("auc"));
  const std::string ckpt = c_->estimator->LatestCheckpoint();
  auto reader = checkpoint::CheckpointReader::Open(ckpt);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<std::string> names = (*reader)->TensorNames();
  EXPECT_THAT(names, ::testing::Contains("linear/linear_model/color/weights/part_2"));
  EXPECT_THAT(names, ::testing::Contains("linear/linear_model/tags/weights/part_0/Ftrl"));
  for (const char* table : {"linear/linear_model/color/weights", "linear/linear_model/tags/weights"}) {
    absl::StatusOr<Tensor> a = (*reader)->Read(table);
    absl::StatusOr<Tensor> b = (*whole_ckpt)->Read(table);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
    ASSERT_EQ(a->shape(), TensorShape({3, 1}));
    for (int i = 0; i < 3; ++i) EXPECT_EQ(a->ValueAsDouble(i), b->ValueAsDouble(i)) << table << i;
  }

  // Whole tables restored from the 3-part checkpoint.
  absl::StatusOr<JobConfig> job = JobConfig::Parse(
      absl::StrReplaceAll(Toml("linear_classifier", params), {{"m_linear_classifier", "m_parted"}}),
      "premade.toml");
  ASSERT_TRUE(job.ok()) << job.status();
  auto restored = testing::MakeConfiguredEstimator(*std::move(job), registry_);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EvalOptions eo;
  eo.checkpoint_path = ckpt;
  absl::StatusOr<EvalResult> again = (*restored)->estimator->Evaluate((*restored)->input(), eo);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->metrics.at("loss"), parted->metrics.at("loss"));
}

TEST_F(PremadeTest, PartitionerMistakesAreConfigErrors) {
  auto fails = [&](const std::string& model, const std::string& params,
                   const std::string& distribute) {
    const std::string toml = absl::StrReplaceAll(
        Toml(model, params + "label_vocabulary = [\"no\", \"yes\"]\n"),
        {{"[train]", absl::StrCat("[distribute]\n", distribute, "[train]")}});
    absl::StatusOr<EvalResult> r = TrainAndEvaluate(toml, 2);
    EXPECT_FALSE(r.ok()) << distribute;
    EXPECT_TRUE(IsConfigError(r.status())) << r.status();
    return std::string(r.status().message());
  };
  // A model without a table (an indicator and a number feed the DNN).
  EXPECT_THAT(fails("dnn_classifier", "feature_columns = [\"color_indicator\", \"size\"]\n"
                                      "hidden_units = [4]\n",
                    "partitioner = \"fixed\"\n"),
              HasSubstr("'dnn_classifier' has no table to partition"));
  // A part must hold a whole row: tags_embedding's rows are 3 floats.
  EXPECT_THAT(fails("dnn_classifier", "feature_columns = [\"tags_embedding\"]\nhidden_units = [4]\n",
                    "partitioner = \"max_size\"\nmax_shard_bytes = 8\n"),
              HasSubstr("max_shard_bytes = 8 is below one row (12 bytes)"));
  // A model that builds its own variables takes no partitioner.
  ASSERT_TRUE(registry_.Register("plain", ModelFactory([] { return std::unique_ptr<Model>(); })).ok());
  absl::StatusOr<JobConfig> job = JobConfig::Parse(
      "[model]\nname = \"plain\"\n[distribute]\npartitioner = \"min_max\"\n", "plain.toml");
  ASSERT_TRUE(job.ok()) << job.status();
  absl::StatusOr<std::unique_ptr<Model>> plain = registry_.Create("plain", *job);
  ASSERT_FALSE(plain.ok());
  EXPECT_TRUE(IsConfigError(plain.status())) << plain.status();
  EXPECT_THAT(std::string(plain.status().message()), HasSubstr("model 'plain' builds its own variables"));
}

}  // namespace
}  // namespace tandem

// The trainer binary as a user runs it: train / evaluate / predict on the
// linear_regression example, resume after SIGKILL (global step continues, variables
// restored, a corrupted newest checkpoint skipped by name), and a dozen malformed
// configs and command lines, each failing with an error that names the key, and data
// files that would exhaust memory (a gzip bomb, an endless file) under a 6 GiB limit.
//
// TANDEM_TRAINER and TANDEM_SOURCE_DIR are set by CMake.
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_index.h"
#include "checkpoint/checkpoint_state.h"
#include "framework/core/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/logged_losses.h"
#include "tests/integration/subprocess.h"
#include "tests/util/hand_decode.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;
using testing::LoggedLosses;
using testing::Subprocess;

const std::string kTrainer = TANDEM_TRAINER;
const std::string kConfig = std::string(TANDEM_SOURCE_DIR) + "/configs/linear_regression.toml";
constexpr auto kTimeout = std::chrono::seconds(120);

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = env::MakeTempDir("trainer_test");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    model_dir_ = dir_ + "/model";
  }
  void TearDown() override { env::DeleteRecursively(dir_).IgnoreError(); }

  // Runs the trainer to completion; returns the exit code.
  int Run(std::vector<std::string> args, std::string* out = nullptr, std::string* err = nullptr,
          const std::vector<std::string>& env = {}) {
    args.insert(args.begin(), kTrainer);
    Subprocess p(args, dir_ + "/run" + std::to_string(runs_++), env);
    int code = p.Wait(kTimeout);
    if (out) *out = p.Stdout();
    if (err) *err = p.Stderr();
    return code;
  }
  std::vector<std::string> Job(const std::string& command, std::vector<std::string> sets = {}) {
    std::vector<std::string> args = {command, "--config", kConfig, "--set",
                                     "run.model_dir=\"" + model_dir_ + "\""};
    for (const std::string& s : sets) {
      args.push_back("--set");
      args.push_back(s);
    }
    return args;
  }
  std::string WriteConfig(const std::string& text) {
    std::string path = dir_ + "/job" + std::to_string(configs_++) + ".toml";
    std::ofstream(path) << text;
    return path;
  }

  std::string dir_, model_dir_;
  int runs_ = 0, configs_ = 0;
};

int64_t LatestStep(const std::string& model_dir) {
  auto latest = checkpoint::LatestCheckpoint(model_dir);
  if (!latest.ok()) return -1;
  auto index = checkpoint::ReadIndex(checkpoint::IndexPath(*latest));
  return index.ok() ? index->global_step : -1;
}

TEST_F(TrainerTest, HelpAndUsage) {
  std::string out;
  EXPECT_EQ(Run({"--help"}, &out), 0);
  EXPECT_THAT(out, HasSubstr("train_and_evaluate"));
  EXPECT_EQ(Run({}), 2);
  EXPECT_EQ(Run({"train"}), 2);  // --config is required.
  EXPECT_EQ(Run({"models"}, &out), 0);
  EXPECT_THAT(out, HasSubstr("fashion_cnn"));
}

TEST_F(TrainerTest, TrainEvaluatePredict) {
  std::string out, err;
  ASSERT_EQ(Run(Job("train", {"train.max_steps=300"}), &out, &err), 0) << err;
  EXPECT_THAT(out, HasSubstr("global_step = 300"));
  auto losses = LoggedLosses(err);
  ASSERT_GE(losses.size(), 3u) << err;
  EXPECT_EQ(losses.front().first, 0);  // The step before the first update, as in TF.
  EXPECT_LT(losses.back().second, losses.front().second * 0.2);
  EXPECT_EQ(LatestStep(model_dir_), 300);

  ASSERT_EQ(Run(Job("evaluate"), &out, &err), 0) << err;
  EXPECT_THAT(out, HasSubstr("mse = "));
  EXPECT_THAT(out, HasSubstr("global_step = 300"));

  const std::string predictions = dir_ + "/p.jsonl";
  std::vector<std::string> args = Job("predict");
  args.insert(args.end(), {"--output", predictions});
  ASSERT_EQ(Run(args, &out, &err), 0) << err;
  std::ifstream in(predictions);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    ASSERT_TRUE(j.contains("prediction")) << line;
    ASSERT_TRUE(j["prediction"].is_array() || j["prediction"].is_number()) << line;
    ++lines;
  }
  EXPECT_EQ(lines, 2000);  // The evaluation split, read once.
}

// Census wide & deep from its config file alone, as a user runs it: on a launched
// cluster with two parameter servers holding each table in two parts (the string
// features fed through the cluster's session), then predict with string classes and
// export with string inputs, both locally with whole tables restored from those parts.
TEST_F(TrainerTest, CensusFromAConfigFileOnAClusterPredictsAndExports) {
  const std::string root = TANDEM_SOURCE_DIR;
  const std::vector<std::string> sets = {
      "--config", root + "/configs/census_wide_deep.toml",
      "--set", "run.model_dir=\"" + model_dir_ + "\"",
      "--set", "data.train_path=\"" + root + "/data/adult/adult.data.gz\"",
      "--set", "data.eval_path=\"" + root + "/data/adult/adult.test.gz\"",
      "--set", "train.max_steps=400", "--set", "run.save_checkpoints_steps=400"};
  std::vector<std::string> launch = {"launch", "--ps", "2", "--workers", "1",
                                     "--set", "distribute.partitioner=\"fixed\""};
  launch.insert(launch.end(), sets.begin(), sets.end());
  std::string out, err;
  ASSERT_EQ(Run(launch, &out, &err), 0) << out << err;
  std::smatch m;
  const std::string all = out + err;
  EXPECT_THAT(all, ::testing::HasSubstr("Tables of 'dnn_linear_combined_classifier' "
                                        "partitioned by fixed(num_shards=2)"));
  EXPECT_THAT(all, ::testing::HasSubstr(
                       "Table linear/linear_model/education_x_occupation/weights [1000,1] in 2 "
                       "parts of 500, 500 rows"));
  ASSERT_TRUE(std::regex_search(all, m, std::regex("final evaluation: accuracy = ([0-9.]+), "
                                                    "accuracy_baseline = [0-9.]+, auc = ([0-9.]+)")))
      << all;
  EXPECT_GT(std::stod(m[1]), 0.7638);  // Better than always answering "<=50K".
  EXPECT_GT(std::stod(m[2]), 0.5);

  const std::string predictions = dir_ + "/census.jsonl";
  std::vector<std::string> predict = {"predict", "--output", predictions};
  predict.insert(predict.end(), sets.begin(), sets.end());
  ASSERT_EQ(Run(predict, &out, &err), 0) << err;
  std::ifstream in(predictions);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  auto j = nlohmann::json::parse(line);
  const std::string cls = j["classes"][0];
  EXPECT_TRUE(cls == "<=50K" || cls == ">50K") << line;

  std::vector<std::string> exp = {"export", "--output", dir_ + "/export"};
  exp.insert(exp.end(), sets.begin(), sets.end());
  ASSERT_EQ(Run(exp, &out, &err), 0) << err;
  std::smatch d;
  ASSERT_TRUE(std::regex_search(out, d, std::regex("exported: (\\S+)"))) << out;
  auto sig = env::ReadFile(std::string(d[1]) + "/signature.json");
  ASSERT_TRUE(sig.ok()) << sig.status();
  auto signature = nlohmann::json::parse(*sig);
  EXPECT_EQ(signature["inputs"]["workclass"]["dtype"], "string");
  EXPECT_EQ(signature["inputs"].size(), 10u);  // The columns the model reads, no more.
}

TEST_F(TrainerTest, PrintConfigShowsOverrides) {
  std::string out, err;
  ASSERT_EQ(Run({"train", "--config", kConfig, "--set", "train.max_steps=77", "--print_config"},
                &out, &err),
            0)
      << err;
  EXPECT_THAT(out, HasSubstr("max_steps = 77"));
  EXPECT_THAT(out, HasSubstr("name = 'linear_regression'"));
  EXPECT_FALSE(std::filesystem::exists("/tmp/tandem/never-created-by-print-config"));
}

TEST_F(TrainerTest, ResumesAfterSigkillAndSkipsACorruptCheckpoint) {
  // Train "forever", checkpointing every 50 steps, until a few checkpoints exist.
  std::vector<std::string> args =
      Job("train", {"train.max_steps=100000000", "run.save_checkpoints_steps=50",
                    "run.log_step_count_steps=10", "run.keep_checkpoint_max=10"});
  args.insert(args.begin(), kTrainer);
  std::string first_log;
  {
    Subprocess p(args, dir_ + "/killed");
    auto deadline = std::chrono::steady_clock::now() + kTimeout;
    while (LatestStep(model_dir_) < 150 && std::chrono::steady_clock::now() < deadline &&
           p.running()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(p.running()) << p.Stderr();
    p.Kill(SIGKILL);
    first_log = p.Stderr();
  }
  auto first_losses = LoggedLosses(first_log);
  ASSERT_FALSE(first_losses.empty());
  auto state = checkpoint::ReadCheckpointState(model_dir_);
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_GE(state->all_model_checkpoint_paths.size(), 2u);
  const std::string newest = state->model_checkpoint_path;
  const std::string older =
      state->all_model_checkpoint_paths[state->all_model_checkpoint_paths.size() - 2];
  auto older_index = checkpoint::ReadIndex(checkpoint::IndexPath(older));
  ASSERT_TRUE(older_index.ok());
  const int64_t resume_step = older_index->global_step;

  // Flip one byte of tensor data in the newest checkpoint's shard.
  auto newest_index = checkpoint::ReadIndex(checkpoint::IndexPath(newest));
  ASSERT_TRUE(newest_index.ok());
  const std::string shard = model_dir_ + "/" + newest_index->weight_map.begin()->second;
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-3, std::ios::end);
    char c;
    f.get(c);
    f.seekp(-3, std::ios::end);
    f.put(static_cast<char>(c ^ 0x5a));
  }

  std::string out, err;
  // Past the newest (corrupt) checkpoint, so training is not skipped.
  const int64_t target = newest_index->global_step + 40;
  std::vector<std::string> resume =
      Job("train", {"train.max_steps=" + std::to_string(target), "run.save_checkpoints_steps=50",
                    "run.log_step_count_steps=10", "run.keep_checkpoint_max=10"});
  ASSERT_EQ(Run(resume, &out, &err), 0) << err;
  // The corrupt checkpoint is named and skipped; the older one is restored.
  EXPECT_THAT(err, HasSubstr(std::filesystem::path(shard).filename().string()));
  EXPECT_THAT(err, HasSubstr("Restoring parameters from " + older));
  EXPECT_THAT(out, HasSubstr("global_step = " + std::to_string(target)));
  auto resumed_losses = LoggedLosses(err);
  ASSERT_FALSE(resumed_losses.empty()) << err;
  // The global step continues from the restored checkpoint...
  EXPECT_EQ(resumed_losses.front().first, resume_step);
  // ...and so do the variables: the loss is where training left it, far below the
  // loss of freshly initialised weights.
  EXPECT_LT(resumed_losses.front().second, first_losses.front().second * 0.2)
      << "first run started at loss " << first_losses.front().second;
  EXPECT_EQ(LatestStep(model_dir_), target);
}

// What the trainer leaves on disk, read with the hand decoders (no tandem reader code):
// the loss scalars of the event file at the SummarySaverHook's steps, the evaluation's
// metrics in eval/, and the checkpoint shard's tensors.
TEST_F(TrainerTest, EventFilesAndShardsReadByHand) {
  std::string out, err;
  ASSERT_EQ(Run(Job("train", {"train.max_steps=200", "run.save_summary_steps=50",
                              "run.save_checkpoints_steps=100"}),
                &out, &err),
            0)
      << err;
  ASSERT_EQ(Run(Job("evaluate"), &out, &err), 0) << err;

  auto events_in = [](const std::string& dir) {
    std::vector<testing::Scalar> all;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().filename().string().find("tfevents") == std::string::npos) continue;
      auto bytes = env::ReadFile(entry.path().string());
      EXPECT_TRUE(bytes.ok());
      std::vector<std::string> records = testing::ReadTfRecords(*bytes);
      EXPECT_FALSE(records.empty());
      // The first record is the file version.
      testing::Fields first = testing::Decode(records[0]);
      EXPECT_EQ(first.bytes.find(3)->second, "brain.Event:2");
      for (const testing::Scalar& sc : testing::Scalars(records)) all.push_back(sc);
    }
    return all;
  };
  std::vector<int64_t> loss_steps;
  std::vector<float> losses;
  for (const testing::Scalar& sc : events_in(model_dir_)) {
    if (sc.tag == "loss") {
      loss_steps.push_back(sc.step);
      losses.push_back(sc.value);
    }
  }
  // TensorFlow's SummarySaverHook cadence: the first step, then every 50.
  EXPECT_THAT(loss_steps, ::testing::ElementsAre(1, 51, 101, 151));
  ASSERT_EQ(losses.size(), 4u);
  EXPECT_LT(losses.back(), losses.front());

  std::map<std::string, std::pair<int64_t, float>> eval;
  for (const testing::Scalar& sc : events_in(model_dir_ + "/eval")) {
    eval[sc.tag] = {sc.step, sc.value};
  }
  ASSERT_TRUE(eval.count("mse") && eval.count("loss"));
  EXPECT_EQ(eval["mse"].first, 200);
  EXPECT_LT(eval["mse"].second, losses.front());

  auto shard = env::ReadFile(model_dir_ + "/model.ckpt-200-00000-of-00001.safetensors");
  ASSERT_TRUE(shard.ok()) << shard.status();
  testing::SafetensorsByHand st = testing::ParseSafetensorsByHand(*shard);
  ASSERT_TRUE(st.header.contains("dense/kernel")) << st.header.dump();
  EXPECT_EQ(st.header["dense/kernel"]["dtype"], "F32");
  EXPECT_EQ(st.header["dense/kernel"]["shape"], nlohmann::json({10, 1}));
  EXPECT_TRUE(st.header["__metadata__"].contains("crc32c:dense/kernel"));
  ASSERT_EQ(st.header["global_step"]["dtype"], "I64");
  size_t begin = st.header["global_step"]["data_offsets"][0];
  ASSERT_LE(begin + 8, st.data.size());
  EXPECT_EQ(testing::Le(st.data, begin, 8), 200u);
}

// Each malformed config or command line fails with exit code 2 (or 1 for errors
// found while building the model) and a message naming the key.
TEST_F(TrainerTest, MalformedConfigsAndCommandLinesNameTheKey) {
  struct Case {
    std::string what;
    std::vector<std::string> args;
    std::string expect;  // Substring of stderr.
    std::vector<std::string> env = {};
  };
  const std::string base = R"(
[model]
name = "linear_regression"
[data]
dataset = "synthetic_linear"
[run]
model_dir = "MODEL_DIR"
[train]
max_steps = 10
)";
  auto config = [&](const std::string& extra, const std::string& replace_from = "",
                    const std::string& replace_to = "") {
    std::string text = std::regex_replace(base, std::regex("MODEL_DIR"), model_dir_);
    if (!replace_from.empty())
      text = std::regex_replace(text, std::regex(replace_from), replace_to);
    return WriteConfig(text + extra);
  };
  std::vector<Case> cases = {
      {"unknown key",
       {"train", "--config", config("", "\\[train\\]", "save_checkpoint_steps = 5\n[train]")},
       "save_checkpoints_steps"},
      {"wrong type",
       {"train", "--config", config("", "max_steps = 10", "max_steps = \"ten\"")},
       "max_steps"},
      {"out of range via --set",
       {"train", "--config", config(""), "--set", "train.max_steps=-1"},
       "max_steps"},
      {"unknown section", {"train", "--config", config("[trian]\nmax_steps = 1\n")}, "trian"},
      {"--set without =",
       {"train", "--config", config(""), "--set", "train.max_steps"},
       "train.max_steps"},
      {"--set unknown key", {"train", "--config", config(""), "--set", "run.bogus=1"}, "bogus"},
      {"unknown model",
       {"train", "--config", config("", "linear_regression", "linear_regresion")},
       "linear_regression"},
      {"TOML syntax", {"train", "--config", config("[run\n")}, ".toml:"},
      {"missing config file", {"train", "--config", dir_ + "/absent.toml"}, "absent.toml"},
      {"bad TF_CONFIG",
       {"train", "--config", config("")},
       "TF_CONFIG",
       {"TF_CONFIG={\"task\": {\"type\": 5}}"}},
      {"both checkpoint cadences",
       {"train", "--config",
        config("", "\\[train\\]",
               "save_checkpoints_steps = 5\nsave_checkpoints_secs = 5\n[train]")},
       "save_checkpoints"},
      {"bad learning rate",
       {"train", "--config", config("[model.params]\nlearning_rate = -1.0\n")},
       "learning_rate"},
      {"unknown optimizer",
       {"train", "--config", config("[model.params]\noptimizer = \"adamw\"\n")},
       "optimizer"},
      {"wrong dataset",
       {"train", "--config", config("", "synthetic_linear", "fashion_mnist")},
       "dataset"},
      {"missing model name",
       {"train", "--config", config("", "name = \"linear_regression\"", "")},
       "name"},
  };
  ASSERT_GE(cases.size(), 12u);
  for (const Case& c : cases) {
    std::string out, err;
    int code = Run(c.args, &out, &err, c.env);
    EXPECT_TRUE(code == 1 || code == 2) << c.what << ": exit " << code << "\n" << err;
    EXPECT_THAT(err, HasSubstr("error: ")) << c.what;
    EXPECT_THAT(err, HasSubstr(c.expect)) << c.what << ":\n" << err;
    EXPECT_THAT(err, ::testing::Not(HasSubstr("Check failed"))) << c.what;
  }
}

// A gzip stream of `bytes` zeros: a few MB that inflate to `bytes`.
std::string GzipBomb(size_t bytes) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 1, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY), Z_OK);
  const std::string zeros(1 << 20, '\0');
  std::string out;
  std::vector<char> buf(1 << 20);
  for (size_t done = 0; done <= bytes; done += zeros.size()) {
    const bool last = done + zeros.size() > bytes;
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(zeros.data()));
    zs.avail_in = last ? 0 : static_cast<uInt>(zeros.size());
    do {
      zs.next_out = reinterpret_cast<Bytef*>(buf.data());
      zs.avail_out = static_cast<uInt>(buf.size());
      deflate(&zs, last ? Z_FINISH : Z_NO_FLUSH);
      out.append(buf.data(), buf.size() - zs.avail_out);
    } while (zs.avail_out == 0);
  }
  deflateEnd(&zs);
  return out;
}

// Data files that would exhaust memory end in a clear error (exit 1, the file named),
// under the 6 GiB address-space limit a small machine or a container gives: a gzip
// bomb (2 GiB of zeros in 2 MB, over the quarter of memory a data file may take)
// and a file that never ends (/dev/zero).
TEST_F(TrainerTest, HostileDataFilesEndInAnError) {
  const std::string mlp = std::string(TANDEM_SOURCE_DIR) + "/configs/fashion_mlp.toml";
  struct Case {
    std::string what, file, expect;
  };
  for (const Case& c :
       {Case{"gzip bomb", "train-images-idx3-ubyte.gz", "decompresses to more than"},
        Case{"endless file", "train-images-idx3-ubyte", "or never ends"}}) {
    SCOPED_TRACE(c.what);
    const std::string data = dir_ + "/data_" + c.file;
    ASSERT_TRUE(env::MakeDirs(data).ok());
    if (c.what == "gzip bomb") {
      ASSERT_TRUE(env::WriteFileAtomic(data + "/" + c.file, GzipBomb(size_t{2} << 30)).ok());
    } else {
      ASSERT_EQ(symlink("/dev/zero", (data + "/" + c.file).c_str()), 0);
    }
    std::string command = "ulimit -v 6291456 && exec";
    for (const std::string& a : {kTrainer, std::string("train"), std::string("--config"), mlp,
                                 std::string("--set"), "run.model_dir=\"" + model_dir_ + "\"",
                                 std::string("--set"), "data.data_dir=\"" + data + "\""}) {
      command += " '" + a + "'";
    }
    Subprocess p({"/bin/sh", "-c", command}, data + "/run");
    const int code = p.Wait(kTimeout);
    const std::string err = p.Stderr();
    EXPECT_EQ(code, 1) << err;
    EXPECT_THAT(err, HasSubstr(c.file));
    EXPECT_THAT(err, HasSubstr(c.expect));
  }
}

}  // namespace
}  // namespace tandem

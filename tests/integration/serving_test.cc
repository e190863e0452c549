// Export and serving as a user runs them, with the stock trainer binary:
//   - fashion_cnn trained by train_and_evaluate with [export] strategy = "final",
//     served by `trainer serve_model`: predictions for 100 test images over HTTP
//     (TensorFlow Serving's REST API) equal `trainer predict --config`'s classes and
//     match its probabilities to 1e-5, as does `trainer predict --exported`; the
//     metadata lists the signature; a version exported later is served without a
//     restart; bad requests get 4xx with an {"error"} body and the server goes on;
//     SIGTERM ends it with exit 0.
//   - warm start of fashion_mlp from a .safetensors file written with Python's
//     safetensors conventions (no tandem metadata): the step-0 checkpoint holds the
//     file's values (read back with `ckpt dump`); a corrupt file is refused naming it.
#include <csignal>
#include <cstring>
#include <fstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "framework/data/fashion_mnist.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "serving/exported_model.h"
#include "tests/integration/cluster_job.h"
#include "tests/serving/rest_client.h"

namespace tandem::testing {
namespace {

using serving::testing::RestClient;
using ::testing::HasSubstr;

const bool kCurlReady = serving::testing::CurlGlobalInit();
constexpr auto kRunDeadline = std::chrono::seconds(240);
constexpr int kImages = 100;

std::string CnnConfig() { return std::string(TANDEM_SOURCE_DIR) + "/configs/fashion_cnn.toml"; }

std::vector<std::string> CnnArgs(const std::string& command, const std::string& model_dir,
                                 std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {
      TANDEM_TRAINER, command, "--config",
      CnnConfig(),    "--set", absl::StrCat("run.model_dir=\"", model_dir, "\"")};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

int RunToEnd(const std::vector<std::string>& args, const std::string& log, std::string* out,
             std::string* err = nullptr) {
  Subprocess p(args, log);
  const int code = p.Wait(kRunDeadline);
  if (out != nullptr) *out = p.Stdout();
  if (err != nullptr) *err = p.Stderr();
  if (code != 0) ADD_FAILURE() << args[1] << " exited " << code << ":\n" << p.Stderr();
  return code;
}

std::vector<json> JsonLines(const std::string& path) {
  std::vector<json> rows;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) rows.push_back(json::parse(line));
  return rows;
}

// Expects `got` (a prediction object) to equal `want` (a `trainer predict` line).
void ExpectSamePrediction(const json& got, const json& want, int row) {
  ASSERT_TRUE(got.is_object()) << got.dump();
  EXPECT_EQ(got["classes"], want["classes"]) << "row " << row;
  ASSERT_EQ(got["probabilities"].size(), want["probabilities"].size());
  for (size_t k = 0; k < want["probabilities"].size(); ++k) {
    EXPECT_NEAR(got["probabilities"][k].get<double>(), want["probabilities"][k].get<double>(), 1e-5)
        << "row " << row << " class " << k;
  }
}

// The version numbers `GET /v1/models/<name>` reports.
std::vector<std::string> ServedVersions(RestClient& client, const std::string& url) {
  serving::testing::HttpReply r = client.Get(url);
  std::vector<std::string> versions;
  if (r.status != 200) return versions;
  json j = json::parse(r.body, nullptr, false);
  if (!j.is_object() || !j.contains("model_version_status")) return versions;
  for (const json& v : j["model_version_status"]) {
    if (v.value("state", "") == "AVAILABLE") versions.push_back(v.value("version", ""));
  }
  return versions;
}

TEST(ServingTest, TrainedCnnIsExportedAndServedWithTheTrainersPredictions) {
  ASSERT_TRUE(kCurlReady);
  TempDir dir;
  const std::string model_dir = dir.path() + "/m";
  const std::string export_base = model_dir + "/export/exporter";
  std::string out;
  ASSERT_EQ(RunToEnd(CnnArgs("train_and_evaluate", model_dir,
                             {"--set", "train.max_steps=40", "--set", "eval.steps=2", "--set",
                              "export.strategy=\"final\""}),
                     dir.path() + "/train", &out),
            0);
  absl::StatusOr<std::vector<int64_t>> versions = serving::ListVersions(export_base);
  ASSERT_TRUE(versions.ok()) << versions.status();
  ASSERT_EQ(versions->size(), 1u);
  const std::string v1 = absl::StrCat(versions->front());

  // The checkpoint's predictions over the test set, and the first 100 test images as
  // instances (the PREDICT input's values, printed so that they round-trip).
  ASSERT_EQ(RunToEnd(CnnArgs("predict", model_dir, {"--output", dir.path() + "/ckpt.jsonl"}),
                     dir.path() + "/predict", nullptr),
            0);
  std::vector<json> want = JsonLines(dir.path() + "/ckpt.jsonl");
  ASSERT_GE(want.size(), static_cast<size_t>(kImages));
  absl::StatusOr<data::LabeledImages> test = data::LoadIdxSplit("", "t10k");
  ASSERT_TRUE(test.ok()) << test.status();
  json instances = json::array();
  {
    std::ofstream lines(dir.path() + "/instances.jsonl");
    for (int i = 0; i < kImages; ++i) {
      const float* px = test->images.data<float>() + i * 784;
      json image(std::vector<float>(px, px + 784));
      lines << image.dump() << "\n";
      instances.push_back(std::move(image));
    }
  }
  ASSERT_EQ(RunToEnd({TANDEM_TRAINER, "predict", "--exported", export_base, "--input",
                      dir.path() + "/instances.jsonl", "--output", dir.path() + "/exported.jsonl"},
                     dir.path() + "/predict_exported", nullptr),
            0);
  std::vector<json> exported = JsonLines(dir.path() + "/exported.jsonl");
  ASSERT_EQ(exported.size(), static_cast<size_t>(kImages));
  for (int i = 0; i < kImages; ++i) ExpectSamePrediction(exported[i], want[i], i);

  const std::string port_file = dir.path() + "/port";
  Subprocess server({TANDEM_TRAINER, "serve_model", "--export_dir", export_base, "--port", "0",
                     "--port_file", port_file, "--file_system_poll_wait_seconds", "1"},
                    dir.path() + "/serve");
  std::string port;
  for (int i = 0; i < 300 && port.empty(); ++i) {
    std::ifstream in(port_file);
    std::getline(in, port);
    if (port.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(port.empty()) << "serve_model wrote no port:\n" << server.Stderr();
  const std::string base = absl::StrCat("http://127.0.0.1:", port, "/v1/models/fashion_cnn");
  RestClient client;
  EXPECT_THAT(ServedVersions(client, base), ::testing::ElementsAre(v1));
  serving::testing::HttpReply meta = client.Get(base + "/metadata");
  ASSERT_EQ(meta.status, 200) << meta.body;
  json sig =
      json::parse(meta.body)["metadata"]["signature_def"]["signature_def"]["serving_default"];
  EXPECT_EQ(sig["inputs"]["image"]["dtype"], "DT_FLOAT") << meta.body;
  EXPECT_EQ(sig["outputs"]["probabilities"]["dtype"], "DT_FLOAT") << meta.body;
  EXPECT_EQ(sig["outputs"]["classes"]["dtype"], "DT_INT64") << meta.body;

  const std::string request = json{{"instances", instances}}.dump();
  serving::testing::HttpReply predicted = client.Post(base + ":predict", request);
  ASSERT_EQ(predicted.status, 200) << predicted.body.substr(0, 500);
  json predictions = json::parse(predicted.body)["predictions"];
  ASSERT_EQ(predictions.size(), static_cast<size_t>(kImages));
  for (int i = 0; i < kImages; ++i) ExpectSamePrediction(predictions[i], want[i], i);

  // Bad requests: 4xx with TensorFlow Serving's error body; the server goes on.
  for (const auto& [body, code] : std::vector<std::pair<std::string, long>>{
           {"{\"instances\": [", 400},
           {"{\"instances\": [[1, 2, 3]]}", 400},
           {"{\"instances\": [\"" + std::string(10, 'a') + "\"]}", 400}}) {
    serving::testing::HttpReply bad = client.Post(base + ":predict", body);
    EXPECT_EQ(bad.status, code) << body;
    EXPECT_TRUE(json::parse(bad.body, nullptr, false).contains("error")) << bad.body;
  }
  EXPECT_EQ(client.Post(base + "x:predict", request).status, 404);

  // A later export is picked up without a restart, and answers the same.
  ASSERT_EQ(RunToEnd(CnnArgs("export", model_dir, {"--output", export_base}),
                     dir.path() + "/export", &out),
            0);
  versions = serving::ListVersions(export_base);
  ASSERT_TRUE(versions.ok() && versions->size() == 2u);
  const std::string v2 = absl::StrCat(versions->back());
  std::vector<std::string> served;
  for (int i = 0; i < 100; ++i) {
    served = ServedVersions(client, base);
    if (served == std::vector<std::string>{v2}) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_THAT(served, ::testing::ElementsAre(v2));
  predicted = client.Post(absl::StrCat(base, "/versions/", v2, ":predict"), request);
  ASSERT_EQ(predicted.status, 200) << predicted.body.substr(0, 500);
  predictions = json::parse(predicted.body)["predictions"];
  for (int i = 0; i < kImages; ++i) ExpectSamePrediction(predictions[i], want[i], i);
  EXPECT_EQ(client.Post(absl::StrCat(base, "/versions/", v1, ":predict"), request).status, 404);

  server.Kill(SIGTERM);
  EXPECT_EQ(server.Wait(std::chrono::seconds(30)), 0) << server.Stderr();
}

// The values `ckpt dump --limit -1` prints for a tensor.
std::vector<float> DumpedValues(const std::string& prefix, const std::string& tensor,
                                const std::string& log) {
  std::string out;
  Subprocess p({TANDEM_CKPT, "dump", prefix, tensor, "--limit", "-1"}, log);
  EXPECT_EQ(p.Wait(std::chrono::seconds(60)), 0) << p.Stderr();
  out = p.Stdout();
  std::vector<float> values;
  const size_t open = out.find('['), close = out.find(']', out.find('[', open + 1));
  if (open == std::string::npos || close == std::string::npos) return values;
  const std::string list =
      out.substr(out.find('[', open + 1) + 1, close - out.find('[', open + 1) - 1);
  for (absl::string_view item : absl::StrSplit(list, ", ")) {
    float v;
    if (absl::SimpleAtof(item, &v)) values.push_back(v);
  }
  return values;
}

// Python's safetensors layout for {name: float32 tensor}: no __metadata__ CRCs, the
// header padded with spaces to 8 bytes, data in the header's order.
std::string PythonSafetensors(
    const std::vector<std::pair<std::string, std::vector<int64_t>>>& specs,
    const std::vector<std::vector<float>>& values) {
  json header = {{"__metadata__", {{"format", "pt"}}}};
  std::string data;
  for (size_t i = 0; i < specs.size(); ++i) {
    const size_t begin = data.size();
    data.append(reinterpret_cast<const char*>(values[i].data()), values[i].size() * 4);
    header[specs[i].first] = {
        {"dtype", "F32"}, {"shape", specs[i].second}, {"data_offsets", {begin, data.size()}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  const uint64_t n = text.size();
  std::memcpy(bytes.data(), &n, 8);
  return bytes + text + data;
}

TEST(ServingTest, WarmStartFromAPythonSafetensorsFile) {
  TempDir dir;
  // fashion_mlp's first two kernels: [784, 256] and [256, 128] (configs/fashion_mlp.toml).
  std::vector<float> k0(784 * 256), k1(256 * 128);
  for (size_t i = 0; i < k0.size(); ++i)
    k0[i] = static_cast<float>(static_cast<int>(i % 17) - 8) / 64;
  for (size_t i = 0; i < k1.size(); ++i)
    k1[i] = static_cast<float>(static_cast<int>(i % 5) - 2) / 32;
  const std::string file = dir.path() + "/imported.safetensors";
  {
    std::ofstream(file, std::ios::binary)
        << PythonSafetensors({{"fc1.weight", {784, 256}}, {"fc2.weight", {256, 128}}}, {k0, k1});
  }
  const std::string model_dir = dir.path() + "/m";
  std::vector<std::string> args =
      JobArgs("train", model_dir,
              {"train.max_steps=1", absl::StrCat("train.warm_start_from=\"", file, "\""),
               "train.warm_start_vars=\"dense(_1)?/kernel\"",
               "train.warm_start_map.dense/kernel=fc1.weight",
               "train.warm_start_map.dense_1/kernel=fc2.weight"});
  Subprocess train(args, dir.path() + "/train");
  ASSERT_EQ(train.Wait(kRunDeadline), 0) << train.Stderr();
  EXPECT_THAT(train.Stderr(), HasSubstr("Warm-started 2 variables from " + file));
  const std::string step0 = model_dir + "/model.ckpt-0";
  EXPECT_EQ(DumpedValues(step0, "dense/kernel", dir.path() + "/dump0"), k0);
  EXPECT_EQ(DumpedValues(step0, "dense_1/kernel", dir.path() + "/dump1"), k1);

  // A corrupt file (one byte of data missing) is refused, naming it.
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  { std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() - 1); }
  args = JobArgs("train", dir.path() + "/m2",
                 {"train.max_steps=1", absl::StrCat("train.warm_start_from=\"", file, "\""),
                  "train.warm_start_map.dense/kernel=fc1.weight",
                  "train.warm_start_map.dense_1/kernel=fc2.weight",
                  "train.warm_start_vars=\"dense(_1)?/kernel\""});
  Subprocess broken(args, dir.path() + "/broken");
  EXPECT_NE(broken.Wait(kRunDeadline), 0);
  EXPECT_THAT(broken.Stderr(), HasSubstr(file + ": corrupt safetensors shard"));
}

}  // namespace
}  // namespace tandem::testing

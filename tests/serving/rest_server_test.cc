// The REST server end to end, over HTTP with libcurl: the tiny model (input/x [-1,3]
// float -> MatMul + BiasAdd -> softmax "probabilities" and argmax "classes") exported
// with ExportGraph/WriteExport, served in this process on 127.0.0.1 (ephemeral port).
// Answers are compared to the same math in plain C++; concurrent clients check that
// batches are merged (server counters) and split back right; a new version directory
// is served after a poll without a restart; every client error gets its status code
// and an {"error"} body, and the server answers correctly afterwards.
#include "serving/rest_server.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/serving/rest_client.h"
#include "tests/serving/tiny_export.h"

namespace tandem::serving {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using testing::HttpReply;
using testing::RestClient;

const bool kCurlReady = testing::CurlGlobalInit();

// The tiny model's answer for one example.
struct Expected {
  float p[2];
  int64_t cls;
};

Expected TinyAnswer(float scale, const float x[3]) {
  const std::array<float, 2> logits = testing::TinyLogits(scale, x);
  const float m = std::max(logits[0], logits[1]);
  const float e0 = std::exp(logits[0] - m), e1 = std::exp(logits[1] - m);
  return {{e0 / (e0 + e1), e1 / (e0 + e1)}, logits[1] > logits[0] ? 1 : 0};
}

// {"instances": [[x0, x1, x2], ...]} for `rows` examples from `x`.
std::string InstancesBody(const std::vector<float>& x) {
  json instances = json::array();
  for (size_t r = 0; r + 3 <= x.size(); r += 3) instances.push_back({x[r], x[r + 1], x[r + 2]});
  return json({{"instances", instances}}).dump();
}

// Checks a row-format answer for the examples `x` against the model at `scale`.
void ExpectPredictions(const HttpReply& reply, const std::vector<float>& x, float scale) {
  ASSERT_EQ(reply.status, 200) << reply.body << reply.error;
  json j = json::parse(reply.body);
  ASSERT_EQ(j["predictions"].size(), x.size() / 3) << reply.body;
  for (size_t r = 0; r < x.size() / 3; ++r) {
    const Expected e = TinyAnswer(scale, &x[r * 3]);
    const json& p = j["predictions"][r];
    EXPECT_NEAR(p["probabilities"][0].get<double>(), e.p[0], 1e-5) << "row " << r;
    EXPECT_NEAR(p["probabilities"][1].get<double>(), e.p[1], 1e-5) << "row " << r;
    EXPECT_EQ(p["classes"].get<int64_t>(), e.cls) << "row " << r;
  }
}

class RestServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kCurlReady);
    dir_ = *env::MakeTempDir("rest_server_test");
  }
  void TearDown() override {
    server_.reset();
    models_.reset();
    (void)env::DeleteRecursively(dir_);
  }
  std::string Base() const { return env::JoinPath(dir_, "export"); }
  // Exports a new version of the tiny model at `scale`; returns its number.
  int64_t Export(float scale) {
    absl::StatusOr<std::string> v = testing::ExportTinyModel(
        env::JoinPath(dir_, absl::StrCat("model", exports_++)), Base(), scale);
    EXPECT_TRUE(v.ok()) << v.status();
    int64_t version = 0;
    EXPECT_TRUE(absl::SimpleAtoi(v->substr(v->rfind('/') + 1), &version)) << *v;
    return version;
  }
  void Start(RestServerOptions options = {}, double poll_secs = 0) {
    ModelManagerOptions mo;
    mo.export_base = Base();
    mo.file_system_poll_wait_seconds = poll_secs;
    auto models = ModelManager::Create(mo);
    ASSERT_TRUE(models.ok()) << models.status();
    models_ = std::move(*models);
    options.host = "127.0.0.1";
    options.port = 0;
    auto server = RestServer::Start(options, models_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    ASSERT_GT(server_->port(), 0);
  }
  std::string Url(const std::string& path) const {
    return absl::StrCat("http://127.0.0.1:", server_->port(), path);
  }

  std::string dir_;
  int exports_ = 0;
  std::unique_ptr<ModelManager> models_;
  std::unique_ptr<RestServer> server_;
};

TEST_F(RestServerTest, StatusAndMetadataInTensorFlowServingsShape) {
  const int64_t v = Export(1.0f);
  Start();
  RestClient client;
  HttpReply status = client.Get(Url("/v1/models/tiny"));
  ASSERT_EQ(status.status, 200) << status.body;
  EXPECT_THAT(status.headers, HasSubstr("Content-Type: application/json"));
  EXPECT_EQ(json::parse(status.body),
            json::parse(absl::StrCat(R"({"model_version_status": [{"version": ")", v,
                                     R"(", "state": "AVAILABLE", "status": {"error_code": "OK",)",
                                     R"( "error_message": ""}}]})")));
  EXPECT_EQ(client.Get(Url(absl::StrCat("/v1/models/tiny/versions/", v))).status, 200);

  const std::vector<std::string> paths = {
      "/v1/models/tiny/metadata", absl::StrCat("/v1/models/tiny/versions/", v, "/metadata")};
  for (const std::string& path : paths) {
    HttpReply meta = client.Get(Url(path));
    ASSERT_EQ(meta.status, 200) << path << ": " << meta.body;
    json j = json::parse(meta.body);
    EXPECT_EQ(j["model_spec"],
              json({{"name", "tiny"}, {"signature_name", ""}, {"version", std::to_string(v)}}));
    const json& def = j["metadata"]["signature_def"]["signature_def"]["serving_default"];
    EXPECT_EQ(def["method_name"], "tensorflow/serving/predict");
    EXPECT_EQ(def["inputs"]["x"], json::parse(R"({"dtype": "DT_FLOAT", "name": "input/x:0",
        "tensor_shape": {"dim": [{"size": "-1", "name": ""}, {"size": "3", "name": ""}],
                         "unknown_rank": false}})"));
    EXPECT_EQ(def["outputs"]["classes"]["dtype"], "DT_INT64");
    EXPECT_EQ(def["outputs"]["probabilities"]["dtype"], "DT_FLOAT");
    EXPECT_EQ(def["outputs"]["probabilities"]["tensor_shape"]["dim"][1]["size"], "2");
  }
}

TEST_F(RestServerTest, PredictRowAndColumnarMatchTheMath) {
  const int64_t v = Export(0.5f);
  Start();
  RestClient client;
  const std::vector<float> x = {1, 2, 3, -1, 0.5f, 2, 0, 0, 0, 3, -2, -1};
  ExpectPredictions(client.Post(Url("/v1/models/tiny:predict"), InstancesBody(x)), x, 0.5f);
  ExpectPredictions(
      client.Post(Url(absl::StrCat("/v1/models/tiny/versions/", v, ":predict")),
                  R"({"signature_name": "serving_default", "instances": [{"x": [1, 2, 3]}]})"),
      {1, 2, 3}, 0.5f);

  HttpReply columnar =
      client.Post(Url("/v1/models/tiny:predict"), R"({"inputs": {"x": [[1, 2, 3], [3, -2, -1]]}})");
  ASSERT_EQ(columnar.status, 200) << columnar.body;
  json j = json::parse(columnar.body);
  const float rows[2][3] = {{1, 2, 3}, {3, -2, -1}};
  ASSERT_EQ(j["outputs"]["classes"].size(), 2u);
  for (int r = 0; r < 2; ++r) {
    const Expected e = TinyAnswer(0.5f, rows[r]);
    EXPECT_EQ(j["outputs"]["classes"][r].get<int64_t>(), e.cls);
    EXPECT_NEAR(j["outputs"]["probabilities"][r][0].get<double>(), e.p[0], 1e-5);
    EXPECT_NEAR(j["outputs"]["probabilities"][r][1].get<double>(), e.p[1], 1e-5);
  }
}

// 8 client threads, each with its own examples and 1 to 3 of them per request: every
// answer must be the request's own, and the server must have merged requests.
void RunConcurrentClients(const std::string& url, float scale, int threads, int per_thread) {
  std::atomic<int> failures{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < threads; ++t) {
    clients.emplace_back([&, t] {
      RestClient client;
      for (int i = 0; i < per_thread; ++i) {
        std::vector<float> x;
        for (int r = 0; r < 1 + (t + i) % 3; ++r) {
          x.insert(x.end(), {0.25f * t - 1, 0.1f * i - 0.5f * r, 0.01f * (t * 100 + i)});
        }
        HttpReply reply = client.Post(url, InstancesBody(x));
        ExpectPredictions(reply, x, scale);
        if (::testing::Test::HasFailure()) {
          ++failures;
          return;
        }
      }
    });
  }
  for (std::thread& c : clients) c.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(RestServerTest, ConcurrentRequestsAreBatchedAndSplitBackRight) {
  Export(1.5f);
  RestServerOptions options;
  options.batching.max_batch_size = 16;
  options.batching.batch_timeout_micros = 20000;
  Start(options);
  RunConcurrentClients(Url("/v1/models/tiny:predict"), 1.5f, 8, 25);
  const BatcherStats stats = server_->batcher_stats();
  EXPECT_EQ(stats.requests, 200);
  EXPECT_GT(stats.merged_batches, 0);
  EXPECT_GT(stats.merged_requests, 8);
  EXPECT_LT(stats.batches, stats.requests);
  EXPECT_LE(stats.max_batch_rows, 16);
  EXPECT_EQ(stats.rejected, 0);
}

TEST_F(RestServerTest, BatchSizeOneAndBatchingDisabledAnswerTheSame) {
  Export(1.0f);
  RestServerOptions one;
  one.batching.max_batch_size = 1;
  Start(one);
  // Requests of one example each go through the queue alone; larger ones run directly.
  RunConcurrentClients(Url("/v1/models/tiny:predict"), 1.0f, 4, 10);
  BatcherStats stats = server_->batcher_stats();
  EXPECT_EQ(stats.merged_batches, 0);
  EXPECT_GT(stats.direct, 0);
  EXPECT_EQ(stats.batches + stats.direct, stats.requests);
  server_.reset();

  RestServerOptions off;
  off.batching.enabled = false;
  Start(off);
  RunConcurrentClients(Url("/v1/models/tiny:predict"), 1.0f, 4, 10);
  stats = server_->batcher_stats();
  EXPECT_EQ(stats.batches, 0);
  EXPECT_EQ(stats.direct, 40);
}

TEST_F(RestServerTest, RequestLargerThanMaxBatchSizeRunsOnItsOwn) {
  Export(1.0f);
  RestServerOptions options;
  options.batching.max_batch_size = 4;
  Start(options);
  std::vector<float> x;
  for (int i = 0; i < 30; ++i) x.push_back(0.1f * i - 1);
  RestClient client;
  ExpectPredictions(client.Post(Url("/v1/models/tiny:predict"), InstancesBody(x)), x, 1.0f);
  EXPECT_EQ(server_->batcher_stats().direct, 1);
}

TEST_F(RestServerTest, NewVersionIsServedAfterAPollAndABrokenOneIsSkipped) {
  const int64_t v1 = Export(1.0f);
  Start({}, /*poll_secs=*/0.1);
  RestClient client;
  const std::vector<float> x = {1, -2, 0.5f};
  ExpectPredictions(client.Post(Url("/v1/models/tiny:predict"), InstancesBody(x)), x, 1.0f);
  std::shared_ptr<const ExportedModel> held = models_->Current();

  // A version that cannot load: logged and skipped, the old one stays.
  const std::string broken = env::JoinPath(Base(), std::to_string(v1 + 1));
  ASSERT_TRUE(env::MakeDirs(broken).ok());
  ASSERT_TRUE(env::WriteFileAtomic(env::JoinPath(broken, kSignatureFile), "{not json").ok());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (models_->load_failures() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(models_->load_failures(), 1) << "the broken version was not tried within 30 s";
  EXPECT_EQ(models_->Current()->version(), v1);
  ExpectPredictions(client.Post(Url("/v1/models/tiny:predict"), InstancesBody(x)), x, 1.0f);

  const int64_t v3 = Export(-2.0f);
  ASSERT_GT(v3, v1 + 1);
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::string version;
  while (std::chrono::steady_clock::now() < deadline) {
    HttpReply status = client.Get(Url("/v1/models/tiny"));
    ASSERT_EQ(status.status, 200) << status.body;
    version = json::parse(status.body)["model_version_status"][0]["version"];
    if (version == std::to_string(v3)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(version, std::to_string(v3)) << "the new version was not served within 30 s";
  ExpectPredictions(client.Post(Url("/v1/models/tiny:predict"), InstancesBody(x)), x, -2.0f);
  EXPECT_EQ(models_->swaps(), 1);
  EXPECT_EQ(models_->load_failures(), 1);  // Tried once, not at every poll.
  // Only the newest version is served.
  HttpReply old =
      client.Post(Url(absl::StrCat("/v1/models/tiny/versions/", v1, ":predict")), InstancesBody(x));
  EXPECT_EQ(old.status, 404);
  EXPECT_EQ(json::parse(old.body)["error"],
            absl::StrCat("Servable not found for request: Specific(tiny, ", v1, ")"));
  // A request that held the old version still runs on it.
  absl::StatusOr<NamedTensors> out =
      held->Predict({{"x", Tensor::FromVector<float>(x, TensorShape({1, 3}))}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NEAR(out->at("probabilities").data<float>()[0], TinyAnswer(1.0f, x.data()).p[0], 1e-5);
}

// One bad request of each kind: its status, an {"error": "..."} body naming the
// problem; then a good request still gets the right answer.
TEST_F(RestServerTest, ClientErrorsAreAnsweredAndTheServerKeepsServing) {
  const int64_t v = Export(1.0f);
  RestServerOptions options;
  options.limits.max_body_bytes = 4096;
  Start(options);
  RestClient client;
  const std::string predict = Url("/v1/models/tiny:predict");
  struct Case {
    std::string name;
    HttpReply reply;
    long status;
    std::string message;
  };
  const std::string s = "DELETE";
  std::vector<Case> cases = {
      {"bad JSON", client.Post(predict, R"({"instances": [[1, 2, 3])"), 400, "JSON Parse error"},
      {"wrong shape", client.Post(predict, R"({"instances": [[1, 2]]})"), 400,
       "input 'x', instance 0: has shape [2] but the input's shape is [3]"},
      {"wrong dtype", client.Post(predict, R"({"instances": [[1, true, 3]]})"), 400,
       "expected a number (float32), got boolean true"},
      {"b64", client.Post(predict, R"({"instances": [{"b64": "AAAA"}]})"), 400, "base64"},
      {"extra input", client.Post(predict, R"({"instances": [{"x": [1, 2, 3], "y": 1}]})"), 400,
       "has input 'y', which the signature does not have"},
      {"too deep", client.Post(predict, std::string(100, '[')), 400, "more than 64 levels deep"},
      {"oversize body", client.Post(predict, std::string(5000, ' ')), 413,
       "larger than the limit of 4096 bytes"},
      {"oversize chunked body", client.PostChunked(predict, 12000), 413,
       "larger than the limit of 4096 bytes"},
      {"unknown model", client.Post(Url("/v1/models/nope:predict"), "{}"), 404,
       "Servable not found for request: Latest(nope)"},
      {"unknown version", client.Get(Url("/v1/models/tiny/versions/1/metadata")), 404,
       "Servable not found for request: Specific(tiny, 1)"},
      {"unknown path", client.Get(Url("/v2/models/tiny")), 404, "Malformed request: GET /v2"},
      {"unknown verb", client.Post(Url("/v1/models/tiny:classify"), "{}"), 404,
       "Malformed request"},
      {"GET on predict", client.Get(predict), 405, "Method GET is not allowed"},
      {"POST on status", client.Post(Url("/v1/models/tiny"), "{}"), 405, "use GET"},
      {"DELETE", client.Call(s, Url("/v1/models/tiny/metadata"), nullptr, {}), 405,
       "Method DELETE"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.reply.status, c.status) << c.name << ": " << c.reply.body << c.reply.error;
    json j = json::parse(c.reply.body, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object() && j.contains("error")) << c.name << ": " << c.reply.body;
    EXPECT_THAT(j["error"].get<std::string>(), HasSubstr(c.message)) << c.name;
  }
  EXPECT_THAT(cases[13].reply.headers, HasSubstr("Allow: GET"));
  // A chunked body far past the limit closes the connection instead.
  RestClient other;
  HttpReply endless = other.PostChunked(predict, 1 << 20);
  EXPECT_NE(endless.status, 200);
  EXPECT_EQ(server_->handler().errors(), static_cast<int64_t>(cases.size()));

  const std::vector<float> x = {0.5f, 0.25f, -1};
  ExpectPredictions(client.Post(predict, InstancesBody(x)), x, 1.0f);
  ExpectPredictions(
      other.Post(Url(absl::StrCat("/v1/models/tiny/versions/", v, ":predict")), InstancesBody(x)),
      x, 1.0f);
}

TEST_F(RestServerTest, BearerTokenIsRequiredWhenSet) {
  Export(1.0f);
  RestServerOptions options;
  options.token = "s3cret-token";
  Start(options);
  RestClient client;
  const std::string body = InstancesBody({1, 2, 3});
  const std::string predict = Url("/v1/models/tiny:predict");
  for (const std::vector<std::string>& headers :
       std::vector<std::vector<std::string>>{{},
                                             {"Authorization: Bearer wrong-token!"},
                                             {"Authorization: Bearer s3cret-toke"},
                                             {"Authorization: Basic czNjcmV0LXRva2Vu"}}) {
    for (const HttpReply& r :
         {client.Post(predict, body, headers), client.Get(Url("/v1/models/tiny"), headers),
          client.Get(Url("/v1/unknown"), headers)}) {
      EXPECT_EQ(r.status, 401) << r.body;
      EXPECT_TRUE(json::parse(r.body).contains("error")) << r.body;
      EXPECT_THAT(r.headers, HasSubstr("WWW-Authenticate: Bearer"));
    }
  }
  ExpectPredictions(client.Post(predict, body, {"Authorization: Bearer s3cret-token"}), {1, 2, 3},
                    1.0f);
  EXPECT_EQ(client.Get(Url("/v1/models/tiny"), {"authorization: bearer s3cret-token"}).status, 200);
  EXPECT_TRUE(TokensEqual("abc", "abc"));
  EXPECT_FALSE(TokensEqual("abc", "abd"));
  EXPECT_FALSE(TokensEqual("abc", "abcd"));
}

TEST_F(RestServerTest, StartFailsCleanlyOnABadHostOrABusyPort) {
  Export(1.0f);
  Start();
  RestServerOptions busy;
  busy.port = server_->port();
  EXPECT_FALSE(RestServer::Start(busy, models_.get()).ok());
  RestServerOptions bad;
  bad.host = "no.such.host.invalid";
  EXPECT_FALSE(RestServer::Start(bad, models_.get()).ok());
  ModelManagerOptions empty;
  empty.export_base = env::JoinPath(dir_, "nothing");
  EXPECT_EQ(ModelManager::Create(empty).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tandem::serving

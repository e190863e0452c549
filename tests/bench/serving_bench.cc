// serving_bench: the REST predict server's cost. Exports a model with the Fashion-MNIST
// CNN's shapes (image [batch, 784] -> conv5x5x32, pool, conv5x5x64, pool, dense 1024,
// dense 10 -> softmax "probabilities" and argmax "classes"; --model mlp for
// 784-256-128-10) with freshly initialised weights, serves it in this process on
// 127.0.0.1, and measures with `--clients` threads, each keeping one connection alive:
//
//   http, batching     POST :predict to a server with batching on (the defaults:
//                      max_batch_size 64, batch_timeout_micros 1000, 2 batch threads)
//   http, no batching  the same against a second server without batching
//   in-process         ExportedModel::Predict called directly on the same loaded model
//
// for requests of 1 and of 64 examples (bodies as a client writes them: pixel / 255 as
// JSON doubles). Prints requests/s, examples/s, p50 and p99 latency per row and the
// ratio of each HTTP row's throughput to the in-process one. Run by tests/bench/run.sh.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "apps/examples/fashion_models.h"
#include "checkpoint/saver.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/nn_ops.h"
#include "framework/ops/state_ops.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"
#include "serving/export_writer.h"
#include "serving/rest_model_manager.h"
#include "serving/rest_server.h"
#include "tests/serving/rest_client.h"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;

struct Graph {
  Scope root = Scope::NewRootScope();
  Output image, probabilities, classes;
};

void BuildModel(const std::string& model, Graph* g) {
  g->image =
      ops::Placeholder(g->root.WithOpName("input/image"), DType::kFloat, PartialShape({-1, 784}));
  Output logits = model == "mlp" ? examples::BuildMlp(g->root, g->image, {256, 128}, 1)
                                 : examples::BuildCnn(g->root, g->image, false, 1);
  g->probabilities = ops::Softmax(g->root, logits);
  g->classes = ops::ArgMax(g->root, logits, 1);
}

// Initialises the model, checkpoints it and exports it under `dir`/export.
absl::StatusOr<std::string> ExportModel(const std::string& model, const std::string& dir) {
  std::string prefix;
  {
    Graph g;
    BuildModel(model, &g);
    Node* init = ops::GlobalVariablesInitializer(g.root);
    TANDEM_RETURN_IF_ERROR(g.root.status());
    TANDEM_ASSIGN_OR_RETURN(auto saver, checkpoint::Saver::Create(g.root.graph()));
    proto::GraphDef def;
    g.root.graph()->ToGraphDef(&def);
    TANDEM_ASSIGN_OR_RETURN(auto session, NewDirectSession(def));
    TANDEM_RETURN_IF_ERROR(session->Run({}, {}, {init->name()}).status());
    TANDEM_ASSIGN_OR_RETURN(prefix, saver->Save(session.get(), env::JoinPath(dir, "model"), 1));
  }
  Graph g;
  BuildModel(model, &g);
  TANDEM_RETURN_IF_ERROR(g.root.status());
  serving::ExportGraphOptions o;
  o.model_name = "fashion_" + model;
  o.inputs = {{"image", g.image}};
  o.outputs = {{"probabilities", g.probabilities}, {"classes", g.classes}};
  o.checkpoint_prefix = prefix;
  const std::string base = env::JoinPath(dir, "export");
  TANDEM_RETURN_IF_ERROR(serving::ExportGraph(g.root.graph(), o, base).status());
  return base;
}

struct Row {
  std::string name;
  double requests_per_sec = 0;
  double p50_ms = 0, p99_ms = 0;
  int64_t errors = 0;
};

// Runs `clients` threads, each calling the function that `make_call` makes for it
// (so per-thread state lives in its thread) in a loop for warmup + seconds; times
// the calls that start after the warmup and end before the deadline.
Row Measure(const std::string& name, int clients, double warmup, double seconds,
            const std::function<std::function<bool()>()>& make_call) {
  const Clock::time_point start = Clock::now() + std::chrono::milliseconds(100);
  const Clock::time_point timed =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(warmup));
  const Clock::time_point end =
      timed + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::vector<std::vector<double>> latencies(clients);
  std::atomic<int64_t> errors{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      std::function<bool()> call = make_call();
      std::this_thread::sleep_until(start);
      for (Clock::time_point t0 = Clock::now(); t0 < end; t0 = Clock::now()) {
        const bool ok = call();
        const Clock::time_point t1 = Clock::now();
        if (!ok) ++errors;
        if (t0 >= timed && t1 <= end) {
          latencies[c].push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<double> all;
  for (const auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  Row row{name};
  row.errors = errors.load();
  if (!all.empty()) {
    row.requests_per_sec = static_cast<double>(all.size()) / seconds;
    row.p50_ms = all[all.size() / 2];
    row.p99_ms = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  }
  return row;
}

int Main(int argc, char** argv) {
  CLI::App app{"REST predict server vs in-process ExportedModel::Predict."};
  std::string model = "cnn";
  double seconds = 5, warmup = 1;
  int clients = 8;
  app.add_option("--model", model, "cnn (Fashion-MNIST CNN shapes) or mlp")
      ->check(CLI::IsMember({"cnn", "mlp"}))
      ->capture_default_str();
  app.add_option("--seconds", seconds, "timed seconds per row")->capture_default_str();
  app.add_option("--warmup", warmup, "untimed seconds before each row")->capture_default_str();
  app.add_option("--clients", clients, "concurrent client threads")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = 1;
  google::InitGoogleLogging(argv[0]);
  if (!serving::testing::CurlGlobalInit()) return 1;

  absl::StatusOr<std::string> dir = env::MakeTempDir("serving_bench");
  CHECK(dir.ok()) << dir.status();
  absl::StatusOr<std::string> base = ExportModel(model, *dir);
  CHECK(base.ok()) << base.status();
  serving::ModelManagerOptions mo;
  mo.export_base = *base;
  mo.file_system_poll_wait_seconds = 0;
  auto models = serving::ModelManager::Create(mo);
  CHECK(models.ok()) << models.status();
  serving::RestServerOptions batching, plain;
  plain.batching.enabled = false;
  auto server = serving::RestServer::Start(batching, models->get());
  CHECK(server.ok()) << server.status();
  auto plain_server = serving::RestServer::Start(plain, models->get());
  CHECK(plain_server.ok()) << plain_server.status();
  const std::string name = (*models)->name();
  std::shared_ptr<const serving::ExportedModel> loaded = (*models)->Current();

  std::printf("serving_bench: %s, %d clients (keep-alive), %.0f s per row, %u cores\n",
              name.c_str(), clients, seconds, std::thread::hardware_concurrency());
  std::printf("%-26s %10s %12s %9s %9s %7s %9s\n", "config", "requests/s", "examples/s", "p50 ms",
              "p99 ms", "errors", "vs in-proc");
  std::mt19937 rng(1);
  for (int batch : {1, 64}) {
    std::vector<float> pixels(static_cast<size_t>(batch) * 784);
    for (float& p : pixels) p = static_cast<float>(rng() % 256) / 255.0f;
    nlohmann::json instances = nlohmann::json::array();
    for (int r = 0; r < batch; ++r) {
      nlohmann::json row = nlohmann::json::array();
      for (int k = 0; k < 784; ++k) row.push_back(static_cast<double>(pixels[r * 784 + k]));
      instances.push_back(row);
    }
    const std::string body = nlohmann::json({{"instances", instances}}).dump();
    const Tensor images =
        Tensor::FromVector<float>(pixels, TensorShape({batch, static_cast<int64_t>(784)}));
    auto http = [&](int port) {
      const std::string url =
          absl::StrCat("http://127.0.0.1:", port, "/v1/models/", name, ":predict");
      return [url, &body]() -> std::function<bool()> {
        auto client = std::make_shared<serving::testing::RestClient>();
        return [client, url, &body] { return client->Post(url, body).status == 200; };
      };
    };
    std::vector<Row> rows;
    rows.push_back(Measure(absl::StrCat("batch=", batch, " in-process"), clients, warmup, seconds,
                           [&]() -> std::function<bool()> {
                             return [&] { return loaded->Predict({{"image", images}}).ok(); };
                           }));
    rows.push_back(Measure(absl::StrCat("batch=", batch, " http, batching"), clients, warmup,
                           seconds, http((*server)->port())));
    rows.push_back(Measure(absl::StrCat("batch=", batch, " http, no batching"), clients, warmup,
                           seconds, http((*plain_server)->port())));
    for (const Row& r : rows) {
      std::printf(
          "%-26s %10.1f %12.1f %9.2f %9.2f %7lld %9.2f\n", r.name.c_str(), r.requests_per_sec,
          r.requests_per_sec * batch, r.p50_ms, r.p99_ms, static_cast<long long>(r.errors),
          rows[0].requests_per_sec > 0 ? r.requests_per_sec / rows[0].requests_per_sec : 0.0);
    }
    std::fflush(stdout);
  }
  const serving::BatcherStats stats = (*server)->batcher_stats();
  std::printf("batching server: %lld requests in %lld batches (%lld merged, largest %lld)\n",
              static_cast<long long>(stats.requests), static_cast<long long>(stats.batches),
              static_cast<long long>(stats.merged_batches),
              static_cast<long long>(stats.max_batch_rows));
  loaded.reset();
  (*server)->Stop();
  (*plain_server)->Stop();
  (void)env::DeleteRecursively(*dir);
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) { return tandem::Main(argc, argv); }

#include "apps/examples/session_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "apps/examples/fashion_models.h"
#include "framework/core/status.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/losses.h"
#include "framework/ops/optimizers.h"
#include "framework/ops/state_ops.h"
#include "framework/runtime/session.h"
#include "glog/logging.h"

namespace tandem::examples {
namespace {

struct ModelGraph {
  Scope root = Scope::NewRootScope();
  Output images, labels, logits, loss;
  Node* train_op = nullptr;
  Node* init = nullptr;
};

absl::Status BuildGraph(const SessionTrainOptions& o, bool training, ModelGraph* g) {
  g->root.graph()->set_seed(o.seed);
  g->images =
      ops::Placeholder(g->root.WithOpName("images"), DType::kFloat, PartialShape({-1, 784}));
  g->labels = ops::Placeholder(g->root.WithOpName("labels"), DType::kInt32, PartialShape({-1}));
  if (o.model == "mlp") {
    g->logits = BuildMlp(g->root, g->images, o.hidden, o.seed);
  } else if (o.model == "cnn") {
    g->logits = BuildCnn(g->root, g->images, training, o.seed);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown model '", o.model, "' (expected mlp or cnn)"));
  }
  g->loss = ops::SparseSoftmaxCrossEntropy(g->root, g->labels, g->logits);
  if (training) {
    ops::Variable step = ops::GetOrCreateGlobalStep(g->root);
    ops::AdamOptimizer adam(o.learning_rate);
    TANDEM_ASSIGN_OR_RETURN(g->train_op, adam.Minimize(g->root, g->loss, &step));
  }
  g->init = ops::GlobalVariablesInitializer(g->root);
  return g->root.status();
}

absl::StatusOr<std::unique_ptr<Session>> MakeSession(const ModelGraph& g, int threads,
                                                     Precision precision) {
  proto::GraphDef def;
  g.root.graph()->ToGraphDef(&def);
  SessionOptions so;
  so.inter_op_threads = 1;
  so.intra_op_threads = threads;
  so.precision = precision;
  TANDEM_ASSIGN_OR_RETURN(auto session, NewDirectSession(def, so));
  TANDEM_RETURN_IF_ERROR(session->Run({}, {}, {g.init->name()}).status());
  return session;
}

// Copies rows `idx[begin, end)` of `src` into a new batch tensor.
Tensor GatherRows(const Tensor& src, const std::vector<int64_t>& idx, int64_t begin, int64_t end) {
  TensorShape shape = src.shape();
  shape.set_dim(0, end - begin);
  Tensor out(src.dtype(), shape);
  const size_t row = src.TotalBytes() / static_cast<size_t>(src.dim(0));
  for (int64_t i = begin; i < end; ++i) {
    std::memcpy(out.raw_data() + (i - begin) * row, src.raw_data() + idx[i] * row, row);
  }
  return out;
}

// Copies every global variable's value from `from` into the same-named variable of
// `to`, by feeding the value as the initializer's input.
absl::Status CopyVariables(const ModelGraph& gf, Session* from, const ModelGraph& gt, Session* to) {
  TANDEM_ASSIGN_OR_RETURN(auto vars,
                          ops::VariablesInCollection(gt.root.graph(), ops::kTrainableVariables));
  for (const ops::Variable& v : vars) {
    TANDEM_ASSIGN_OR_RETURN(ops::Variable src, ops::Variable::FromGraph(gf.root.graph(), v.name()));
    TANDEM_ASSIGN_OR_RETURN(auto value, from->Run({}, {src.value().name()}));
    std::string init_input = v.initializer()->input(1).name();
    TANDEM_RETURN_IF_ERROR(
        to->Run({{init_input, value[0]}}, {}, {v.initializer()->name()}).status());
  }
  return absl::OkStatus();
}

absl::StatusOr<double> Evaluate(const ModelGraph& g, Session* session,
                                const data::LabeledImages& test) {
  const int64_t n = test.images.dim(0), batch = 1000;
  int64_t correct = 0;
  for (int64_t b = 0; b < n; b += batch) {
    int64_t e = std::min(n, b + batch);
    TANDEM_ASSIGN_OR_RETURN(
        auto out, session->Run({{g.images.name(), test.images.Slice(b, e)}}, {g.logits.name()}));
    const float* logits = out[0].data<float>();
    for (int64_t i = 0; i < e - b; ++i) {
      const float* row = logits + i * 10;
      int64_t best = std::max_element(row, row + 10) - row;
      correct += best == test.labels.data<int32_t>()[b + i];
    }
  }
  return static_cast<double>(correct) / static_cast<double>(n);
}

}  // namespace

absl::StatusOr<SessionTrainResult> TrainFashionModel(const data::FashionMnist& data,
                                                     const SessionTrainOptions& o) {
  if (o.batch_size <= 0) return absl::InvalidArgumentError("batch_size must be positive");
  ModelGraph train;
  TANDEM_RETURN_IF_ERROR(BuildGraph(o, /*training=*/true, &train));
  TANDEM_ASSIGN_OR_RETURN(auto session, MakeSession(train, o.threads, o.precision));

  const int64_t n = data.train.images.dim(0);
  const int64_t steps_per_epoch = n / o.batch_size;
  const int64_t total = o.max_steps > 0 ? o.max_steps : steps_per_epoch * o.epochs;
  const int64_t untimed = std::clamp<int64_t>(o.untimed_steps, 0, total);
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(static_cast<uint64_t>(o.seed));
  SessionTrainResult result;
  auto start = std::chrono::steady_clock::now();
  const std::vector<std::string> fetches = {train.loss.name()};
  const std::vector<std::string> targets = {train.train_op->name()};
  for (int64_t step = 0; step < total; ++step) {
    if (step == untimed) start = std::chrono::steady_clock::now();
    int64_t in_epoch = step % steps_per_epoch;
    if (in_epoch == 0) std::shuffle(order.begin(), order.end(), rng);
    int64_t b = in_epoch * o.batch_size;
    FeedMap feeds = {
        {train.images.name(), GatherRows(data.train.images, order, b, b + o.batch_size)},
        {train.labels.name(), GatherRows(data.train.labels, order, b, b + o.batch_size)}};
    TANDEM_ASSIGN_OR_RETURN(auto out, session->Run(feeds, fetches, targets));
    float loss = out[0].scalar<float>();
    result.losses.push_back(loss);
    if (!std::isfinite(loss)) {
      return absl::InternalError(absl::StrCat("loss became ", loss, " at step ", step + 1));
    }
    if (o.log_every > 0 && (step + 1) % o.log_every == 0) {
      LOG(INFO) << "step " << step + 1 << "/" << total << " loss = " << loss;
    }
  }
  result.train_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.steps = total;
  result.final_loss = result.losses.empty() ? 0 : result.losses.back();
  result.examples_per_second =
      result.train_seconds > 0 ? (total - untimed) * o.batch_size / result.train_seconds : 0;
  if (o.evaluate) {
    ModelGraph eval;
    TANDEM_RETURN_IF_ERROR(BuildGraph(o, /*training=*/false, &eval));
    TANDEM_ASSIGN_OR_RETURN(auto eval_session, MakeSession(eval, o.threads, o.precision));
    TANDEM_RETURN_IF_ERROR(CopyVariables(train, session.get(), eval, eval_session.get()));
    TANDEM_ASSIGN_OR_RETURN(result.test_accuracy, Evaluate(eval, eval_session.get(), data.test));
  }
  return result;
}

}  // namespace tandem::examples

// A worker of between-graph replicated, asynchronous training (TensorFlow 1.x's
// canonical distributed MLP), used by cluster_test. It reads TF_CONFIG exactly as a
// scheduler sets it, serves its own task, builds its own graph with the replica
// device setter (variables on the ps tasks, the first layer's kernel partitioned
// across them), connects a GrpcSession to its own server, and trains on its shard of
// Fashion-MNIST. The chief (worker 0) initialises the variables, waits for the other
// workers' steps to land, evaluates test accuracy and shuts the ps tasks down.
//
// Output (stdout, one "key=value" per line): worker_steps, global_step,
// update_device (one per optimizer update op, from a traced step), accuracy (chief).
//
// Flags: --steps N (per worker), --batch B, --shutdown_ps (chief).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "estimator/run_config.h"
#include "framework/data/fashion_mnist.h"
#include "framework/distributed/grpc_session.h"
#include "framework/distributed/new_session.h"
#include "framework/distributed/replica_device_setter.h"
#include "framework/distributed/rpc/grpc_clients.h"
#include "framework/distributed/server.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/layers.h"
#include "framework/ops/losses.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/nn_ops.h"
#include "framework/ops/optimizers.h"
#include "framework/ops/partitioned_variables.h"
#include "framework/ops/state_ops.h"
#include "glog/logging.h"

namespace tandem {
namespace {

struct Flags {
  int64_t steps = 300;
  int64_t batch = 100;
  bool shutdown_ps = false;
};

int Die(const absl::Status& s) {
  std::fprintf(stderr, "error: %s\n", std::string(s.message()).c_str());
  return 1;
}

struct Model {
  Output x, y, loss, logits, global_step;
  Node* train = nullptr;
  Node* init = nullptr;
  std::vector<Output> is_initialized;
};

Model Build(const Scope& root, const ClusterSpec& cluster, int task) {
  ReplicaDeviceSetterOptions o;
  o.cluster = cluster;
  o.worker_device = absl::StrCat("/job:worker/task:", task);
  Scope s = WithReplicaDeviceSetter(root, o);
  s.graph()->set_seed(17);
  Model m;
  m.x = ops::Placeholder(s.WithOpName("x"), DType::kFloat, PartialShape({-1, 784}));
  m.y = ops::Placeholder(s.WithOpName("y"), DType::kInt32, PartialShape({-1}));
  ops::PartitionedVariable w1(s, "layer1/kernel", TensorShape({784, 256}), DType::kFloat,
                              ops::GlorotUniformInitializer(), ops::FixedSizePartitioner(2));
  ops::Variable b1(s, "layer1/bias",
                   ops::Const(s, Tensor::Filled(DType::kFloat, TensorShape({256}), 0)));
  Output h = ops::Relu(s, ops::Add(s, ops::MatMul(s, m.x, w1.AsTensor(s)), b1.value()));
  ops::DenseOptions d2;
  d2.activation = ops::Activation::kRelu;
  d2.name = "layer2";
  h = ops::Dense(s, h, 128, d2);
  ops::DenseOptions d3;
  d3.name = "logits";
  m.logits = ops::Dense(s, h, 10, d3);
  m.loss = ops::SparseSoftmaxCrossEntropy(s, m.y, m.logits);
  ops::Variable step = ops::GetOrCreateGlobalStep(s);
  m.global_step = step.value();
  ops::AdamOptimizer opt(1e-3f);
  auto train = opt.Minimize(s, m.loss, &step);
  CHECK(train.ok()) << train.status();
  m.train = *train;
  m.init = ops::GlobalVariablesInitializer(root);
  for (const std::string& name : root.graph()->GetCollection(ops::kGlobalVariables)) {
    auto v = ops::Variable::FromGraph(root.graph(), name);
    CHECK(v.ok()) << v.status();
    m.is_initialized.push_back(
        ops::VarIsInitializedOp(root.ColocateWith(v->handle().node), v->handle()));
  }
  return m;
}

int Main(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc)
      flags.steps = std::atoll(argv[++i]);
    else if (a == "--batch" && i + 1 < argc)
      flags.batch = std::atoll(argv[++i]);
    else if (a == "--shutdown_ps")
      flags.shutdown_ps = true;
    else
      return Die(absl::InvalidArgumentError("unknown flag " + a));
  }
  absl::StatusOr<TfConfig> tf = TfConfigFromEnvironment();
  if (!tf.ok()) return Die(tf.status());
  if (tf->task_type != "worker" || !tf->task_index) {
    return Die(absl::InvalidArgumentError("TF_CONFIG must name a worker task"));
  }
  const int task = *tf->task_index;
  const int num_workers = tf->cluster.NumTasks("worker");
  ServerOptions so;
  so.cluster = tf->cluster;
  so.task = {"worker", task};
  so.inter_op_threads = 1;
  so.intra_op_threads = 1;
  auto server = Server::Create(so);
  if (!server.ok()) return Die(server.status());

  Scope root = Scope::NewRootScope();
  Model m = Build(root, tf->cluster, task);
  if (!root.ok()) return Die(root.status());
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  SessionOptions opts;
  opts.target = (*server)->target();
  opts.device_filters = {"/job:ps", absl::StrCat("/job:worker/task:", task)};
  opts.wait_for_workers_ms = 60000;
  auto session = NewSession(def, opts);
  if (!session.ok()) return Die(session.status());
  Session* sess = session->get();

  std::vector<std::string> init_checks;
  for (const Output& o : m.is_initialized) init_checks.push_back(o.name());
  if (task == 0) {
    if (auto r = sess->Run({}, {}, {m.init->name()}); !r.ok()) return Die(r.status());
  } else {
    for (int tries = 0;; ++tries) {  // As TF's WorkerSessionCreator: wait for the chief.
      auto r = sess->Run({}, init_checks);
      if (!r.ok()) return Die(r.status());
      bool ready =
          std::all_of(r->begin(), r->end(), [](const Tensor& t) { return t.scalar<bool>(); });
      if (ready) break;
      if (tries > 600) return Die(absl::DeadlineExceededError("the chief never initialised"));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  auto data = data::LoadFashionMnist();
  if (!data.ok()) return Die(data.status());
  const int64_t n = data->train.labels.NumElements();
  std::vector<int64_t> rows;  // This worker's shard.
  for (int64_t r = task; r < n; r += num_workers) rows.push_back(r);
  std::mt19937_64 rng(100 + task);
  std::shuffle(rows.begin(), rows.end(), rng);
  size_t next = 0;
  Tensor xb(DType::kFloat, TensorShape({flags.batch, 784}));
  Tensor yb(DType::kInt32, TensorShape({flags.batch}));
  for (int64_t step = 0; step < flags.steps; ++step) {
    for (int64_t i = 0; i < flags.batch; ++i, ++next) {
      if (next == rows.size()) {
        std::shuffle(rows.begin(), rows.end(), rng);
        next = 0;
      }
      int64_t r = rows[next];
      std::memcpy(xb.data<float>() + i * 784, data->train.images.data<float>() + r * 784,
                  784 * sizeof(float));
      yb.data<int32_t>()[i] = data->train.labels.data<int32_t>()[r];
    }
    // Fresh tensors each step: the previous ones may still be referenced in flight.
    Tensor x = xb.DeepCopy(), y = yb.DeepCopy();
    RunOptions ro;
    ro.trace = step == 1;
    RunMetadata md;
    auto r = sess->Run({{"x", x}, {"y", y}}, {m.loss.name()}, {m.train->name()}, ro, &md);
    if (!r.ok()) return Die(r.status());
    if (step % 100 == 0)
      LOG(INFO) << "worker " << task << " step " << step << " loss " << (*r)[0].scalar<float>();
    for (const auto& ns : md.step_stats.nodes) {
      if (absl::StartsWith(ns.op, "ResourceApply")) {
        std::printf("update_device=%s %s\n", ns.node_name.c_str(), ns.device.c_str());
      }
    }
  }
  std::printf("worker_steps=%lld\n", static_cast<long long>(flags.steps));

  if (task == 0) {
    // Wait until every worker's steps have landed on the ps.
    const int64_t want = flags.steps * num_workers;
    int64_t gs = 0;
    for (int tries = 0; tries < 1200; ++tries) {
      auto r = sess->Run({}, {m.global_step.name()});
      if (!r.ok()) return Die(r.status());
      gs = (*r)[0].scalar<int64_t>();
      if (gs >= want) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::printf("global_step=%lld\n", static_cast<long long>(gs));
    auto r = sess->Run({{"x", data->test.images}}, {m.logits.name()});
    if (!r.ok()) return Die(r.status());
    const Tensor& logits = (*r)[0];
    int64_t correct = 0, total = logits.dim(0);
    for (int64_t i = 0; i < total; ++i) {
      const float* row = logits.data<float>() + i * 10;
      int best = static_cast<int>(std::max_element(row, row + 10) - row);
      correct += best == data->test.labels.data<int32_t>()[i];
    }
    std::printf("accuracy=%.4f\n", static_cast<double>(correct) / total);
    if (flags.shutdown_ps) {
      for (int ps : tf->cluster.TaskIndices("ps")) {
        auto address = tf->cluster.TaskAddress("ps", ps);
        auto channel = NewGrpcChannel(*address, {});
        if (!channel.ok()) return Die(channel.status());
        GrpcWorkerClient client(*channel, "");
        WireMessage<proto::ShutdownRequest> req;
        WireMessage<proto::ShutdownResponse> resp;
        req.proto.set_reason("training finished");
        absl::Status s =
            CallAndWait<WorkerInterface>(&client, &WorkerInterface::ShutdownAsync, req, &resp);
        if (!s.ok()) return Die(s);
      }
    }
  }
  std::fflush(stdout);
  sess->Close().IgnoreError();
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  return tandem::Main(argc, argv);
}

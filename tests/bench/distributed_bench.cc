// Benchmarks of the distributed runtime, each against a peer measured in the same run:
//   recv: a tensor of 4 MiB and of 64 MiB (--mib) moved from a ps task to a worker task
//     over gRPC on loopback, versus the same bytes streamed through a raw TCP loopback
//     socket: once as bare RecvTensor RPCs (request, response, decode), once as a whole
//     step that reads a ps variable on the worker. Also the round trip of an empty RPC
//     and the step time when the moved tensor is 4 KiB (the fixed cost of a step).
//   mlp: the training step of the MLP 784-256-128-10 (Adam, batch 128) with its
//     variables on a ps task and the step on a worker task (two servers, gRPC on
//     loopback) versus the same graph in a DirectSession; and the floor under the
//     distributed step that moving its weights and gradients at the raw TCP rate sets.
// Peers alternate in --rounds rounds, each ratio is taken within a round, and the
// medians are printed, one line per figure; run.sh runs it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "apps/examples/fashion_models.h"
#include "framework/distributed/grpc_session.h"
#include "framework/distributed/new_session.h"
#include "framework/distributed/process_setup.h"
#include "framework/distributed/rpc/grpc_clients.h"
#include "framework/distributed/server.h"
#include "framework/distributed/worker_rendezvous.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/losses.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/optimizers.h"
#include "framework/ops/state_ops.h"
#include "framework/runtime/rendezvous.h"
#include "tests/util/free_port.h"
#include "tests/util/one_worker_cache.h"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Bytes/second of `bytes` sent `reps` times through a loopback TCP connection.
double RawTcp(size_t bytes, int reps) {
  const testing::LoopbackListener l = testing::ListenOnLoopback(1);
  const int listener = l.fd;
  const sockaddr_in addr = l.addr;
  std::vector<char> out(bytes, 1);
  std::thread sender([&] {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_EQ(connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
    for (int r = 0; r < reps; ++r) {
      size_t sent = 0;
      while (sent < bytes) sent += send(fd, out.data() + sent, bytes - sent, 0);
    }
    close(fd);
  });
  int conn = accept(listener, nullptr, nullptr);
  std::vector<char> in(bytes);
  auto t0 = Clock::now();
  for (int r = 0; r < reps; ++r) {
    size_t got = 0;
    while (got < bytes) {
      ssize_t n = recv(conn, in.data() + got, bytes - got, 0);
      CHECK_GT(n, 0);
      got += n;
    }
  }
  double s = Seconds(t0);
  sender.join();
  close(conn);
  close(listener);
  return bytes * reps / s;
}

// gRPC connections from one task to another (ServerOptions::channels_per_task).
int channels_per_task = GrpcWorkerCache::kDefaultChannelsPerTask;
// RecvTensor's chunk size on both servers (ServerOptions::recv_chunk_bytes).
uint64_t recv_chunk_bytes = kDefaultRecvChunkBytes;

std::vector<std::unique_ptr<Server>> PsAndWorker(int threads) {
  ClusterSpec cluster;
  CHECK(cluster.AddJob("ps", {absl::StrCat("127.0.0.1:", testing::PickFreePort())}).ok());
  CHECK(cluster.AddJob("worker", {absl::StrCat("127.0.0.1:", testing::PickFreePort())}).ok());
  std::vector<std::unique_ptr<Server>> servers;
  for (const char* job : {"ps", "worker"}) {
    ServerOptions o;
    o.cluster = cluster;
    o.task = {job, 0};
    o.inter_op_threads = threads;
    o.intra_op_threads = threads;
    o.channels_per_task = channels_per_task;
    o.recv_chunk_bytes = recv_chunk_bytes;
    auto s = Server::Create(o);
    CHECK(s.ok()) << s.status();
    servers.push_back(std::move(*s));
  }
  return servers;
}

// A gRPC client of `server`'s worker service, as another task would have.
std::unique_ptr<WorkerInterface> WorkerClient(Server* server) {
  auto client = NewGrpcWorkerClient(server->address(), {}, channels_per_task);
  CHECK(client.ok()) << client.status();
  return std::move(*client);
}

proto::GetStatusResponse GetStatus(WorkerInterface* w) {
  WireMessage<proto::GetStatusRequest> req;
  WireMessage<proto::GetStatusResponse> resp;
  absl::Status s = CallAndWait(w, &WorkerInterface::GetStatusAsync, req, &resp);
  CHECK(s.ok()) << s;
  return resp.proto;
}

// Seconds per GetStatus round trip from a fresh client to `server` (the floor under
// every RPC of a step).
double PingSeconds(Server* server, int reps) {
  std::unique_ptr<WorkerInterface> client = WorkerClient(server);
  GetStatus(client.get());
  auto t0 = Clock::now();
  for (int r = 0; r < reps; ++r) GetStatus(client.get());
  return Seconds(t0) / reps;
}

void SetNodeAttr(proto::NodeDef* nd, const std::string& name, AttrValue value) {
  AttrValueToProto(value, &(*nd->mutable_attr())[name]);
}

// Bytes/second of remote receives alone, without the rest of a step: `ps` gets a
// partition (Const -> _Send) that puts a tensor of `bytes` into its step rendezvous;
// each rep runs it under `in_flight` new step ids (untimed), then times that many
// concurrent receives of it through a worker's step rendezvous, as a _Recv op makes
// them (RecvTensor calls from one gRPC client, one per chunk when the tensor is over
// the ps's chunk size, decoding into a tensor), and cleans the steps up. in_flight 1
// is one receive's latency-bound rate; more overlap one response's latency with
// another's bytes, as the raw TCP stream does and as a step's many receives do.
double RecvTensorRpc(Server* ps, size_t bytes, int reps, int in_flight) {
  std::unique_ptr<WorkerInterface> client = WorkerClient(ps);
  WorkerInterface* w = client.get();
  const proto::GetStatusResponse status = GetStatus(w);
  CHECK_GT(status.device_size(), 0);
  const std::string device = status.device(0).name();
  const uint64_t incarnation = status.device(0).incarnation();
  const std::string recv_task = "/job:worker/replica:0/task:0";
  const std::string recv_device = recv_task + "/device:CPU:0";

  WireMessage<proto::CreateWorkerSessionRequest> create;
  create.proto.set_session_handle("recv_bench");
  WireMessage<proto::CreateWorkerSessionResponse> created;
  CHECK(CallAndWait(w, &WorkerInterface::CreateWorkerSessionAsync, create, &created).ok());
  WireMessage<proto::RegisterGraphRequest> reg;
  reg.proto.set_session_handle("recv_bench");
  proto::NodeDef* value = reg.proto.mutable_graph()->add_node();
  value->set_name("value");
  value->set_op("Const");
  value->set_device(device);
  SetNodeAttr(value, "dtype", DType::kFloat);
  SetNodeAttr(value, "value",
              Tensor::Filled(DType::kFloat, TensorShape({static_cast<int64_t>(bytes / 4)}), 1.0f));
  proto::NodeDef* send = reg.proto.mutable_graph()->add_node();
  send->set_name("send");
  send->set_op("_Send");
  send->set_device(device);
  send->add_input("value:0");
  SetNodeAttr(send, "T", DType::kFloat);
  SetNodeAttr(send, "tensor_name", std::string("value:0"));
  SetNodeAttr(send, "send_device", device);
  SetNodeAttr(send, "send_device_incarnation", static_cast<int64_t>(incarnation));
  SetNodeAttr(send, "recv_device", recv_device);
  SetNodeAttr(send, "client_terminated", false);
  WireMessage<proto::RegisterGraphResponse> registered;
  CHECK(CallAndWait(w, &WorkerInterface::RegisterGraphAsync, reg, &registered).ok());

  const std::string key = CreateRendezvousKey(device, incarnation, recv_device, "value:0");
  auto parsed = ParseRendezvousKey(key);
  CHECK(parsed.ok()) << parsed.status();
  testing::OneWorkerCache cache(w);
  double seconds = 0;
  // Step ids are unique per worker: a worker refuses a step id it has cleaned up.
  static int64_t next_step = 1000;
  int64_t step = next_step;
  next_step += (reps + 1) * in_flight;
  for (int r = 0; r <= reps; ++r) {  // Rep 0 warms up.
    // `in_flight` steps each put the tensor into their rendezvous (untimed) ...
    std::vector<std::unique_ptr<WorkerRendezvous>> recv(in_flight);
    std::vector<Tensor> got(in_flight);
    for (int k = 0; k < in_flight; ++k) {
      WireMessage<proto::RunGraphRequest> run;
      run.proto.set_session_handle("recv_bench");
      run.proto.set_graph_handle(registered.proto.graph_handle());
      run.proto.set_step_id(step + k);
      WireMessage<proto::RunGraphResponse> ran;
      CHECK(CallAndWait(w, &WorkerInterface::RunGraphAsync, run, &ran).ok());
      recv[k] = std::make_unique<WorkerRendezvous>(recv_task, step + k, &cache);
    }
    // ... then their receives start together and are timed until the last tensor is
    // whole.
    absl::BlockingCounter pending(in_flight);
    std::vector<absl::Status> status(in_flight);
    auto t0 = Clock::now();
    for (int k = 0; k < in_flight; ++k) {
      recv[k]->RecvAsync(*parsed, [&, k](const absl::Status& s, const Tensor& v, bool) {
        status[k] = s;
        got[k] = v;
        pending.DecrementCount();
      });
    }
    pending.Wait();
    if (r > 0) seconds += Seconds(t0);
    for (int k = 0; k < in_flight; ++k) {
      CHECK(status[k].ok()) << status[k];
      CHECK_EQ(got[k].TotalBytes(), bytes);
      WireMessage<proto::CleanupGraphRequest> cleanup;
      cleanup.proto.set_step_id(step + k);
      WireMessage<proto::CleanupGraphResponse> cleaned;
      CHECK(CallAndWait(w, &WorkerInterface::CleanupGraphAsync, cleanup, &cleaned).ok());
    }
    step += in_flight;
  }
  WireMessage<proto::DeleteWorkerSessionRequest> del;
  del.proto.set_session_handle("recv_bench");
  WireMessage<proto::DeleteWorkerSessionResponse> deleted;
  CHECK(CallAndWait(w, &WorkerInterface::DeleteWorkerSessionAsync, del, &deleted).ok());
  return static_cast<double>(bytes) * reps * in_flight / seconds;
}

// A ps variable of `bytes` read into a worker-side op each step.
class StepMovingTensor {
 public:
  StepMovingTensor(Server* worker, size_t bytes) : bytes_(bytes) {
    Scope root = Scope::NewRootScope();
    Scope ps = root.WithDevice("/job:ps/task:0");
    int64_t n = bytes / sizeof(float);
    ops::Variable v(ps, "big",
                    ops::Const(ps, Tensor::Filled(DType::kFloat, TensorShape({n}), 1.0f)));
    // A cheap consumer on the worker: the tensor must cross, only a scalar comes back.
    Output first = ops::Slice(root.WithDevice("/job:worker/task:0"), v.value(),
                              ops::Const(root, Tensor::FromVector<int32_t>({0}, TensorShape({1}))),
                              ops::Const(root, Tensor::FromVector<int32_t>({1}, TensorShape({1}))));
    fetch_ = first.name();
    Node* init = ops::GlobalVariablesInitializer(root);
    proto::GraphDef def;
    root.graph()->ToGraphDef(&def);
    SessionOptions so;
    so.target = worker->target();
    auto session = NewSession(def, so);
    CHECK(session.ok()) << session.status();
    session_ = std::move(*session);
    CHECK(session_->Run({}, {}, {init->name()}).ok());
    CHECK(session_->Run({}, {fetch_}).ok());  // Warm up: registration, connection.
  }
  // Bytes/second over `reps` steps.
  double Rate(int reps) {
    auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r) CHECK(session_->Run({}, {fetch_}).ok());
    return static_cast<double>(bytes_) * reps / Seconds(t0);
  }

 private:
  const size_t bytes_;
  std::unique_ptr<Session> session_;
  std::string fetch_;
};

// The MLP training step in a session to `target` ("" = DirectSession); with a target,
// every variable handle is on the ps task and its reads and updates follow by
// colocation, everything else defaults to the client's task (the worker).
class MlpStep {
 public:
  MlpStep(const std::string& target, int threads) {
    Scope root = Scope::NewRootScope();
    root.graph()->set_seed(1);
    Output images =
        ops::Placeholder(root.WithOpName("images"), DType::kFloat, PartialShape({-1, 784}));
    Output labels = ops::Placeholder(root.WithOpName("labels"), DType::kInt32, PartialShape({-1}));
    Output logits = examples::BuildMlp(root, images, {256, 128}, 1);
    Output loss = ops::SparseSoftmaxCrossEntropy(root, labels, logits);
    ops::AdamOptimizer adam(0.001f);
    auto train = adam.Minimize(root, loss);
    CHECK(train.ok());
    loss_ = loss.name();
    train_ = (*train)->name();
    for (const std::string& name : root.graph()->GetCollection(ops::kTrainableVariables)) {
      auto v = ops::Variable::FromGraph(root.graph(), name);
      CHECK(v.ok()) << v.status();
      CHECK(v->shape().IsFullyDefined());
      parameter_bytes_ += v->shape().num_elements() * static_cast<int64_t>(DTypeSize(v->dtype()));
    }
    Node* init = ops::GlobalVariablesInitializer(root);
    proto::GraphDef def;
    root.graph()->ToGraphDef(&def);
    if (!target.empty()) {
      for (auto& node : *def.mutable_node()) {
        if (node.op() == "VarHandleOp") node.set_device("/job:ps/task:0");
      }
    }
    SessionOptions so;
    so.target = target;
    so.inter_op_threads = threads;
    so.intra_op_threads = threads;
    auto session = NewSession(def, so);
    CHECK(session.ok()) << session.status();
    session_ = std::move(*session);
    CHECK(session_->Run({}, {}, {init->name()}).ok());
    std::mt19937 rng(1);
    x_ = Tensor(DType::kFloat, TensorShape({128, 784}));
    y_ = Tensor(DType::kInt32, TensorShape({128}));
    for (float& v : x_.flat<float>()) v = (rng() % 256) / 255.0f;
    for (int32_t& v : y_.flat<int32_t>()) v = rng() % 10;
    for (int i = 0; i < 10; ++i) Step();
  }

  // Bytes of the trainable variables: what a distributed step reads from the ps, and
  // again what it sends back as gradients.
  int64_t parameter_bytes() const { return parameter_bytes_; }

  // Seconds per step over `steps` steps.
  double SecondsPerStep(int steps) {
    auto t0 = Clock::now();
    for (int i = 0; i < steps; ++i) Step();
    return Seconds(t0) / steps;
  }

  // Prints one step's timeline, per device, relative to the first node.
  void Trace() {
    RunOptions ro;
    ro.trace = true;
    RunMetadata md;
    CHECK(session_->Run({{"images", x_}, {"labels", y_}}, {loss_}, {train_}, ro, &md).ok());
    int64_t t0 = INT64_MAX;
    for (const auto& n : md.step_stats.nodes) t0 = std::min(t0, n.start_micros);
    for (const auto& n : md.step_stats.nodes) {
      std::printf("%6lld %6lld %-8s %s %s\n", static_cast<long long>(n.start_micros - t0),
                  static_cast<long long>(n.end_micros - t0), n.op.c_str(), n.node_name.c_str(),
                  n.device.c_str());
    }
  }

 private:
  void Step() {
    auto r = session_->Run({{"images", x_}, {"labels", y_}}, {loss_}, {train_});
    CHECK(r.ok()) << r.status();
  }

  std::unique_ptr<Session> session_;
  Tensor x_, y_;
  std::string loss_, train_;
  int64_t parameter_bytes_ = 0;
};

double Median(std::vector<double> v) {
  CHECK(!v.empty());
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Per-round figures of one measurement; a ratio is taken within each round, so that
// drift in the machine's speed between rounds hits both sides of it alike.
struct Rounds {
  std::vector<double> values;
  void Add(double v) { values.push_back(v); }
  double Median() const { return tandem::Median(values); }
  double MedianRatioTo(const Rounds& base) const {
    std::vector<double> r;
    for (size_t i = 0; i < values.size(); ++i) r.push_back(values[i] / base.values[i]);
    return tandem::Median(r);
  }
};

// The RecvTensor figures for one size.
void BenchRecv(Server* ps, Server* worker, size_t mib, int rounds) {
  const size_t bytes = mib << 20;
  const int reps = std::max(4, static_cast<int>(400 / mib) / rounds);
  StepMovingTensor mover(worker, bytes);
  Rounds tcp, rpc, rpc4, step;
  for (int r = 0; r < rounds; ++r) {
    tcp.Add(RawTcp(bytes, reps));
    rpc.Add(RecvTensorRpc(ps, bytes, reps, 1));
    rpc4.Add(RecvTensorRpc(ps, bytes, std::max(1, reps / 4), 4));
    step.Add(mover.Rate(reps));
  }
  std::printf(
      "recv %zu MiB: raw_tcp=%.0f MB/s recv_tensor_rpc=%.0f MB/s (ratio %.2f) "
      "4_in_flight=%.0f MB/s (ratio %.2f) step_moving_it=%.0f MB/s (ratio %.2f)\n",
      mib, tcp.Median() / 1e6, rpc.Median() / 1e6, rpc.MedianRatioTo(tcp), rpc4.Median() / 1e6,
      rpc4.MedianRatioTo(tcp), step.Median() / 1e6, step.MedianRatioTo(tcp));
}

// The MLP step, distributed against direct, and the floor that moving its bytes at the
// raw TCP rate sets under the distributed step.
void BenchMlp(Server* worker, int threads, int steps, int rounds, bool trace) {
  MlpStep direct("", threads);
  MlpStep dist(worker->target(), threads);
  if (trace) dist.Trace();
  const int64_t moved = 2 * dist.parameter_bytes();  // Weights in, gradients out.
  Rounds local, remote, floor;
  for (int r = 0; r < rounds; ++r) {
    local.Add(direct.SecondsPerStep(steps / rounds));
    remote.Add(dist.SecondsPerStep(steps / rounds));
    floor.Add(local.values.back() + moved / RawTcp(dist.parameter_bytes(), 50));
  }
  std::printf(
      "mlp step threads=%d: direct=%.3f ms distributed(1 ps + 1 worker)=%.3f ms "
      "distributed/direct=%.2f\n",
      threads, local.Median() * 1e3, remote.Median() * 1e3, remote.MedianRatioTo(local));
  std::printf(
      "mlp transport floor: %.2f MB per step (weights in, gradients out) at the raw TCP "
      "rate adds %.3f ms: (direct + that)/direct=%.2f\n",
      moved / 1e6, (floor.Median() - local.Median()) * 1e3, floor.MedianRatioTo(local));
}

int Main(int argc, char** argv) {
  CLI::App app{"tandem distributed runtime benchmarks (recv, mlp)"};
  std::string what = "all";
  int threads = 2, steps = 300, rounds = 5;
  bool trace = false;
  std::vector<size_t> sizes_mib = {4, 64};
  app.add_option("--what", what, "recv, mlp or all")->check(CLI::IsMember({"recv", "mlp", "all"}));
  app.add_option("--threads", threads, "intra/inter-op threads per task")->capture_default_str();
  app.add_option("--steps", steps, "MLP steps to time, per side")->capture_default_str();
  app.add_option("--rounds", rounds, "rounds that alternate the peers; medians are reported")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--mib", sizes_mib, "RecvTensor sizes in MiB")->delimiter(',');
  app.add_flag("--trace", trace, "print one distributed MLP step's node timeline");
  app.add_option("--channels", channels_per_task, "gRPC connections per pair of tasks")
      ->capture_default_str();
  double chunk_mib = static_cast<double>(recv_chunk_bytes) / (1 << 20);
  app.add_option("--chunk_mib", chunk_mib, "RecvTensor chunk size in MiB")
      ->check(CLI::Range(0.0625, 1024.0))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  recv_chunk_bytes = static_cast<uint64_t>(chunk_mib * (1 << 20));
  auto servers = PsAndWorker(threads);
  if (what == "recv" || what == "all") {
    std::printf("rpc round trip: %.3f ms\n", PingSeconds(servers[0].get(), 1000) * 1e3);
    // The fixed cost of a step that moves one small tensor between tasks.
    StepMovingTensor small(servers[1].get(), 4096);
    std::printf("recv 4 KiB: %.3f ms per step\n", 4096 / small.Rate(300) * 1e3);
    for (size_t mib : sizes_mib) BenchRecv(servers[0].get(), servers[1].get(), mib, rounds);
  }
  if (what == "mlp" || what == "all") {
    BenchMlp(servers[1].get(), threads, std::max(steps, rounds), rounds, trace);
  }
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  tandem::InitProcess();
  return tandem::Main(argc, argv);
}

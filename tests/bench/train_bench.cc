// tandem's side of the throughput benchmarks (run.sh runs it next to the PyTorch
// peer and prints ratios):
//   --model mlp|cnn: training steps/second of the Fashion-MNIST models (the shapes of
//     configs/fashion_mlp.toml, 784-256-128-100-10, and fashion_cnn.toml; Adam, a fixed
//     random batch fed each step), reported as examples/second; --hidden sets other MLP
//     widths (--hidden 256,128 is the MLP of the older benchmark rows).
//   --model matmul: the MatMul kernel called directly versus a bare oneDNN matmul
//     primitive on the same shapes (every product of the MLP's step, --hidden and
//     --batch), and the step's ceiling: its products alone at bare oneDNN speed, with
//     hot caches and with each product's operands evicted first (as in a step).
//   --model gemm_peak: this CPU's oneDNN matmul rate in float32 and bfloat16 on a
//     2048^3 product with up to --threads threads, the peak the training rates are
//     compared with.
//   --model parallel_for: the two intra-op loop mechanisms of kernels/cpu/parallel.h
//     (an OpenMP team, the intra-op pool) on a 1M-element loop, with one caller and
//     with four concurrent callers (a ps applying several workers' updates).
//   --precision mixed_bfloat16: the mlp and cnn steps under the mixed_bfloat16 policy.
//   --floor: after the mlp or cnn steps, in the same process, the step's floor on this
//     machine: its products at the matmul peak of its precision (measured before and
//     after the steps, the higher), plus one pass of the Adam update's memory traffic
//     over the model's trainable weights (StepFloor).
//   --peak_rounds N: after the mlp or cnn steps, N rounds of about a second in which
//     steps alternate with the matmul peak's product, and each round's share of the
//     peak measured in it (InterleavedPeakShare).
//   --alternate VAR=A,B: the mlp and cnn steps (and --profile's traced steps) set the
//     environment variable VAR to A, B, ... in turn, and each value's steps are timed
//     apart: an A/B of kernel paths chosen by the environment (TANDEM_CONV_FILTER_GRAD)
//     on which the machine's drift falls evenly.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "apps/examples/fashion_models.h"
#include "framework/core/thread_pool.h"
#include "framework/kernels/cpu/bf16_convert.h"
#include "framework/kernels/cpu/dense_apply_loops.h"
#include "framework/kernels/cpu/onednn_util.h"
#include "framework/kernels/cpu/parallel.h"
#include "framework/kernels/kernel_registry.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/losses.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/optimizers.h"
#include "framework/ops/state_ops.h"
#include "framework/runtime/runtime_kernels.h"
#include "framework/runtime/session.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;

Tensor RandomFloats(const TensorShape& shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0, 1);
  Tensor t(DType::kFloat, shape);
  for (float& v : t.flat<float>()) v = u(rng);
  return t;
}

// --alternate: the variable and its values, set in turn step after step (none: no
// alternation).
struct Alternation {
  std::string var;
  std::vector<std::string> values;
  size_t size() const { return values.size(); }
  // Sets the variable for step i; returns the value's index.
  size_t Set(int i) const {
    if (values.empty()) return 0;
    const size_t v = static_cast<size_t>(i) % values.size();
    setenv(var.c_str(), values[v].c_str(), 1);
    return v;
  }
  // `name` prefixed by value v, where there is an alternation.
  std::string Label(size_t v, const std::string& name) const {
    return values.empty() ? name : "[" + var + "=" + values[v] + "] " + name;
  }
};

double PeakRate(int threads, bool bf16);

// The matmul peak's product (2048^3, as PeakRate) ready to run at 1 .. `threads`
// threads, one primitive per thread count, each made and run with that count.
class PeakProduct {
 public:
  PeakProduct(int threads, bool bf16);
  double flops() const { return 2.0 * kN * kN * kN; }
  // Seconds of one product at t threads, 1 <= t <= the threads it was made for.
  double Run(int t);

 private:
  static constexpr int64_t kN = 2048;
  dnnl::engine eng_{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm_{eng_};
  std::vector<dnnl::matmul> prims_;
  std::vector<dnnl::memory> mem_;  // a, b, c
};

// --peak_rounds: `rounds` rounds of about a second each in which steps (`step` runs
// one) and the peak's product (at 1 .. `threads` threads in turn) alternate, as many
// steps at a time as take as long as one product. A round's share is the step's rate
// over the product's at its best thread count, both summed over the round. On a host
// whose matmul rate moves by a factor of two to three within a second (the AMX Xeon
// VM shares its cores), a peak measured once, or as the best of many calls, meets
// other weather than the steps do; alternated, both meet the same.
template <typename F>
bool InterleavedPeakShare(int rounds, double step_flops, int threads, bool bf16, const F& step) {
  PeakProduct peak(threads, bf16);
  std::vector<double> shares;
  for (int r = 0; r < rounds; ++r) {
    double step_secs = 0, total = 0;
    int steps = 0;
    std::vector<double> product_secs(threads, 0.0);
    std::vector<int> products(threads, 0);
    double last_product = 0;
    for (int i = 0; steps < 5 || total < 1.0; ++i) {
      // Steps back to back for as long as the last product took (one at least), so that
      // both get half the round and the steps mostly meet warm caches.
      double s = 0;
      do {
        const Clock::time_point t0 = Clock::now();
        if (!step()) return false;
        s += std::chrono::duration<double>(Clock::now() - t0).count();
        ++steps;
      } while (s < last_product);
      step_secs += s;
      const int t = i % threads;
      last_product = peak.Run(t + 1);
      product_secs[t] += last_product;
      ++products[t];
      total += s + last_product;
    }
    double peak_gflops = 0;
    for (int t = 0; t < threads; ++t) {
      if (products[t] > 0) {
        peak_gflops = std::max(peak_gflops, peak.flops() * products[t] / product_secs[t] / 1e9);
      }
    }
    const double step_gflops = step_flops * steps / step_secs / 1e9;
    shares.push_back(step_gflops / peak_gflops);
    std::printf("peak_round %d steps=%d step_gflops=%.0f peak_gflops=%.0f share=%.2f\n", r + 1,
                steps, step_gflops, peak_gflops, shares.back());
  }
  std::sort(shares.begin(), shares.end());
  std::printf("interleaved_peak rounds=%d share_median=%.2f share_min=%.2f share_max=%.2f\n",
              rounds, shares[shares.size() / 2], shares.front(), shares.back());
  return true;
}

void StepFloor(const Graph& graph, double step_flops, double step_secs, int threads,
               Precision precision, double peak_before);

int TrainBench(const std::string& model, const std::vector<int64_t>& hidden, int threads,
               int inter_op, int64_t batch, int steps, int warmup, int profile, Precision precision,
               int gpus, const Alternation& alternate, bool floor, int peak_rounds) {
  Scope root = Scope::NewRootScope();
  root.graph()->set_seed(1);
  Output images =
      ops::Placeholder(root.WithOpName("images"), DType::kFloat, PartialShape({-1, 784}));
  Output labels = ops::Placeholder(root.WithOpName("labels"), DType::kInt32, PartialShape({-1}));
  Output logits = model == "mlp" ? examples::BuildMlp(root, images, hidden, 1)
                                 : examples::BuildCnn(root, images, /*training=*/true, 1);
  Output loss = ops::SparseSoftmaxCrossEntropy(root, labels, logits);
  ops::AdamOptimizer adam(0.001f);
  auto train = adam.Minimize(root, loss);
  Node* init = ops::GlobalVariablesInitializer(root);
  if (!train.ok() || !root.ok()) {
    std::fprintf(stderr, "graph: %s\n", std::string(root.status().message()).c_str());
    return 1;
  }
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  SessionOptions so;
  so.inter_op_threads = inter_op;
  so.intra_op_threads = threads;
  so.precision = precision;
  so.num_gpus = gpus;
  auto session = NewDirectSession(def, so);
  if (!session.ok() || !(*session)->Run({}, {}, {init->name()}).ok()) {
    std::fprintf(stderr, "session: %s\n",
                 session.ok() ? "init failed" : std::string(session.status().message()).c_str());
    return 1;
  }
  Tensor x = RandomFloats(TensorShape({batch, 784}), 1);
  Tensor y(DType::kInt32, TensorShape({batch}));
  for (int64_t i = 0; i < batch; ++i) y.data<int32_t>()[i] = static_cast<int32_t>(i % 10);
  FeedMap feeds = {{"images", x}, {"labels", y}};
  // --floor measures the peak before the steps and again after them (StepFloor).
  const double peak_before = floor ? PeakRate(threads, precision == Precision::kMixedBfloat16) : 0;
  // Step end times, to compare the first and the last tenth of the run: a step that
  // slows down as training goes on (denormal floats) shows there.
  std::vector<Clock::time_point> ends(steps + 1);
  std::vector<double> value_secs(alternate.size(), 0.0);
  std::vector<int> value_steps(alternate.size(), 0);
  for (int i = 0; i < warmup + steps; ++i) {
    const size_t v = alternate.Set(i);
    const Clock::time_point start = Clock::now();
    if (i == warmup) ends[0] = start;
    auto out = (*session)->Run(feeds, {loss.name()}, {(*train)->name()});
    if (!out.ok()) {
      std::fprintf(stderr, "step: %s\n", std::string(out.status().message()).c_str());
      return 1;
    }
    if (i >= warmup) {
      ends[i - warmup + 1] = Clock::now();
      if (alternate.size() > 0) {
        value_secs[v] += std::chrono::duration<double>(ends[i - warmup + 1] - start).count();
        ++value_steps[v];
      }
    }
  }
  const double secs = std::chrono::duration<double>(ends[steps] - ends[0]).count();
  const int tenth = std::max(1, steps / 10);
  auto rate_between = [&](int from, int to) {
    return batch * (to - from) / std::chrono::duration<double>(ends[to] - ends[from]).count();
  };
  if (profile > 0) {
    // `profile` traced steps: mean microseconds per op type, largest first, then the
    // slowest nodes (to tell apart two nodes of one op, such as the two convolutions).
    std::map<std::string, int64_t> by_op, by_node;
    int64_t ops_us = 0, wall_us = 0, run_us = 0;  // summed over the traced steps
    // Traced steps per value: with an alternation each op's mean is over its value's.
    const int per_value =
        alternate.size() > 0 ? profile / static_cast<int>(alternate.size()) : profile;
    for (int i = 0; i < profile; ++i) {
      const size_t v = alternate.Set(i);
      RunOptions opts;
      opts.trace = true;
      RunMetadata meta;
      const Clock::time_point run_start = Clock::now();
      if (!(*session)->Run(feeds, {loss.name()}, {(*train)->name()}, opts, &meta).ok()) return 1;
      run_us +=
          std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - run_start).count();
      int64_t first = INT64_MAX, last = 0;
      for (const auto& n : meta.step_stats.nodes) {
        by_op[alternate.Label(v, n.op)] += n.end_micros - n.start_micros;
        by_node[alternate.Label(v, n.node_name + " (" + n.op + ")")] +=
            n.end_micros - n.start_micros;
        ops_us += n.end_micros - n.start_micros;
        first = std::min(first, n.start_micros);
        last = std::max(last, n.end_micros);
      }
      if (last > first) wall_us += last - first;
    }
    auto print = [&](const std::map<std::string, int64_t>& totals, const char* prefix,
                     size_t rows) {
      std::vector<std::pair<int64_t, std::string>> sorted;
      for (const auto& [name, us] : totals) sorted.push_back({us, name});
      std::sort(sorted.rbegin(), sorted.rend());
      sorted.resize(std::min(sorted.size(), rows));
      for (const auto& [us, name] : sorted)
        std::printf("  %s%-60s %8lld us\n", prefix, name.c_str(),
                    static_cast<long long>(us / std::max(1, per_value)));
    };
    print(by_op, "", by_op.size());
    print(by_node, "node ", 16 * std::max<size_t>(1, alternate.size()));
    // With one op at a time (inter_op 1), what the ops' sum leaves of the traced span is
    // the executor's own time between ops.
    std::printf(
        "  ops summed %lld us, first op start to last op end %lld us, Session::Run %lld us per "
        "traced step\n",
        static_cast<long long>(ops_us / profile), static_cast<long long>(wall_us / profile),
        static_cast<long long>(run_us / profile));
  }
  // Multiply-adds x 2 per example of the models' convolutions and dense layers: forward,
  // the input gradient (none for the first layer) and the weight gradient.
  const double fwd_conv1 = 28.0 * 28 * 32 * 25 * 1 * 2, fwd_conv2 = 14.0 * 14 * 64 * 25 * 32 * 2,
               fwd_dense = 3136.0 * 1024 * 2 + 1024.0 * 10 * 2;
  const double cnn_flops = 3 * (fwd_conv1 + fwd_conv2 + fwd_dense) - fwd_conv1;
  std::vector<int64_t> widths = {784};
  widths.insert(widths.end(), hidden.begin(), hidden.end());
  widths.push_back(10);
  const double fwd_mlp1 = 784.0 * static_cast<double>(widths[1]) * 2;
  double fwd_mlp = 0;
  for (size_t i = 0; i + 1 < widths.size(); ++i)
    fwd_mlp += 2.0 * static_cast<double>(widths[i]) * static_cast<double>(widths[i + 1]);
  const double mlp_flops = 3 * fwd_mlp - fwd_mlp1;
  const double rate = batch * steps / secs;
  std::printf("tandem %s threads=%d gpus=%d batch=%lld precision=%s examples_per_second=%.0f",
              model.c_str(), threads, gpus, static_cast<long long>(batch),
              std::string(PrecisionName(precision)).c_str(), rate);
  std::printf(" steps=%d first_tenth=%.0f last_tenth=%.0f", steps, rate_between(0, tenth),
              rate_between(steps - tenth, steps));
  const double flops = model == "cnn" ? cnn_flops : mlp_flops;
  std::printf(" gflops=%.0f", rate * flops / 1e9);
  std::printf("\n");
  for (size_t v = 0; v < alternate.size(); ++v) {
    const double value_rate = value_secs[v] > 0 ? batch * value_steps[v] / value_secs[v] : 0;
    std::printf("alternate %s=%s steps=%d examples_per_second=%.0f gflops=%.0f\n",
                alternate.var.c_str(), alternate.values[v].c_str(), value_steps[v], value_rate,
                value_rate * flops / 1e9);
  }
  if (floor) {
    StepFloor(*root.graph(), flops * batch, secs / steps, threads, precision, peak_before);
  }
  if (peak_rounds > 0 &&
      !InterleavedPeakShare(
          peak_rounds, flops * batch, threads, precision == Precision::kMixedBfloat16,
          [&] { return (*session)->Run(feeds, {loss.name()}, {(*train)->name()}).ok(); })) {
    std::fprintf(stderr, "step failed in --peak_rounds\n");
    return 1;
  }
  return 0;
}

// Seconds per call of `fn`, best of 5 rounds of `iters` calls.
template <typename F>
double Time(F&& fn, int iters) {
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    auto start = Clock::now();
    for (int i = 0; i < iters; ++i) fn();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count() / iters);
  }
  return best;
}

PeakProduct::PeakProduct(int threads, bool bf16) {
  const auto dt = bf16 && onednn::HasBf16Kernels() ? dnnl::memory::data_type::bf16
                                                   : dnnl::memory::data_type::f32;
  const dnnl::memory::desc md({kN, kN}, dt, dnnl::memory::dims{kN, 1});
  for (int i = 0; i < 3; ++i) {
    mem_.emplace_back(md, eng_);
    std::memset(mem_.back().get_data_handle(), 0, md.get_size());
  }
  for (int t = 1; t <= threads; ++t) {
    omp_set_num_threads(t);
    prims_.emplace_back(dnnl::matmul::primitive_desc(dnnl::matmul::desc(md, md, md), eng_));
    Run(t);  // Untimed: the first call of each packs and warms.
  }
}

double PeakProduct::Run(int t) {
  omp_set_num_threads(t);
  const Clock::time_point start = Clock::now();
  prims_[t - 1].execute(
      strm_, {{DNNL_ARG_SRC, mem_[0]}, {DNNL_ARG_WEIGHTS, mem_[1]}, {DNNL_ARG_DST, mem_[2]}});
  strm_.wait();
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  omp_set_num_threads(static_cast<int>(prims_.size()));
  return secs;
}

// The peak with up to `threads` threads: the best rate over 1..threads threads, since a
// step given N threads can always use fewer (on a VM two threads may share one core's
// AMX unit, and the 2-thread product then runs below the 1-thread one). On a CPU without
// bfloat16 kernels, tandem computes bfloat16 ops in float32 (onednn::HasBf16Kernels), so
// the bfloat16 peak there is the float32 one, and the line says so.
double PeakRate(int threads, bool bf16) {
  PeakProduct product(threads, bf16);
  double best = 0;
  for (int t = 1; t <= threads; ++t) {
    best = std::max(best, product.flops() / Time([&] { product.Run(t); }, 3) / 1e9);
  }
  return best;
}

int GemmPeak(int threads) {
  const bool bf16 = onednn::HasBf16Kernels();
  const double f32 = PeakRate(threads, false), b16 = bf16 ? PeakRate(threads, true) : f32;
  std::printf("gemm_peak threads=%d f32_gflops=%.0f bf16_gflops=%.0f isa=%s%s\n", threads, f32, b16,
              onednn::EffectiveIsaName().c_str(), bf16 ? "" : " bf16=float32_fallback");
  return 0;
}

// Seconds of one pass of Adam's memory traffic over `params` float32 weights with
// `threads` threads: each weight and both moments read and written once, and a
// bfloat16 copy written where `bf16_copy` (mixed precision: the update writes the copy
// the next step reads). The gradient comes from a 128 KB block that stays in cache, as
// the update that computes its MatMul gradient inside (remapper.h) has it. The arrays
// are the update's size; whatever of them a cache holds between passes makes this
// faster, never slower, so it stays a floor.
double UpdateFloorSecs(int64_t params, bool bf16_copy, int threads) {
  constexpr int64_t kBlock = 2048, kGradBlock = 32768;
  std::vector<float> w(params, 0.5f), m(params, 0.0f), v(params, 0.0f);
  std::vector<bfloat16> copy(bf16_copy ? params : 0);
  const std::vector<float> grad(kGradBlock, 1e-3f);
  omp_set_num_threads(threads);
  return Time(
      [&] {
        OmpParallelFor((params + kBlock - 1) / kBlock, 1, [&](int64_t begin, int64_t end) {
          for (int64_t b = begin; b < end; ++b) {
            const int64_t e0 = b * kBlock, n = std::min(kBlock, params - e0);
            apply::Adam(w.data() + e0, m.data() + e0, v.data() + e0, grad.data() + e0 % kGradBlock,
                        1e-3f, 0.9f, 0.999f, 1e-7f, false, n);
            if (bf16_copy) nn::NarrowToBf16(w.data() + e0, copy.data() + e0, n);
          }
        });
      },
      3);
}

// --floor: the step's floor on this machine, measured in the step's process: its
// products (`step_flops`) at the matmul peak of its precision (the higher of
// `peak_before`, measured before the steps, and the peak right after them), plus
// UpdateFloorSecs over the graph's trainable weights. The memory-bound ops besides the
// update (pooling, masks, dropout, casts) are left out, since fusion could remove
// them: the floor is a lower bound, and peak_share_ceiling the highest share of the
// peak the step could show here.
void StepFloor(const Graph& graph, double step_flops, double step_secs, int threads,
               Precision precision, double peak_before) {
  int64_t params = 0;
  for (const std::string& name : graph.GetCollection(ops::kTrainableVariables)) {
    const Node* handle = graph.FindNode(name);
    auto shape = handle == nullptr ? absl::StatusOr<PartialShape>(absl::NotFoundError(name))
                                   : GetAttr<PartialShape>(handle->attrs(), "shape");
    if (!shape.ok() || !shape->IsFullyDefined()) {
      std::fprintf(stderr, "floor: no static shape for variable %s\n", name.c_str());
      return;
    }
    params += shape->num_elements();
  }
  const bool bf16 = precision == Precision::kMixedBfloat16;
  // The higher of the peaks measured before and after the steps: on a shared host the
  // rate moves within seconds, and a lower peak would make the floor no floor.
  const double peak = std::max(peak_before, PeakRate(threads, bf16)) * 1e9;
  const double products = step_flops / peak;
  const double update = UpdateFloorSecs(params, bf16, threads);
  const double floor = products + update;
  std::printf(
      "floor threads=%d precision=%s peak_gflops=%.0f products_ms=%.2f params=%lld "
      "update_ms=%.2f floor_ms=%.2f step_ms=%.2f step_at_floor=%.2f peak_share=%.2f "
      "peak_share_ceiling=%.2f\n",
      threads, std::string(PrecisionName(precision)).c_str(), peak / 1e9, products * 1e3,
      static_cast<long long>(params), update * 1e3, floor * 1e3, step_secs * 1e3, floor / step_secs,
      step_flops / step_secs / peak, step_flops / floor / peak);
}

// Microseconds per 1M-element loop of OmpParallelFor and PoolParallelFor with `threads`
// threads, for 1 and 4 concurrent callers (each on its own array).
int ParallelForBench(int threads) {
  constexpr int64_t kN = 1 << 20;
  constexpr int kIters = 200;
  std::vector<std::vector<float>> data(4, std::vector<float>(kN, 1.0f));
  // As a session's: the caller and threads - 1 pool threads.
  std::unique_ptr<ThreadPool> pool =
      threads > 1 ? std::make_unique<ThreadPool>("bench_intra_op", threads - 1) : nullptr;
  auto body = [](float* x) {
    return [x](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) x[i] = x[i] * 0.5f + 1.0f;
    };
  };
  for (int callers : {1, 4}) {
    double us[2];
    for (int pooled = 0; pooled < 2; ++pooled) {
      auto t0 = Clock::now();
      std::vector<std::thread> ts;
      for (int c = 0; c < callers; ++c) {
        ts.emplace_back([&, c] {
          omp_set_num_threads(threads);
          auto fn = body(data[c].data());
          for (int i = 0; i < kIters; ++i) {
            if (pooled) {
              PoolParallelFor(pool.get(), kN, kParallelGrain, fn);
            } else {
              OmpParallelFor(kN, kParallelGrain, fn);
            }
          }
        });
      }
      for (auto& t : ts) t.join();
      us[pooled] = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / kIters;
    }
    std::printf("parallel_for threads=%d callers=%d omp_us=%.1f pool_us=%.1f pool_over_omp=%.2f\n",
                threads, callers, us[0], us[1], us[1] / us[0]);
  }
  return 0;
}

// MatMul of two [n, n] float32 variables on GPU:0 through a session, `steps` steps
// queued back to back and one fetch at the end that waits for the GPU: the op's rate
// with the session's per-step cost, against cuBLAS's own in the PyTorch peer
// (torch_gpu_peer.py) on the same shapes.
int GpuMatMulBench(int64_t n, int steps) {
  Scope root = Scope::NewRootScope();
  root.graph()->set_seed(1);
  ops::Variable a(root, "a", ops::Const(root, RandomFloats(TensorShape({n, n}), 1)));
  ops::Variable b(root, "b", ops::Const(root, RandomFloats(TensorShape({n, n}), 2)));
  ops::Variable done(root, "done", ops::Const(root, 0.0f));
  Output mm = ops::MatMul(root, a.value(), b.value());
  Node* init = ops::GlobalVariablesInitializer(root);
  if (!root.ok()) return 1;
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  SessionOptions so;
  so.num_gpus = 1;
  auto session = NewDirectSession(def, so);
  if (!session.ok() || !(*session)->Run({}, {}, {init->name()}).ok()) return 1;
  auto step = [&] { return (*session)->Run({}, {}, {mm.node->name()}).ok(); };
  auto wait = [&] { return (*session)->Run({}, {done.value().name()}, {}).ok(); };
  for (int i = 0; i < 5; ++i) step();
  if (!wait()) return 1;
  auto t0 = Clock::now();
  for (int i = 0; i < steps; ++i) {
    if (!step()) return 1;
  }
  if (!wait()) return 1;
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("tandem gpu_matmul n=%lld tflops=%.1f ms_per_step=%.3f\n", static_cast<long long>(n),
              2.0 * n * n * n * steps / secs / 1e12, secs * 1e3 / steps);
  return 0;
}

int MatMulBench(int threads, const std::vector<int64_t>& hidden, int64_t batch) {
  omp_set_num_threads(threads);
  EnsureKernels();
  struct Case {
    int64_t m, k, n;
    bool ta, tb;
  };
  // Every product of the MLP's training step: per layer (in -> out) the forward
  // product, the weight gradient X^T dY and, past the first layer, the input gradient
  // dY W^T.
  std::vector<int64_t> widths = {784};
  widths.insert(widths.end(), hidden.begin(), hidden.end());
  widths.push_back(10);
  std::vector<Case> cases;
  double flops = 0;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    const int64_t in = widths[i], out = widths[i + 1];
    cases.push_back({batch, in, out, false, false});
    cases.push_back({in, batch, out, true, false});
    if (i > 0) cases.push_back({batch, out, in, false, true});
    flops += 2.0 * static_cast<double>(batch * in * out) * (i > 0 ? 3 : 2);
  }
  double kernel_total = 0, bare_total = 0, cold_total = 0;
  std::vector<float> evict(size_t{64} << 18);  // 64 MiB
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  for (const Case& c : cases) {
    TensorShape sa = c.ta ? TensorShape({c.k, c.m}) : TensorShape({c.m, c.k});
    TensorShape sb = c.tb ? TensorShape({c.n, c.k}) : TensorShape({c.k, c.n});
    Tensor a = RandomFloats(sa, 1), b = RandomFloats(sb, 2);
    Scope root = Scope::NewRootScope();
    Output pa = ops::Placeholder(root.WithOpName("a"), DType::kFloat, PartialShape(sa));
    Output pb = ops::Placeholder(root.WithOpName("b"), DType::kFloat, PartialShape(sb));
    Output mm = ops::MatMul(root, pa, pb, c.ta, c.tb);
    if (!root.ok()) return 1;
    auto kernel = KernelRegistry::Global()->Create(*mm.node, kDeviceCpu);
    if (!kernel.ok()) return 1;
    StepContext step;
    double t_kernel = Time(
        [&] {
          OpKernelContext ctx(kernel->get(), &step, {a, b});
          if (!(*kernel)->Compute(ctx).ok()) std::abort();
        },
        200);
    // Bare oneDNN: the same product with transposes as strides, primitive made once.
    using dt = dnnl::memory::data_type;
    dnnl::memory::dims da = {c.m, c.k}, db = {c.k, c.n}, dc = {c.m, c.n};
    dnnl::memory::dims stra = c.ta ? dnnl::memory::dims{1, c.m} : dnnl::memory::dims{c.k, 1};
    dnnl::memory::dims strb = c.tb ? dnnl::memory::dims{1, c.k} : dnnl::memory::dims{c.n, 1};
    dnnl::memory::desc ma(da, dt::f32, stra), mb(db, dt::f32, strb),
        mc(dc, dt::f32, dnnl::memory::dims{c.n, 1});
    dnnl::matmul prim(dnnl::matmul::primitive_desc(dnnl::matmul::desc(ma, mb, mc), eng));
    Tensor out(DType::kFloat, TensorShape({c.m, c.n}));
    dnnl::memory mem_a(ma, eng, a.raw_data()), mem_b(mb, eng, b.raw_data()),
        mem_c(mc, eng, out.raw_data());
    auto bare = [&] {
      prim.execute(strm, {{DNNL_ARG_SRC, mem_a}, {DNNL_ARG_WEIGHTS, mem_b}, {DNNL_ARG_DST, mem_c}});
      strm.wait();
    };
    double t_bare = Time(bare, 200);
    // The same call with its operands out of every cache, as in a training step, where
    // the other layers' products and the optimizer's arrays pass through between two
    // uses of a matrix: a buffer larger than the last-level cache is written before
    // each timed call.
    double t_cold = 1e30;
    for (int i = 0; i < 50; ++i) {
      std::fill(evict.begin(), evict.end(), static_cast<float>(i));
      auto start = Clock::now();
      bare();
      t_cold = std::min(t_cold, std::chrono::duration<double>(Clock::now() - start).count());
    }
    std::printf(
        "matmul m=%lld k=%lld n=%lld ta=%d tb=%d kernel_us=%.1f bare_us=%.1f "
        "bare_cold_us=%.1f ratio=%.2f\n",
        static_cast<long long>(c.m), static_cast<long long>(c.k), static_cast<long long>(c.n), c.ta,
        c.tb, t_kernel * 1e6, t_bare * 1e6, t_cold * 1e6, t_bare / t_kernel);
    kernel_total += t_kernel;
    bare_total += t_bare;
    cold_total += t_cold;
  }
  // The MLP step's ceiling on this CPU: its products alone, each at bare oneDNN speed.
  std::printf(
      "mlp_matmul_ceiling threads=%d batch=%lld examples_per_second=%.0f gflops=%.0f "
      "(the step's products at bare oneDNN speed, nothing else)\n",
      threads, static_cast<long long>(batch), static_cast<double>(batch) / bare_total,
      flops / bare_total / 1e9);
  std::printf(
      "mlp_matmul_ceiling_cold threads=%d batch=%lld examples_per_second=%.0f gflops=%.0f "
      "(the same with each product's operands out of cache)\n",
      threads, static_cast<long long>(batch), static_cast<double>(batch) / cold_total,
      flops / cold_total / 1e9);
  std::printf("matmul threads=%d kernel_vs_bare_onednn=%.2f (>= 0.80 is the target)\n", threads,
              bare_total / kernel_total);
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  CLI::App app{"tandem training-throughput and MatMul benchmarks (see tests/bench/run.sh)."};
  std::string model = "mlp";
  int threads = 1, steps = 200, warmup = 10, inter_op = 1;
  bool profile = false, floor = false;
  int profile_steps = 1, peak_rounds = 0;
  int64_t batch = 128;
  std::string precision = "float32";
  int gpus = 0;
  int64_t n = 4096;
  std::vector<int64_t> hidden = {256, 128, 100};
  std::string alternate;
  app.add_option("--model", model, "mlp, cnn, matmul, gemm_peak, parallel_for or gpu_matmul")
      ->check(CLI::IsMember({"mlp", "cnn", "matmul", "gemm_peak", "parallel_for", "gpu_matmul"}));
  app.add_option("--gpus", gpus, "mlp and cnn: GPUs the session computes on (0 or 1)")
      ->capture_default_str();
  app.add_option("--n", n, "gpu_matmul: the square size")->capture_default_str();
  app.add_option("--hidden", hidden, "mlp: hidden layer widths (fashion_mlp's by default)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--threads", threads, "intra- and inter-op threads")->capture_default_str();
  app.add_flag("--profile", profile, "after timing, print traced steps' mean time per op");
  app.add_flag("--floor", floor,
               "mlp and cnn: after timing, the step's floor here (its products at the matmul "
               "peak plus the Adam update's memory traffic), measured in the same process");
  app.add_option("--peak_rounds", peak_rounds,
                 "mlp and cnn: after timing, rounds of about a second alternating steps with "
                 "the matmul peak's product, and each round's share of the peak measured in it")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  app.add_option("--profile_steps", profile_steps, "--profile: the traced steps to average")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  app.add_option("--inter_op", inter_op,
                 "inter-op threads, the caller counted (0 or 1: one op at a time with all "
                 "threads inside it, as the PyTorch peer runs)")
      ->capture_default_str();
  app.add_option("--batch", batch, "batch size")->capture_default_str();
  app.add_option("--steps", steps, "timed steps")->capture_default_str();
  app.add_option("--warmup", warmup, "untimed steps first")->capture_default_str();
  app.add_option("--precision", precision, "float32 or mixed_bfloat16 (mlp and cnn)")
      ->check(CLI::IsMember({"float32", "mixed_bfloat16"}))
      ->capture_default_str();
  app.add_option("--alternate", alternate,
                 "mlp and cnn: VAR=A,B,...: steps set the environment variable VAR to each "
                 "value in turn, timed apart (e.g. TANDEM_CONV_FILTER_GRAD=onednn,amx)");
  CLI11_PARSE(app, argc, argv);
  tandem::Alternation alternation;
  if (!alternate.empty()) {
    const size_t eq = alternate.find('=');
    if (eq == 0 || eq == std::string::npos || eq + 1 == alternate.size()) {
      std::fprintf(stderr, "--alternate must be VAR=A,B,..., got '%s'\n", alternate.c_str());
      return 2;
    }
    alternation.var = alternate.substr(0, eq);
    for (size_t at = eq + 1; at <= alternate.size();) {
      const size_t comma = std::min(alternate.find(',', at), alternate.size());
      alternation.values.push_back(alternate.substr(at, comma - at));
      at = comma + 1;
    }
  }
  if (model == "matmul") return tandem::MatMulBench(threads, hidden, batch);
  if (model == "gemm_peak") return tandem::GemmPeak(threads);
  if (model == "parallel_for") return tandem::ParallelForBench(threads);
  if (model == "gpu_matmul") return tandem::GpuMatMulBench(n, steps);
  return tandem::TrainBench(model, hidden, threads, inter_op, batch, steps, warmup,
                            profile ? profile_steps : 0, *tandem::ParsePrecision(precision), gpus,
                            alternation, floor, peak_rounds);
}

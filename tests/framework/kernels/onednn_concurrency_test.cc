// The oneDNN kernels run one cached primitive on many threads at once: sessions run
// steps concurrently, and the executor runs independent nodes of one step on its
// inter-op pool. Every result must equal a plain loop's, whatever thread runs it and
// whatever runs beside it. (With oneDNN's library-managed scratchpad, primitives of
// one shape running on two threads overwrote each other's partial sums.)
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/nn_ops.h"
#include "framework/runtime/direct_session.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

constexpr int kCopies = 4;

std::vector<float> RandomValues(size_t n, std::mt19937* rng) {
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = u(*rng);
  return v;
}

// A row-major [m, k] x [k, n] product in double.
std::vector<float> NaiveMatMul(const std::vector<float>& a, const std::vector<float>& b, int m,
                               int k, int n) {
  std::vector<float> c(static_cast<size_t>(m) * n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int p = 0; p < k; ++p) s += double(a[i * k + p]) * b[p * n + j];
      c[i * n + j] = static_cast<float>(s);
    }
  }
  return c;
}

// The filter gradient of a 3x3 SAME convolution, NHWC input, HWIO filter.
std::vector<float> NaiveConvFilterGrad(const std::vector<float>& x, const std::vector<float>& dy,
                                       int n, int h, int w, int c, int o) {
  std::vector<float> g(9 * c * o);
  for (int kh = 0; kh < 3; ++kh) {
    for (int kw = 0; kw < 3; ++kw) {
      for (int ci = 0; ci < c; ++ci) {
        for (int co = 0; co < o; ++co) {
          double s = 0;
          for (int b = 0; b < n; ++b) {
            for (int y = 0; y < h; ++y) {
              for (int xx = 0; xx < w; ++xx) {
                int iy = y + kh - 1, ix = xx + kw - 1;
                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                s += double(x[((b * h + iy) * w + ix) * c + ci]) *
                     dy[((b * h + y) * w + xx) * o + co];
              }
            }
          }
          g[((kh * 3 + kw) * c + ci) * o + co] = static_cast<float>(s);
        }
      }
    }
  }
  return g;
}

void ExpectClose(const Tensor& got, const std::vector<float>& want, const std::string& what) {
  auto f = got.flat<float>();
  ASSERT_EQ(f.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::abs(f[i] - want[i]) > 1e-3f * (1 + std::abs(want[i]))) ++bad;
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << want.size() << " values differ";
}

TEST(OneDnnConcurrencyTest, PrimitivesOfOneShapeRunOnManyThreadsAtOnce) {
  // Long reductions (k, and batch x spatial) so that the primitives split them over
  // threads and need a scratchpad for partial sums.
  const int m = 4, k = 8192, n = 4;
  const int bn = 4, h = 16, w = 16, c = 8, o = 8;
  std::mt19937 rng(11);
  Scope root = Scope::NewRootScope();
  std::vector<std::string> fetches;
  std::vector<std::vector<float>> want;
  for (int i = 0; i < kCopies; ++i) {
    std::vector<float> a = RandomValues(m * k, &rng), b = RandomValues(k * n, &rng);
    fetches.push_back(
        ops::MatMul(root, ops::Const(root, Tensor::FromVector<float>(a, TensorShape({m, k}))),
                    ops::Const(root, Tensor::FromVector<float>(b, TensorShape({k, n}))))
            .name());
    want.push_back(NaiveMatMul(a, b, m, k, n));
    std::vector<float> x = RandomValues(bn * h * w * c, &rng);
    std::vector<float> dy = RandomValues(bn * h * w * o, &rng);
    ops::Conv2DAttrs attrs;
    fetches.push_back(
        ops::Conv2DBackpropFilter(
            root, ops::Const(root, Tensor::FromVector<float>(x, TensorShape({bn, h, w, c}))),
            ops::ConstInt32(root, {3, 3, c, o}),
            ops::Const(root, Tensor::FromVector<float>(dy, TensorShape({bn, h, w, o}))), attrs)
            .name());
    want.push_back(NaiveConvFilterGrad(x, dy, bn, h, w, c, o));
  }
  ASSERT_TRUE(root.ok()) << root.status();
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  SessionOptions options;
  options.inter_op_threads = kCopies;
  options.intra_op_threads = 2;
  auto session = DirectSession::Create(def, options);
  ASSERT_TRUE(session.ok()) << session.status();
  // Several clients, each running steps whose independent nodes run in parallel.
  std::vector<std::thread> clients;
  std::vector<std::vector<std::vector<Tensor>>> results(3);
  for (int t = 0; t < 3; ++t) {
    clients.emplace_back([&, t] {
      for (int step = 0; step < 20; ++step) {
        auto r = (*session)->Run({}, fetches);
        ASSERT_TRUE(r.ok()) << r.status();
        results[t].push_back(*r);
      }
    });
  }
  for (std::thread& th : clients) th.join();
  for (int t = 0; t < 3; ++t) {
    for (size_t step = 0; step < results[t].size(); ++step) {
      for (size_t f = 0; f < fetches.size(); ++f) {
        ExpectClose(results[t][step][f], want[f],
                    absl::StrCat("client ", t, " step ", step, " ", fetches[f]));
      }
    }
  }
}

}  // namespace
}  // namespace tandem

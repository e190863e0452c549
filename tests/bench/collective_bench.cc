// Collective all-reduce against its floor, measured in the same run:
//   allreduce: --members servers in this process (gRPC on loopback, as separate tasks
//     would use it), each rank on its own thread, summing a float32 buffer of each
//     --mib size; median time per all-reduce over --reps, in --rounds rounds.
//   floor: what the all-reduce must move, through raw TCP loopback sockets: for two
//     members, each sends the whole buffer's worth of bytes to the other at the same
//     time (a ring sends 2(N-1)/N of the buffer per member; recursive doubling, the whole
//     buffer once per level), timed until both have received it.
// Prints per size: "allreduce <mib> MiB: <ms> ms, floor <ms> ms, ratio <x>" (ratio: the
// all-reduce's time over the floor's; 1.0 would be the wire's speed) and the algorithm
// the size ran (ring above CollectiveOptions::small_bytes).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "framework/distributed/collective/collective_executor.h"
#include "framework/distributed/process_setup.h"
#include "framework/distributed/server.h"
#include "glog/logging.h"
#include "tests/util/free_port.h"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds for two threads to exchange `bytes` each way at once over two loopback TCP
// connections (one per direction).
double RawExchange(size_t bytes) {
  const testing::LoopbackListener l = testing::ListenOnLoopback(2);
  int a = socket(AF_INET, SOCK_STREAM, 0);
  CHECK_EQ(connect(a, reinterpret_cast<const sockaddr*>(&l.addr), sizeof(l.addr)), 0);
  int b = accept(l.fd, nullptr, nullptr);
  std::vector<char> out_a(bytes, 1), out_b(bytes, 2), in_a(bytes), in_b(bytes);
  auto side = [bytes](int fd, const std::vector<char>& out, std::vector<char>& in) {
    std::thread sender([&] {
      size_t sent = 0;
      while (sent < bytes) sent += send(fd, out.data() + sent, bytes - sent, 0);
    });
    size_t got = 0;
    while (got < bytes) {
      ssize_t n = recv(fd, in.data() + got, bytes - got, 0);
      CHECK_GT(n, 0);
      got += n;
    }
    sender.join();
  };
  auto t0 = Clock::now();
  std::thread ta([&] { side(a, out_a, in_a); });
  side(b, out_b, in_b);
  ta.join();
  const double s = Seconds(t0);
  close(a);
  close(b);
  close(l.fd);
  return s;
}

int Main(int argc, char** argv) {
  CLI::App app{"collective all-reduce against raw TCP loopback"};
  std::vector<double> mib = {1, 13};
  int members = 2, reps = 20, rounds = 3;
  CollectiveOptions options;
  uint64_t piece_kib = options.piece_bytes >> 10, small_kib = options.small_bytes >> 10;
  app.add_option("--mib", mib, "buffer sizes in MiB")->capture_default_str();
  app.add_option("--members", members, "group size")->check(CLI::Range(2, 16));
  app.add_option("--reps", reps, "all-reduces per round")->check(CLI::Range(1, 100000));
  app.add_option("--rounds", rounds, "rounds (medians)")->check(CLI::Range(1, 100));
  app.add_option("--piece_kib", piece_kib, "CollectiveOptions::piece_bytes / 1024")
      ->capture_default_str();
  app.add_option("--small_kib", small_kib, "CollectiveOptions::small_bytes / 1024")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  ClusterSpec cluster;
  std::vector<std::string> addrs;
  for (int i = 0; i < members; ++i) {
    addrs.push_back(absl::StrCat("127.0.0.1:", testing::PickFreePort()));
  }
  CHECK(cluster.AddJob("worker", addrs).ok());
  std::vector<std::unique_ptr<Server>> servers;
  CollectiveGroup group;
  for (int i = 0; i < members; ++i)
    group.members.push_back(ClusterSpec::TaskDeviceName("worker", i));
  options.piece_bytes = std::max<uint64_t>(1, piece_kib) << 10;
  options.small_bytes = small_kib << 10;
  for (int i = 0; i < members; ++i) {
    ServerOptions o;
    o.cluster = cluster;
    o.task = {"worker", i};
    o.inter_op_threads = 1;
    o.intra_op_threads = 1;
    auto s = Server::Create(o);
    CHECK(s.ok()) << s.status();
    servers.push_back(std::move(*s));
    CollectiveGroup mine = group;
    mine.rank = i;
    CHECK(servers.back()->collective()->Configure(mine, options).ok());
  }
  {
    std::vector<std::thread> joins;
    for (int i = 0; i < members; ++i) {
      joins.emplace_back([&, i] { CHECK(servers[i]->collective()->Join(0, "bench", 30000).ok()); });
    }
    for (auto& t : joins) t.join();
  }
  int64_t instance = 1;
  for (double m : mib) {
    const int64_t count = static_cast<int64_t>(m * (1 << 20) / 4);
    std::vector<Tensor> data;
    for (int i = 0; i < members; ++i) {
      data.push_back(Tensor::Filled(DType::kFloat, TensorShape({count}), 1.0));
    }
    std::vector<double> ours, floor;
    for (int round = 0; round < rounds; ++round) {
      std::vector<std::thread> ranks;
      auto t0 = Clock::now();
      for (int i = 0; i < members; ++i) {
        ranks.emplace_back([&, i] {
          for (int r = 0; r < reps; ++r) {
            absl::Notification done;
            servers[i]->collective()->AllReduceSum(instance, data[i], [&](const absl::Status& s) {
              CHECK(s.ok()) << s;
              done.Notify();
            });
            done.WaitForNotification();
          }
        });
      }
      for (auto& t : ranks) t.join();
      ours.push_back(Seconds(t0) / reps);
      if (members == 2) {
        std::vector<double> raw;
        for (int r = 0; r < std::min(reps, 5); ++r) raw.push_back(RawExchange(count * 4));
        floor.push_back(Median(raw));
      }
    }
    ++instance;
    const char* algo =
        static_cast<uint64_t>(count * 4) <= options.small_bytes ? "recursive doubling" : "ring";
    if (members == 2) {
      std::printf("allreduce %.1f MiB (%s, %d members): %.3f ms, floor %.3f ms, ratio %.2f\n", m,
                  algo, members, Median(ours) * 1e3, Median(floor) * 1e3,
                  Median(ours) / Median(floor));
    } else {
      std::printf("allreduce %.1f MiB (%s, %d members): %.3f ms\n", m, algo, members,
                  Median(ours) * 1e3);
    }
  }
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  tandem::InitProcess();
  return tandem::Main(argc, argv);
}

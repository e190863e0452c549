// tests/framework/distributed/collective_group.h
//
// StartGroup: a collective group of `n` in-process worker servers on free loopback
// ports, each member configured with its rank; JoinAll forms it from every member at
// once. For the collective tests.
#ifndef TANDEM_TESTS_FRAMEWORK_DISTRIBUTED_COLLECTIVE_GROUP_H_
#define TANDEM_TESTS_FRAMEWORK_DISTRIBUTED_COLLECTIVE_GROUP_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/distributed/collective/collective_executor.h"
#include "framework/distributed/server.h"
#include "glog/logging.h"
#include "tests/util/free_port.h"

namespace tandem::testing {

// The servers of the group and their collective executors, by rank.
struct Group {
  std::vector<std::unique_ptr<Server>> servers;
  std::vector<CollectiveExecutor*> ex;
};

inline Group StartGroup(int n, CollectiveOptions options = {}) {
  ClusterSpec cluster;
  std::vector<std::string> addrs;
  for (int i = 0; i < n; ++i) addrs.push_back(absl::StrCat("127.0.0.1:", testing::PickFreePort()));
  CHECK(cluster.AddJob("worker", addrs).ok());
  Group g;
  CollectiveGroup group;
  for (int i = 0; i < n; ++i) group.members.push_back(ClusterSpec::TaskDeviceName("worker", i));
  for (int i = 0; i < n; ++i) {
    ServerOptions o;
    o.cluster = cluster;
    o.task = {"worker", i};
    o.inter_op_threads = 2;
    o.intra_op_threads = 1;
    auto s = Server::Create(o);
    CHECK(s.ok()) << s.status();
    g.servers.push_back(std::move(*s));
    g.ex.push_back(g.servers.back()->collective());
    CollectiveGroup mine = group;
    mine.rank = i;
    CHECK(g.ex.back()->Configure(mine, options).ok());
  }
  return g;
}

// Joins every member at once; returns each member's formation.
inline std::vector<absl::StatusOr<CollectiveExecutor::Formation>> JoinAll(
    Group& g, const std::vector<int64_t>& steps, const std::vector<std::string>& prints = {}) {
  std::vector<absl::StatusOr<CollectiveExecutor::Formation>> out(g.ex.size(),
                                                                 absl::UnknownError("unset"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < g.ex.size(); ++i) {
    threads.emplace_back(
        [&, i] { out[i] = g.ex[i]->Join(steps[i], prints.empty() ? "same" : prints[i], 20000); });
  }
  for (auto& t : threads) t.join();
  return out;
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_FRAMEWORK_DISTRIBUTED_COLLECTIVE_GROUP_H_

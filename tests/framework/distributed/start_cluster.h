// tests/framework/distributed/start_cluster.h
//
// StartCluster: in-process Servers for every task of a cluster on free loopback ports,
// for the distributed tests.
#ifndef TANDEM_TESTS_FRAMEWORK_DISTRIBUTED_START_CLUSTER_H_
#define TANDEM_TESTS_FRAMEWORK_DISTRIBUTED_START_CLUSTER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/distributed/server.h"
#include "glog/logging.h"
#include "tests/util/free_port.h"

namespace tandem::testing {

// Servers for every task of `jobs` (job -> number of tasks) on free loopback ports.
inline std::vector<std::unique_ptr<Server>> StartCluster(
    const std::map<std::string, int>& jobs, uint64_t recv_chunk_bytes = kDefaultRecvChunkBytes) {
  ClusterSpec cluster;
  for (const auto& [job, n] : jobs) {
    std::vector<std::string> addrs;
    for (int i = 0; i < n; ++i)
      addrs.push_back(absl::StrCat("127.0.0.1:", testing::PickFreePort()));
    CHECK(cluster.AddJob(job, addrs).ok());
  }
  std::vector<std::unique_ptr<Server>> servers;
  for (const auto& [job, n] : jobs) {
    for (int i = 0; i < n; ++i) {
      ServerOptions o;
      o.cluster = cluster;
      o.task = {job, i};
      o.inter_op_threads = 2;
      o.intra_op_threads = 1;
      o.recv_chunk_bytes = recv_chunk_bytes;
      auto s = Server::Create(o);
      CHECK(s.ok()) << s.status();
      servers.push_back(std::move(*s));
    }
  }
  return servers;
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_FRAMEWORK_DISTRIBUTED_START_CLUSTER_H_

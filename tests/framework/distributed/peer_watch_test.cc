// tests/framework/distributed/peer_watch_test.cc
//
// PeerWatch names the tasks that stop answering: a frozen one (a port whose listener
// never answers: the kernel accepts the connection, nobody speaks) and a dead one
// (nothing listens), each logged with how long, again while it lasts, and once more
// when it answers again.
#include "framework/distributed/peer_watch.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "framework/distributed/server.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/free_port.h"
#include "tests/util/log_lines.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

using testing::LogLines;
using testing::Within;

// A listening socket that never accepts: connections complete in the kernel's backlog
// and then hear nothing, as with a SIGSTOPped task.
class FrozenPort {
 public:
  FrozenPort() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    CHECK_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    CHECK_EQ(listen(fd_, 16), 0);
    CHECK_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
  }
  ~FrozenPort() { close(fd_); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

PeerWatchOptions Fast() {
  PeerWatchOptions o;
  o.probe_interval_ms = 100;
  o.probe_timeout_ms = 300;
  o.report_after_ms = 600;
  o.report_interval_ms = 1500;
  o.waiter = "worker:0";
  return o;
}

TEST(PeerWatchTest, TasksOfListsByJobAndLeavesSelfOut) {
  ClusterSpec cluster;
  ASSERT_TRUE(cluster.AddJob("worker", {"h:1", "h:2"}).ok());
  ASSERT_TRUE(cluster.AddJob("ps", {"h:3"}).ok());
  const TaskId self{"worker", 1};
  std::vector<WatchedTask> tasks = TasksOf(cluster, {"ps", "worker", "chief"}, &self);
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].Describe(), "ps:0 (h:3)");
  EXPECT_EQ(tasks[1].Describe(), "worker:0 (h:1)");
}

TEST(PeerWatchTest, NamesFrozenAndDeadTasksAgainWhileSilentAndWhenTheyAnswer) {
  LogLines log;
  ClusterSpec cluster;
  const std::string live = absl::StrCat("127.0.0.1:", testing::PickFreePort());
  ASSERT_TRUE(cluster.AddTask("ps", 0, live).ok());
  ServerOptions options{.cluster = cluster, .task = {"ps", 0}};
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(options);
  ASSERT_TRUE(server.ok()) << server.status();
  FrozenPort frozen;
  const std::string dead = absl::StrCat("127.0.0.1:", testing::PickFreePort());
  PeerWatch watch({{"ps:0", live}, {"ps:1", frozen.address()}, {"chief:0", dead}}, {}, Fast());

  const std::string frozen_line =
      absl::StrCat("worker:0: ps:1 (", frozen.address(), ") has not answered for ");
  const std::string dead_line =
      absl::StrCat("worker:0: chief:0 (", dead, ") has not answered for ");
  ASSERT_TRUE(Within(5, [&] { return log.Count(frozen_line) >= 1 && log.Count(dead_line) >= 1; }));
  EXPECT_THAT(watch.Silent(), ::testing::ElementsAre(HasSubstr("ps:1"), HasSubstr("chief:0")));
  // Named again while it lasts (every 1.5 s here), not at every probe (about every 0.4 s).
  const int first = log.Count(frozen_line);
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  EXPECT_GE(log.Count(frozen_line) - first, 1);
  EXPECT_LE(log.Count(frozen_line) - first, 2);
  EXPECT_EQ(log.Count("ps:0 ("), 0) << "the live task was named";

  // The dead task comes up: it answers again.
  ClusterSpec chief_cluster;
  ASSERT_TRUE(chief_cluster.AddTask("chief", 0, dead).ok());
  absl::StatusOr<std::unique_ptr<Server>> chief =
      Server::Create({.cluster = chief_cluster, .task = {"chief", 0}});
  ASSERT_TRUE(chief.ok()) << chief.status();
  ASSERT_TRUE(Within(5, [&] {
    return log.Count(absl::StrCat("worker:0: chief:0 (", dead, ") answers again after")) == 1;
  }));
  EXPECT_THAT(watch.Silent(), ::testing::ElementsAre(HasSubstr("ps:1")));

  // The live one dies: named within report_after_ms plus a probe or two.
  (*server)->Stop("test");
  ASSERT_TRUE(Within(5, [&] { return log.Count(absl::StrCat("ps:0 (", live, ")")) >= 1; }));
}

}  // namespace
}  // namespace tandem

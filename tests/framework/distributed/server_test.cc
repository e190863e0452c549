// tests/framework/distributed/server_test.cc
//
// Server: a task's address is its own. gRPC would share a port between two servers
// (SO_REUSEPORT); tandem's refuses the second with "address in use".
#include "framework/distributed/server.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/free_port.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

TEST(ServerTest, ASecondServerOnATakenAddressFails) {
  ClusterSpec cluster;
  ASSERT_TRUE(cluster.AddTask("ps", 0, absl::StrCat("127.0.0.1:", testing::PickFreePort())).ok());
  ServerOptions options{.cluster = cluster, .task = {"ps", 0}};
  absl::StatusOr<std::unique_ptr<Server>> first = Server::Create(options);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::unique_ptr<Server>> second = Server::Create(options);
  ASSERT_FALSE(second.ok()) << "two servers share " << (*first)->address();
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr("address in use"));
  EXPECT_THAT(second.status().message(), HasSubstr((*first)->address()));
  // Once the first is gone the address is free again.
  first->reset();
  absl::StatusOr<std::unique_ptr<Server>> third = Server::Create(options);
  EXPECT_TRUE(third.ok()) << third.status();
}

}  // namespace
}  // namespace tandem

// tests/framework/distributed/server_test.cc
//
// Server: a task's address is its own. gRPC would share a port between two servers
// (SO_REUSEPORT); tandem's refuses the second with "address in use". Every server
// answers gRPC's standard health check on its port, without the cluster token that
// its own services require.
#include "framework/distributed/server.h"

#include "framework/distributed/rpc/grpc_clients.h"
#include "framework/distributed/rpc/health_check.h"
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

TEST(ServerTest, AnswersTheStandardHealthCheckWithoutTheToken) {
  ClusterSpec cluster;
  ASSERT_TRUE(cluster.AddTask("ps", 0, absl::StrCat("127.0.0.1:", testing::PickFreePort())).ok());
  for (const std::string token : {"", "s3cret"}) {
    ServerOptions options{.cluster = cluster, .task = {"ps", 0}};
    options.security.token = token;
    absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(options);
    ASSERT_TRUE(server.ok()) << server.status();
    // A probe carries no token (Kubernetes' gRPC probe, grpc_health_probe).
    absl::StatusOr<ServingStatus> health = CheckHealth((*server)->address(), {}, 5000);
    ASSERT_TRUE(health.ok()) << health.status() << " token '" << token << "'";
    EXPECT_EQ(*health, ServingStatus::kServing);
    // tandem's own services still want the token.
    if (!token.empty()) {
      auto client = NewGrpcWorkerClient((*server)->address(), {}, 1);
      ASSERT_TRUE(client.ok());
      WireMessage<proto::GetStatusRequest> req;
      WireMessage<proto::GetStatusResponse> resp;
      WorkerInterface* worker = client->get();
      absl::Status st = CallAndWait(worker, &WorkerInterface::GetStatusAsync, req, &resp);
      EXPECT_EQ(st.code(), absl::StatusCode::kUnauthenticated) << st;
    }
    (*server)->Stop("test");
    absl::StatusOr<ServingStatus> after = CheckHealth((*server)->address(), {}, 2000);
    EXPECT_TRUE(!after.ok() || *after == ServingStatus::kNotServing) << "still serving after Stop";
  }
}

TEST(ServerTest, AHealthCheckOfNothingFailsWithinItsDeadline) {
  const std::string address = absl::StrCat("127.0.0.1:", testing::PickFreePort());
  absl::StatusOr<ServingStatus> health = CheckHealth(address, {}, 1000);
  ASSERT_FALSE(health.ok());
  EXPECT_THAT(health.status().code(), ::testing::AnyOf(absl::StatusCode::kUnavailable,
                                                       absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(health.status().message(), HasSubstr(address));
}

}  // namespace
}  // namespace tandem

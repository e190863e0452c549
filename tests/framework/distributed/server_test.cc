// tests/framework/distributed/server_test.cc
//
// Server: a task's address is its own. gRPC would share a port between two servers
// (SO_REUSEPORT); tandem's refuses the second with "address in use". Every server
// answers gRPC's standard health check (Check and Watch) on its port, without the
// cluster token that its own services require; with a health port, also on that
// plaintext port, which answers nothing else, while the task's own port speaks TLS.
#include "framework/distributed/server.h"

#include <chrono>
#include <thread>

#include "framework/distributed/rpc/grpc_clients.h"
#include "framework/distributed/rpc/grpc_util.h"
#include "framework/distributed/rpc/health_check.h"
#include "framework/protos/health.pb.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
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
  EXPECT_THAT(health.status().message(), HasSubstr(" attempts in "));
}

// A probe that starts before the server listens (or meets a connection cut short) is
// answered once the server is up, within the probe's timeout.
TEST(ServerTest, AHealthCheckWaitsWithinItsDeadlineForTheServerToListen) {
  ClusterSpec cluster;
  ASSERT_TRUE(cluster.AddTask("ps", 0, absl::StrCat("127.0.0.1:", testing::PickFreePort())).ok());
  const std::string address = *cluster.TaskAddress("ps", 0);
  absl::StatusOr<ServingStatus> health = absl::UnknownError("not run");
  std::thread probe([&] { health = CheckHealth(address, {}, 10000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  absl::StatusOr<std::unique_ptr<Server>> server =
      Server::Create(ServerOptions{.cluster = cluster, .task = {"ps", 0}});
  probe.join();
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, ServingStatus::kServing);
}

std::string Tls(const std::string& name) {
  std::string here = __FILE__;  // [<root>/]tests/framework/distributed/...
  std::string root = here.substr(0, here.rfind("tests/framework/"));
  return (root.empty() ? "./" : root) + "tests/data/tls/" + name;
}

absl::Status GetStatus(const std::string& address, const TransportSecurity& security) {
  auto client = NewGrpcWorkerClient(address, security, 1);
  if (!client.ok()) return client.status();
  WireMessage<proto::GetStatusRequest> req;
  WireMessage<proto::GetStatusResponse> resp;
  CallOptions options;
  options.set_timeout_ms(3000);
  WorkerInterface* worker = client->get();
  return CallAndWait(worker, &WorkerInterface::GetStatusAsync, req, &resp, &options);
}

// A one-ps cluster whose server speaks mutual TLS with tests/data/tls/cluster.
ServerOptions MutualTlsPs() {
  ClusterSpec cluster;
  CHECK(cluster.AddTask("ps", 0, absl::StrCat("127.0.0.1:", testing::PickFreePort())).ok());
  ServerOptions options{.cluster = cluster, .task = {"ps", 0}};
  options.security.cert_file = Tls("cluster/task.pem");
  options.security.key_file = Tls("cluster/task.key");
  options.security.ca_file = Tls("cluster/ca.pem");
  return options;
}

TEST(ServerTest, UnderTlsAPlaintextHealthPortAnswersProbesAndNothingElse) {
  ServerOptions options = MutualTlsPs();
  options.security.token = "s3cret";
  options.security.health_port = testing::PickFreePort();
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string health = absl::StrCat("127.0.0.1:", options.security.health_port);

  absl::StatusOr<ServingStatus> probe = CheckHealth(health, {}, 5000);
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(*probe, ServingStatus::kServing);
  // The health port serves nothing else, with or without the token.
  TransportSecurity plain_with_token;
  plain_with_token.token = "s3cret";
  absl::Status other = GetStatus(health, plain_with_token);
  EXPECT_EQ(other.code(), absl::StatusCode::kUnimplemented) << other;
  EXPECT_THAT(other.message(), HasSubstr("serves only grpc.health.v1.Health"));
  // The task's own port: plaintext and a wrongly-certified peer get nothing; a peer of
  // the cluster's CA with the token is served.
  EXPECT_FALSE(CheckHealth((*server)->address(), {}, 2000).ok());
  EXPECT_FALSE(GetStatus((*server)->address(), plain_with_token).ok());
  TransportSecurity other_ca = options.security;
  other_ca.cert_file = Tls("other/task.pem");
  other_ca.key_file = Tls("other/task.key");
  EXPECT_FALSE(GetStatus((*server)->address(), other_ca).ok());
  EXPECT_TRUE(GetStatus((*server)->address(), options.security).ok());
  absl::StatusOr<ServingStatus> over_tls =
      CheckHealth((*server)->address(), options.security, 5000);
  ASSERT_TRUE(over_tls.ok()) << over_tls.status();
  EXPECT_EQ(*over_tls, ServingStatus::kServing);

  (*server)->Stop("test");
  absl::StatusOr<ServingStatus> after = CheckHealth(health, {}, 2000);
  EXPECT_TRUE(!after.ok() || *after == ServingStatus::kNotServing) << "still serving after Stop";
}

TEST(ServerTest, ClientsCheckTheServerNameGivenInsteadOfTheHost) {
  // The certificate names 127.0.0.1, localhost and tandem-cluster.
  const ServerOptions options = MutualTlsPs();
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(options);
  ASSERT_TRUE(server.ok()) << server.status();
  TransportSecurity client = options.security;
  client.server_name = "tandem-cluster";
  EXPECT_TRUE(GetStatus((*server)->address(), client).ok());
  client.server_name = "someone-else";
  EXPECT_FALSE(GetStatus((*server)->address(), client).ok());
}

// One Watch stream, driven on a completion queue.
class WatchCall {
 public:
  explicit WatchCall(const std::string& address)
      : channel_(grpc::CreateChannel(address, grpc::InsecureChannelCredentials())),
        stub_(channel_) {
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    call_ = stub_.PrepareCall(&context_, kHealthWatchMethod, &cq_);
    call_->StartCall(Tag(1));
    Wait(1);
    proto::HealthCheckRequest request;
    grpc::Slice slice(request.SerializeAsString());
    grpc::ByteBuffer buffer(&slice, 1);
    call_->Write(buffer, Tag(2));
    Wait(2);
    call_->WritesDone(Tag(3));
    Wait(3);
  }
  // The next status the server sent, or nullopt when the stream ended.
  std::optional<int> Next() {
    grpc::ByteBuffer buffer;
    call_->Read(&buffer, Tag(4));
    if (!Wait(4)) return std::nullopt;
    std::vector<grpc::Slice> slices;
    std::string bytes;
    if (!buffer.Dump(&slices).ok()) return -1;
    for (const grpc::Slice& s : slices)
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    proto::HealthCheckResponse response;
    if (!response.ParseFromString(bytes)) return -1;
    return static_cast<int>(response.status());
  }
  grpc::Status Finish() {
    grpc::Status status;
    call_->Finish(&status, Tag(5));
    Wait(5);
    return status;
  }
  ~WatchCall() {
    cq_.Shutdown();
    void* tag;
    bool ok;
    while (cq_.Next(&tag, &ok)) {
    }
  }

 private:
  static void* Tag(intptr_t i) { return reinterpret_cast<void*>(i); }
  bool Wait(intptr_t want) {
    void* tag = nullptr;
    bool ok = false;
    EXPECT_TRUE(cq_.Next(&tag, &ok));
    EXPECT_EQ(tag, Tag(want));
    return ok;
  }
  std::shared_ptr<grpc::Channel> channel_;
  grpc::GenericStub stub_;
  grpc::ClientContext context_;
  grpc::CompletionQueue cq_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
};

TEST(ServerTest, HealthWatchStreamsServingThenNotServingOnStop) {
  ClusterSpec cluster;
  ASSERT_TRUE(cluster.AddTask("ps", 0, absl::StrCat("127.0.0.1:", testing::PickFreePort())).ok());
  ServerOptions options{.cluster = cluster, .task = {"ps", 0}};
  options.security.token = "s3cret";  // Watch needs no token either.
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(options);
  ASSERT_TRUE(server.ok()) << server.status();
  WatchCall watch((*server)->address());
  EXPECT_EQ(watch.Next(), static_cast<int>(ServingStatus::kServing));
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    (*server)->Stop("test");
  });
  EXPECT_EQ(watch.Next(), static_cast<int>(ServingStatus::kNotServing));
  EXPECT_EQ(watch.Next(), std::nullopt);  // The stream ends after NOT_SERVING.
  EXPECT_TRUE(watch.Finish().ok());
  stopper.join();
}

}  // namespace
}  // namespace tandem

// tests/framework/distributed/cluster_spec_test.cc
//
// ClusterSpec (framework/distributed/cluster_spec.h).
#include "framework/distributed/cluster_spec.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ClusterSpecTest, FromJobsCountsAndAddresses) {
  absl::StatusOr<ClusterSpec> spec =
      ClusterSpec::FromJobs({{"chief", {"host0:2222"}},
                             {"ps", {"host1:2222", "host2:2222"}},
                             {"worker", {"host3:2222", "host4:2222", "host5:2222"}}});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->empty());
  EXPECT_THAT(spec->jobs(), ElementsAre("chief", "ps", "worker"));
  EXPECT_EQ(spec->NumTasks("worker"), 3);
  EXPECT_EQ(spec->NumTasks("evaluator"), 0);
  EXPECT_EQ(spec->TotalTasks(), 6);
  EXPECT_EQ(*spec->TaskAddress("worker", 1), "host4:2222");
  EXPECT_EQ(spec->TaskAddress("worker", 3).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ClusterSpec::TaskDeviceName("worker", 1), "/job:worker/replica:0/task:1");
  EXPECT_EQ(ClusterSpec::TaskDevice("ps", 0).ToString(), "/job:ps/replica:0/task:0");
  EXPECT_THAT(spec->AllTaskDeviceNames(),
              ElementsAre("/job:chief/replica:0/task:0", "/job:ps/replica:0/task:0",
                          "/job:ps/replica:0/task:1", "/job:worker/replica:0/task:0",
                          "/job:worker/replica:0/task:1", "/job:worker/replica:0/task:2"));
}

TEST(ClusterSpecTest, SparseTasks) {
  ClusterSpec spec;
  ASSERT_TRUE(spec.AddTask("worker", 1, "host1:2222").ok());
  ASSERT_TRUE(spec.AddTask("worker", 3, "host3:2222").ok());
  EXPECT_EQ(spec.NumTasks("worker"), 2);
  EXPECT_THAT(spec.TaskIndices("worker"), ElementsAre(1, 3));
  EXPECT_FALSE(spec.HasTask("worker", 0));
  EXPECT_EQ(spec.DebugString(), R"({"worker": {"1": "host1:2222", "3": "host3:2222"}})");
  absl::Status dup = spec.AddTask("worker", 3, "host9:2222");
  EXPECT_THAT(dup.message(), HasSubstr("listed twice"));
}

TEST(ClusterSpecTest, ValidAddresses) {
  for (const char* a : {"localhost:2222", "10.0.0.1:1", "a-b.c_d.svc.cluster.local:65535",
                        "[::1]:2222", "[fe80::1:2]:80", "[::ffff:10.0.0.1]:8470"}) {
    EXPECT_TRUE(ValidateTaskAddress(a).ok()) << a << ": " << ValidateTaskAddress(a);
  }
}

TEST(ClusterSpecTest, InvalidAddressesNameTheProblem) {
  struct Case {
    const char* address;
    const char* why;
  } cases[] = {{"", "empty"},
               {"localhost", "no port"},
               {":2222", "empty host"},
               {"host:", "empty port"},
               {"host:0", "out of range"},
               {"host:65536", "out of range"},
               {"host:12a", "not a number"},
               {"::1:2222", "IPv6 hosts must be in brackets"},
               {"[::1]2222", "no ':port'"},
               {"[::1:2222", "without ']'"},
               {"ho st:2222", "invalid character"},
               {"grpc://host:2222", "no scheme"}};
  for (const Case& c : cases) {
    absl::Status s = ValidateTaskAddress(c.address);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.address;
    EXPECT_THAT(s.message(), HasSubstr(c.why)) << c.address;
  }
}

TEST(ClusterSpecTest, AddTaskValidates) {
  ClusterSpec spec;
  EXPECT_THAT(spec.AddTask("worker", 0, "host:99999").message(),
              HasSubstr("job 'worker' task 0: invalid task address 'host:99999'"));
  EXPECT_THAT(spec.AddTask("1worker", 0, "host:1").message(), HasSubstr("invalid job name"));
  EXPECT_THAT(spec.AddTask("worker", -1, "host:1").message(), HasSubstr("negative"));
  ASSERT_TRUE(spec.AddJob("ps", {"h:1"}).ok());
  EXPECT_THAT(spec.AddJob("ps", {"h:2"}).message(), HasSubstr("listed twice"));
  EXPECT_THAT(spec.AddTask("ps", 0, "h:1").message(), HasSubstr("listed twice"));
}

TEST(ClusterSpecTest, TwoTasksCannotShareAnAddress) {
  auto spec = ClusterSpec::FromJobs({{"ps", {"h:1", "h:1"}}});
  EXPECT_THAT(spec.status().message(),
              HasSubstr("job 'ps' task 1: address h:1 is also ps task 0's"));
  spec = ClusterSpec::FromJobs({{"chief", {"h:1"}}, {"worker", {"h:2", "h:1"}}});
  EXPECT_THAT(spec.status().message(),
              HasSubstr("job 'worker' task 1: address h:1 is also chief task 0's"));
  // Another port or another host is another address.
  EXPECT_TRUE(ClusterSpec::FromJobs({{"ps", {"h:1", "h:2", "g:1"}}}).ok());
}

}  // namespace
}  // namespace tandem

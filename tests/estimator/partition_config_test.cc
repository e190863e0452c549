// [distribute] partitioner (estimator/internal/partition_config.h): each partitioner and
// alias gives TensorFlow's part counts for a table, "auto" is TensorFlow's canned rule
// (parts of at least 64 MiB, one per ps task at most) on a ps cluster and nothing
// elsewhere, and the bounds hold (a row larger than max_shard_bytes, more than
// kMaxTableParts parts).
#include <string>
#include <vector>

#include "estimator/internal/partition_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::internal {
namespace {

using ::testing::HasSubstr;

constexpr char kPsCluster[] = R"(
[cluster]
chief = ["c:1"]
worker = ["w:1"]
ps = ["p:1", "p:2"]
[task]
type = "worker"
index = 0
)";

JobConfig Job(const std::string& distribute, bool cluster) {
  std::string toml = "[model]\nname = \"m\"\n[distribute]\n" + distribute;
  if (cluster) toml += kPsCluster;
  absl::StatusOr<JobConfig> job = JobConfig::Parse(toml, "job.toml");
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? *job : JobConfig();
}

// Parts of a float table of rows x cols under `distribute`; 0 when no partitioner.
absl::StatusOr<int> Parts(const std::string& distribute, bool cluster, int64_t rows,
                          int64_t cols) {
  absl::StatusOr<TablePartitioning> p = TablePartitionerFor(Job(distribute, cluster));
  if (!p.ok()) return p.status();
  if (!p->partitioner) return 0;
  absl::StatusOr<std::vector<int>> parts = p->partitioner(TensorShape({rows, cols}), DType::kFloat);
  if (!parts.ok()) return parts.status();
  EXPECT_EQ((*parts)[1], 1);
  return (*parts)[0];
}

TEST(PartitionConfigTest, AutoIsTheCannedRuleOnPsClusters) {
  // 2^22 x 16 floats = 256 MiB: 4 parts of 64 MiB wanted, one per ps task allowed.
  EXPECT_EQ(*Parts("", true, int64_t{1} << 22, 16), 2);
  EXPECT_EQ(*Parts("", true, int64_t{1} << 20, 16), 1);  // 64 MiB.
  EXPECT_EQ(*Parts("", false, int64_t{1} << 22, 16), 0);
  EXPECT_EQ(*Parts("partitioner = \"none\"\n", true, int64_t{1} << 22, 16), 0);
  absl::StatusOr<TablePartitioning> p = TablePartitionerFor(Job("", true));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->description, "auto: min_size(min_shard_bytes=67108864, max_shards=2)");
}

TEST(PartitionConfigTest, EachPartitionerAndAlias) {
  for (const char* fixed : {"fixed", "fixed_size"}) {
    const std::string f = std::string("partitioner = \"") + fixed + "\"\n";
    EXPECT_EQ(*Parts(f, true, 100, 4), 2) << "one per ps task";
    EXPECT_EQ(*Parts(f, false, 100, 4), 1) << "no ps task";
    EXPECT_EQ(*Parts(f + "num_shards = 7\n", false, 100, 4), 7);
    EXPECT_EQ(*Parts(f + "num_shards = 7\n", false, 3, 4), 3) << "at most one part per row";
  }
  for (const char* min : {"min_size", "min_max_variable", "min_max"}) {
    const std::string m = std::string("partitioner = \"") + min + "\"\n";
    // 1000 x 64 floats = 256000 bytes; parts of at least 256 KiB (the default): one.
    EXPECT_EQ(*Parts(m + "max_shards = 8\n", false, 1000, 64), 1);
    EXPECT_EQ(*Parts(m + "max_shards = 8\nmin_shard_bytes = 65536\n", false, 1000, 64), 4);
    EXPECT_EQ(*Parts(m + "min_shard_bytes = 65536\n", true, 1000, 64), 2) << "one per ps task";
  }
  for (const char* max : {"max_size", "variable_axis_size"}) {
    const std::string m = std::string("partitioner = \"") + max + "\"\n";
    // Rows of 256 bytes, at most 1024 bytes a part: 4 rows a part.
    EXPECT_EQ(*Parts(m + "max_shard_bytes = 1024\n", false, 10, 64), 3);
    EXPECT_EQ(*Parts(m + "max_shard_bytes = 1024\nmax_shards = 2\n", false, 10, 64), 2);
  }
}

TEST(PartitionConfigTest, BoundsAreRefusedNamingTheKey) {
  absl::StatusOr<int> small = Parts("partitioner = \"max_size\"\nmax_shard_bytes = 100\n", false, 10, 64);
  ASSERT_FALSE(small.ok());
  EXPECT_TRUE(IsConfigError(small.status()));
  EXPECT_THAT(small.status().message(),
              HasSubstr("max_shard_bytes = 100 is below one row (256 bytes)"));
  absl::StatusOr<int> many = Parts("partitioner = \"fixed\"\nnum_shards = 1024\n", false,
                                   100000, 1);
  EXPECT_EQ(*many, 1024);
  absl::StatusOr<int> too_many =
      Parts("partitioner = \"max_size\"\nmax_shard_bytes = 4\n", false, 5000, 1);
  ASSERT_FALSE(too_many.ok());
  EXPECT_THAT(too_many.status().message(), HasSubstr("into 5000 parts; at most 1024"));
}

TEST(PartitionConfigTest, RequestedMeansANamedPartitioner) {
  DistributeSection d;
  EXPECT_FALSE(PartitionerRequested(d));
  d.partitioner = "none";
  EXPECT_FALSE(PartitionerRequested(d));
  d.partitioner = "variable_axis_size";
  EXPECT_TRUE(PartitionerRequested(d));
  EXPECT_EQ(CanonicalPartitioner("min_max_variable"), "min_size");
}

}  // namespace
}  // namespace tandem::internal

// tests/checkpoint/distributed_saver_test.cc
//
// A Saver in a cluster (real servers in this process, a GrpcSession): each ps task
// writes the shard of its own variables (SaveShard on its CPU), so saving a table
// split over two ps tasks moves only the prefix and the step across the network, not
// the table; initialising it moves none either (each part's initializer runs on its
// ps); the shards name their devices, and restoring moves none either (each ps reads
// its own parts: RestoreShard).
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/saver.h"
#include "framework/core/env.h"
#include "framework/distributed/new_session.h"
#include "framework/distributed/rpc/grpc_util.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/initializers.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/partitioned_variables.h"
#include "framework/ops/state_ops.h"
#include "gtest/gtest.h"
#include "tests/framework/distributed/start_cluster.h"

namespace tandem::checkpoint {
namespace {

int64_t BytesSent() {
  int64_t total = 0;
  for (const auto& [type, t] : WireTrafficSent()) total += t.bytes;
  return total;
}

TEST(DistributedSaverTest, EachPsWritesItsOwnPartsAndTheTableNeverCrossesTheNetwork) {
  auto servers = testing::StartCluster({{"ps", 2}, {"worker", 1}});
  const std::string dir = *env::MakeTempDir("distributed_saver_test");
  Scope root = Scope::NewRootScope();
  auto next = std::make_shared<int>(0);
  Scope s = root.WithDeviceFunction([next](const NodeSpec& spec) {
    if (spec.op != "VarHandleOp") return spec.device;
    return std::string("/job:ps/task:") + std::to_string((*next)++ % 2);
  });
  constexpr int64_t kRows = 4096, kDim = 16;  // 256 KiB of table.
  ops::PartitionedVariable table(s, "table", TensorShape({kRows, kDim}), DType::kFloat,
                                 ops::RandomUniformInitializer(1, 2, /*seed=*/7),
                                 ops::FixedSizePartitioner(2));
  Node* init = ops::GlobalVariablesInitializer(root);
  std::vector<std::string> zero_parts;
  for (const ops::Variable& v : table.parts()) {
    Tensor zeros = Tensor::Filled(DType::kFloat, *v.shape().ToTensorShape(), 0.0);
    zero_parts.push_back(ops::Assign(root, v, ops::Const(root, zeros)).node->name());
  }
  Output probe = ops::ReduceSumAll(root.WithDevice("/job:ps/task:1"),
                                   table.parts()[1].value());  // Sum of part 1.
  absl::StatusOr<std::unique_ptr<Saver>> saver = Saver::Create(root.graph());
  ASSERT_TRUE(saver.ok()) << saver.status();
  ASSERT_TRUE(root.ok()) << root.status();
  ASSERT_EQ((*saver)->NumShards(), 2);

  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  SessionOptions opts;
  opts.target = servers[2]->target();  // The worker's master.
  opts.wait_for_workers_ms = 10000;
  absl::StatusOr<std::unique_ptr<Session>> session = NewSession(def, opts);
  ASSERT_TRUE(session.ok()) << session.status();
  // Each part's initial value is made on its ps: initialising sends no table either.
  const int64_t sent_before_init = BytesSent();
  ASSERT_TRUE((*session)->Run({}, {}, {init->name()}).ok());
  EXPECT_LT(BytesSent() - sent_before_init, kRows * kDim * 4 / 16) << "bytes sent initialising";
  auto before_sum = (*session)->Run({}, {probe.name()});
  ASSERT_TRUE(before_sum.ok()) << before_sum.status();

  const int64_t sent_before = BytesSent();
  absl::StatusOr<std::string> prefix = (*saver)->Save(session->get(), dir, 3);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  const int64_t sent = BytesSent() - sent_before;
  // Fetching the parts to the saving process would send all 262,144 bytes of them.
  EXPECT_LT(sent, kRows * kDim * 4 / 16) << "bytes sent while saving";

  for (int k = 0; k < 2; ++k) {
    absl::StatusOr<SafetensorsFile> shard =
        SafetensorsFile::Open(env::JoinPath(dir, ShardFileName(*prefix, k, 2)));
    ASSERT_TRUE(shard.ok()) << shard.status();
    EXPECT_EQ(shard->metadata().at("tandem_device"), absl::StrCat("/job:ps/task:", k));
    EXPECT_EQ(shard->metadata().at("tandem_global_step"), "3");
    EXPECT_TRUE(shard->Info(absl::StrCat("table/part_", k)).ok());
  }

  ASSERT_TRUE((*session)->Run({}, {}, zero_parts).ok());
  const int64_t sent_before_restore = BytesSent();
  absl::Status restored = (*saver)->Restore(session->get(), *prefix);
  ASSERT_TRUE(restored.ok()) << restored;
  EXPECT_LT(BytesSent() - sent_before_restore, kRows * kDim * 4 / 16) << "bytes sent restoring";
  auto after_sum = (*session)->Run({}, {probe.name()});
  ASSERT_TRUE(after_sum.ok()) << after_sum.status();
  EXPECT_EQ((*after_sum)[0].data<float>()[0], (*before_sum)[0].data<float>()[0]);
  EXPECT_NE((*before_sum)[0].data<float>()[0], 0.0f);
}

}  // namespace
}  // namespace tandem::checkpoint

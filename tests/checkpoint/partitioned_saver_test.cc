// Saver round trip of a partitioned variable (framework/ops/partitioned_variables.h):
// PartitionMap() gives SaverOptions::partitions, the index describes the parts under
// "slices", parts on two ps devices give two shards, and a restore brings every
// part back.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_index.h"
#include "checkpoint/saver.h"
#include "framework/core/env.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/partitioned_variables.h"
#include "framework/ops/state_ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tandem::checkpoint {
namespace {

using json = nlohmann::json;

TEST(PartitionedSaverTest, PartsAreSavedAsSlicesAndRestored) {
  std::string dir = *env::MakeTempDir("partitioned_saver_test");
  Scope root = Scope::NewRootScope();
  // Parts alternate between two ps tasks, as under the replica device setter.
  auto next = std::make_shared<int>(0);
  Scope s = root.WithDeviceFunction([next](const NodeSpec& spec) {
    if (spec.op != "VarHandleOp") return spec.device;
    return std::string("/job:ps/task:") + std::to_string((*next)++ % 2);
  });
  std::vector<float> values;
  for (int i = 0; i < 20; ++i) values.push_back(static_cast<float>(i));
  Tensor table = Tensor::FromVector<float>(values, TensorShape({10, 2}));
  ops::PartitionedVariable emb(s, "emb", ops::Const(s, table), ops::FixedSizePartitioner(3));
  Node* init = ops::GlobalVariablesInitializer(root);
  std::vector<std::string> zero_parts;
  for (const ops::Variable& v : emb.parts()) {
    Tensor zeros = Tensor::Filled(DType::kFloat, *v.shape().ToTensorShape(), 0.0);
    zero_parts.push_back(ops::Assign(root, v, ops::Const(root, zeros)).node->name());
  }
  Output whole = emb.AsTensor(root);
  SaverOptions options;
  options.partitions = emb.PartitionMap<PartitionInfo>();
  absl::StatusOr<std::unique_ptr<Saver>> saver = Saver::Create(root.graph(), options);
  ASSERT_TRUE(saver.ok()) << saver.status();
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ((*saver)->NumShards(), 2);

  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  absl::StatusOr<std::unique_ptr<Session>> session = NewDirectSession(def);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Run({}, {}, {init->name()}).ok());
  absl::StatusOr<std::string> prefix = (*saver)->Save(session->get(), dir, 7);
  ASSERT_TRUE(prefix.ok()) << prefix.status();

  json index = json::parse(*env::ReadFile(*prefix + ".index.json"), nullptr, false);
  const json& slices = index["slices"]["emb"];
  EXPECT_EQ(slices["full_shape"], json({10, 2}));
  ASSERT_EQ(slices["parts"].size(), 3u);
  std::map<std::string, json> offsets;
  for (const json& part : slices["parts"]) offsets[part["part"]] = part["offset"];
  EXPECT_EQ(offsets["emb/part_0"], json({0, 0}));
  EXPECT_EQ(offsets["emb/part_1"], json({4, 0}));
  EXPECT_EQ(offsets["emb/part_2"], json({7, 0}));
  absl::StatusOr<CheckpointIndex> parsed = ReadIndex(*prefix + ".index.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();

  ASSERT_TRUE((*session)->Run({}, {}, zero_parts).ok());
  auto zeroed = (*session)->Run({}, {whole.name()});
  ASSERT_TRUE(zeroed.ok()) << zeroed.status();
  EXPECT_EQ((*zeroed)[0].ValueAsDouble(19), 0.0);
  ASSERT_TRUE((*saver)->Restore(session->get(), *prefix).ok());
  auto restored = (*session)->Run({}, {whole.name()});
  ASSERT_TRUE(restored.ok()) << restored.status();
  for (int i = 0; i < 20; ++i) EXPECT_EQ((*restored)[0].ValueAsDouble(i), values[i]) << i;
  (void)env::DeleteRecursively(dir);
}

}  // namespace
}  // namespace tandem::checkpoint

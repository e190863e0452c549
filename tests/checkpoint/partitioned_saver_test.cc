// Saver round trip of a partitioned variable (framework/ops/partitioned_variables.h):
// PartitionMap() gives SaverOptions::partitions, the index describes the parts under
// "slices", parts on two ps devices give two shards, and a restore brings every
// part back. The parts' handles carry their slice info, so a Saver told nothing
// writes the same slices, and a checkpoint of N parts restores into M parts, into a
// whole variable, and a whole one into parts (TensorFlow's slice-aware restore).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_index.h"
#include "checkpoint/saver.h"
#include "framework/core/env.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/optimizers.h"
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

// One graph holding a table of 10 x 2 named "emb": whole (num_parts 0) or in parts,
// with ops to read it whole and to zero it, and its Saver (told nothing of parts).
struct TableGraph {
  explicit TableGraph(int num_parts, float base) {
    std::vector<float> values;
    for (int i = 0; i < 20; ++i) values.push_back(base + static_cast<float>(i));
    Tensor table = Tensor::FromVector<float>(values, TensorShape({10, 2}));
    if (num_parts == 0) {
      ops::Variable v(root, "emb", ops::Const(root, table));
      parts = {v};
      whole = v.value();
    } else {
      ops::PartitionedVariable pv(root, "emb", ops::Const(root, table),
                                  ops::FixedSizePartitioner(num_parts));
      parts = pv.parts();
      whole = pv.AsTensor(root);
    }
    init = ops::GlobalVariablesInitializer(root);
    absl::StatusOr<std::unique_ptr<Saver>> made = Saver::Create(root.graph());
    EXPECT_TRUE(made.ok()) << made.status();
    if (made.ok()) saver = *std::move(made);
    proto::GraphDef def;
    root.graph()->ToGraphDef(&def);
    absl::StatusOr<std::unique_ptr<Session>> s = NewDirectSession(def);
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok()) session = *std::move(s);
    if (session) {
      EXPECT_TRUE(session->Run({}, {}, {init->name()}).ok());
    }
  }
  std::vector<float> Values() {
    auto out = session->Run({}, {whole.name()});
    EXPECT_TRUE(out.ok()) << out.status();
    std::vector<float> v;
    if (out.ok()) {
      for (int64_t i = 0; i < (*out)[0].NumElements(); ++i) v.push_back((*out)[0].ValueAsDouble(i));
    }
    return v;
  }
  Scope root = Scope::NewRootScope();
  std::vector<ops::Variable> parts;
  Output whole;
  Node* init = nullptr;
  std::unique_ptr<Saver> saver;
  std::unique_ptr<Session> session;
};

TEST(PartitionedSaverTest, SlicesComeFromThePartsThemselves) {
  std::string dir = *env::MakeTempDir("partitioned_saver_test");
  TableGraph g(3, 0);
  ASSERT_NE(g.saver, nullptr);
  absl::StatusOr<std::string> prefix = g.saver->Save(g.session.get(), dir, 1);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  absl::StatusOr<CheckpointIndex> index = ReadIndex(*prefix + ".index.json");
  ASSERT_TRUE(index.ok()) << index.status();
  ASSERT_TRUE(index->slices.contains("emb"));
  EXPECT_EQ(index->slices.at("emb").full_shape, Dims({10, 2}));
  EXPECT_EQ(index->slices.at("emb").parts.size(), 3u);
  (void)env::DeleteRecursively(dir);
}

// Saves a table laid out as `from` parts (0: whole) and restores it into one laid out
// as `to`, whose own values differ before the restore.
void ExpectRelayoutRestores(int from, int to) {
  SCOPED_TRACE(absl::StrCat(from, " parts -> ", to, " parts"));
  std::string dir = *env::MakeTempDir("partitioned_saver_test");
  TableGraph source(from, 0);
  ASSERT_NE(source.saver, nullptr);
  const std::vector<float> saved = source.Values();
  absl::StatusOr<std::string> prefix = source.saver->Save(source.session.get(), dir, 5);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  TableGraph target(to, 100);
  ASSERT_NE(target.saver, nullptr);
  ASSERT_NE(target.Values(), saved);
  absl::Status restored = target.saver->Restore(target.session.get(), *prefix);
  ASSERT_TRUE(restored.ok()) << restored;
  EXPECT_EQ(target.Values(), saved);
  (void)env::DeleteRecursively(dir);
}

TEST(PartitionedSaverTest, RestoresIntoAnotherPartitioning) {
  ExpectRelayoutRestores(3, 2);
  ExpectRelayoutRestores(2, 3);
  ExpectRelayoutRestores(3, 0);
  ExpectRelayoutRestores(0, 4);
  ExpectRelayoutRestores(3, 3);
}

TEST(PartitionedSaverTest, RelayoutRefusesAnotherLogicalShape) {
  std::string dir = *env::MakeTempDir("partitioned_saver_test");
  TableGraph source(2, 0);
  ASSERT_NE(source.saver, nullptr);
  absl::StatusOr<std::string> prefix = source.saver->Save(source.session.get(), dir, 5);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  // A model whose "emb" has 12 rows in 3 parts: the parts are not in the checkpoint
  // and the logical tensor there has 10 rows.
  Scope root = Scope::NewRootScope();
  ops::PartitionedVariable pv(root, "emb", TensorShape({12, 2}), DType::kFloat,
                              ops::ZerosInitializer(), ops::FixedSizePartitioner(3));
  Node* init = ops::GlobalVariablesInitializer(root);
  absl::StatusOr<std::unique_ptr<Saver>> saver = Saver::Create(root.graph());
  ASSERT_TRUE(saver.ok()) << saver.status();
  proto::GraphDef def;
  root.graph()->ToGraphDef(&def);
  auto session = NewDirectSession(def);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Run({}, {}, {init->name()}).ok());
  absl::Status s = (*saver)->Restore(session->get(), *prefix);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), ::testing::HasSubstr("[10,2]"));
  EXPECT_THAT(s.message(), ::testing::HasSubstr("[12,2]"));
  (void)env::DeleteRecursively(dir);
}

// A table of 10 x 2 in `num_parts` parts, trained one Adagrad step through a lookup,
// with its slot read whole.
struct TrainedTable {
  explicit TrainedTable(int num_parts) {
    std::vector<float> values;
    for (int i = 0; i < 20; ++i) values.push_back(0.1f * static_cast<float>(i));
    ops::PartitionedVariable pv(root, "emb", ops::Const(root, Tensor::FromVector<float>(
                                                                  values, TensorShape({10, 2}))),
                                ops::FixedSizePartitioner(num_parts));
    Output ids = ops::ConstInt64(root, std::vector<int64_t>{1, 4, 4, 9});
    Output loss = ops::ReduceSumAll(root, ops::Square(root, ops::EmbeddingLookup(root, pv, ids)));
    auto train_op = opt.Minimize(root, loss);
    EXPECT_TRUE(train_op.ok()) << train_op.status();
    train = train_op.ok() ? *train_op : nullptr;
    std::vector<Output> slot_parts;
    for (const ops::Variable& part : pv.parts()) slot_parts.push_back(opt.GetSlot(part, "accumulator")->value());
    table = pv.AsTensor(root);
    slot = slot_parts.size() == 1 ? slot_parts[0] : ops::Concat(root, slot_parts, 0);
    Node* init = ops::GlobalVariablesInitializer(root);
    auto made = Saver::Create(root.graph());
    EXPECT_TRUE(made.ok()) << made.status();
    if (made.ok()) saver = *std::move(made);
    proto::GraphDef def;
    root.graph()->ToGraphDef(&def);
    auto s = NewDirectSession(def);
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok()) session = *std::move(s);
    if (session) {
      EXPECT_TRUE(session->Run({}, {}, {init->name()}).ok());
    }
  }
  std::vector<float> Fetch(Output t) {
    auto out = session->Run({}, {t.name()});
    EXPECT_TRUE(out.ok()) << out.status();
    std::vector<float> v;
    if (out.ok()) {
      for (int64_t i = 0; i < (*out)[0].NumElements(); ++i) v.push_back((*out)[0].ValueAsDouble(i));
    }
    return v;
  }
  Scope root = Scope::NewRootScope();
  ops::AdagradOptimizer opt{0.5f};
  Node* train = nullptr;
  Output table, slot;
  std::unique_ptr<Saver> saver;
  std::unique_ptr<Session> session;
};

TEST(PartitionedSaverTest, OptimizerSlotsOfPartsRestoreIntoAnotherPartitioning) {
  std::string dir = *env::MakeTempDir("partitioned_saver_test");
  TrainedTable source(3);
  ASSERT_NE(source.saver, nullptr);
  ASSERT_TRUE(source.session->Run({}, {}, {source.train->name()}).ok());
  const std::vector<float> table = source.Fetch(source.table);
  const std::vector<float> slot = source.Fetch(source.slot);
  absl::StatusOr<std::string> prefix = source.saver->Save(source.session.get(), dir, 1);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  absl::StatusOr<CheckpointIndex> index = ReadIndex(*prefix + ".index.json");
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_TRUE(index->slices.contains("emb/Adagrad")) << "the slot is one logical tensor too";

  TrainedTable target(2);
  ASSERT_NE(target.saver, nullptr);
  ASSERT_NE(target.Fetch(target.slot), slot);
  absl::Status restored = target.saver->Restore(target.session.get(), *prefix);
  ASSERT_TRUE(restored.ok()) << restored;
  EXPECT_EQ(target.Fetch(target.table), table);
  EXPECT_EQ(target.Fetch(target.slot), slot);
  (void)env::DeleteRecursively(dir);
}

}  // namespace
}  // namespace tandem::checkpoint

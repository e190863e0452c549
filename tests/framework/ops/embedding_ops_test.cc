// Tests of the row-exact lookup in a partitioned table (framework/ops/embedding_ops.h):
// PartitionIds and StitchRows against hand-made cases, PartitionedRows against a dense
// gather for "mod" and "div", sparse gradients holding each part's own rows only, and,
// on the graph placed on two ps tasks and partitioned per task, that each ps receives
// only its part's ids.
#include "framework/ops/embedding_ops.h"

#include <string>
#include <vector>

#include "framework/ops/array_ops.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/optimizers.h"
#include "framework/ops/partitioned_variables.h"
#include "framework/runtime/partitioner.h"
#include "framework/runtime/placer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/ops/training_test_util.h"

namespace tandem {
namespace {

using ::tandem::testing::StartSession;
using ::tandem::testing::ToFloats;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<int64_t> Ints(const Tensor& t) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t.NumElements(); ++i) v.push_back(static_cast<int64_t>(t.ValueAsDouble(i)));
  return v;
}

TEST(EmbeddingOpsTest, PartitionIdsModAndDiv) {
  Scope root = Scope::NewRootScope();
  Output ids = ops::Placeholder(root.WithOpName("ids"), DType::kInt64, PartialShape({-1}));
  ops::PartitionedIds mod = ops::PartitionIds(root, ids, {4, 3, 3}, "mod");
  ops::PartitionedIds div = ops::PartitionIds(root, ids, {4, 3, 3}, "div");
  auto session = StartSession(root, false);
  ASSERT_TRUE(session.ok());
  std::vector<std::string> fetches;
  for (int p = 0; p < 3; ++p) {
    for (const ops::PartitionedIds* s : {&mod, &div}) {
      fetches.push_back(s->local_ids[p].name());
      fetches.push_back(s->positions[p].name());
    }
  }
  auto r = (*session)->Run({{"ids", Tensor::FromVector<int64_t>({9, 0, 4, 5, 3}, {5})}}, fetches,
                           {});
  ASSERT_TRUE(r.ok()) << r.status();
  // mod: 9 -> part 0 row 3, 0 -> 0/0, 4 -> 1/1, 5 -> 2/1, 3 -> 0/1.
  EXPECT_THAT(Ints((*r)[0]), ElementsAre(3, 0, 1));
  EXPECT_THAT(Ints((*r)[1]), ElementsAre(0, 1, 4));
  EXPECT_THAT(Ints((*r)[4]), ElementsAre(1));
  EXPECT_THAT(Ints((*r)[5]), ElementsAre(2));
  EXPECT_THAT(Ints((*r)[8]), ElementsAre(1));
  // div over rows 0-3, 4-6, 7-9: 9 -> part 2 row 2, 0 -> 0/0, 4 -> 1/0, 5 -> 1/1, 3 -> 0/3.
  EXPECT_THAT(Ints((*r)[2]), ElementsAre(0, 3));
  EXPECT_THAT(Ints((*r)[3]), ElementsAre(1, 4));
  EXPECT_THAT(Ints((*r)[6]), ElementsAre(0, 1));
  EXPECT_THAT(Ints((*r)[10]), ElementsAre(2));
  EXPECT_THAT(Ints((*r)[11]), ElementsAre(0));
  auto bad = (*session)->Run({{"ids", Tensor::FromVector<int64_t>({10}, {1})}}, fetches, {});
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("ids[0] = 10 is not in [0, 10)"));
}

TEST(EmbeddingOpsTest, StitchRowsInvertsThePartition) {
  Scope root = Scope::NewRootScope();
  Output p0 = ops::ConstInt32(root, std::vector<int32_t>{2, 0});
  Output p1 = ops::ConstInt32(root, std::vector<int32_t>{1});
  Output r0 = ops::Const(root, Tensor::FromVector<float>({20, 21, 0, 1}, TensorShape({2, 2})));
  Output r1 = ops::Const(root, Tensor::FromVector<float>({10, 11}, TensorShape({1, 2})));
  Output out = ops::StitchRows(root, {p0, p1}, {r0, r1});
  Output twice = ops::StitchRows(root, {p0, p0}, {r0, r0});
  auto session = StartSession(root, false);
  ASSERT_TRUE(session.ok());
  auto r = (*session)->Run({}, {out.name()}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(ToFloats((*r)[0]), ElementsAre(0, 1, 10, 11, 20, 21));
  EXPECT_THAT(std::string((*session)->Run({}, {twice.name()}, {}).status().message()),
              HasSubstr("given twice"));
}

// A [10, 2] table (row r = {r, -r}) in 3 parts by `strategy`, and its rows for `ids`.
struct Table {
  ops::PartitionedVariable pv;
  Output rows;
};
Table Lookup(const Scope& root, Output ids, const std::string& strategy) {
  std::vector<float> v;
  for (int r = 0; r < 10; ++r) v.insert(v.end(), {float(r), -float(r)});
  Table t;
  std::vector<float> init = v;
  if (strategy == "mod") {  // Part p holds rows p, p + 3, ...: reorder the initial value.
    init.clear();
    for (int p = 0; p < 3; ++p) {
      for (int r = p; r < 10; r += 3) init.insert(init.end(), {float(r), -float(r)});
    }
  }
  t.pv = ops::PartitionedVariable(root, "table",
                                  ops::Const(root, Tensor::FromVector<float>(init, {10, 2})),
                                  ops::FixedSizePartitioner(3));
  t.rows = ops::PartitionedRows(root.NewSubScope("lookup"), t.pv.parts(), ids, strategy);
  return t;
}

TEST(EmbeddingOpsTest, PartitionedRowsEqualADenseGather) {
  for (const char* strategy : {"mod", "div"}) {
    Scope root = Scope::NewRootScope();
    Output ids = ops::Placeholder(root.WithOpName("ids"), DType::kInt32, PartialShape({-1}));
    Table t = Lookup(root, ids, strategy);
    auto session = StartSession(root);
    ASSERT_TRUE(session.ok()) << session.status();
    auto r = (*session)->Run({{"ids", Tensor::FromVector<int32_t>({7, 2, 9, 0, 5}, {5})}},
                             {t.rows.name()}, {});
    ASSERT_TRUE(r.ok()) << strategy << ": " << r.status();
    EXPECT_THAT(ToFloats((*r)[0]), ElementsAre(7, -7, 2, -2, 9, -9, 0, 0, 5, -5)) << strategy;
  }
}

TEST(EmbeddingOpsTest, EachPartsGradientHoldsItsOwnRowsOnly) {
  Scope root = Scope::NewRootScope();
  Output ids = ops::Placeholder(root.WithOpName("ids"), DType::kInt64, PartialShape({-1}));
  Table t = Lookup(root, ids, "div");
  ops::GradientDescentOptimizer sgd(1.f);
  auto grads = sgd.ComputeGradients(root, ops::ReduceSumAll(root, t.rows));
  ASSERT_TRUE(grads.ok()) << grads.status();
  ASSERT_EQ(grads->size(), 3u);
  std::vector<std::string> fetches;
  for (const ops::GradAndVar& g : *grads) {
    ASSERT_TRUE(g.sparse.has_value()) << g.var.name();
    fetches.push_back(g.sparse->indices.name());
  }
  auto session = StartSession(root);
  ASSERT_TRUE(session.ok());
  auto r = (*session)->Run({{"ids", Tensor::FromVector<int64_t>({8, 1, 2}, {3})}}, fetches, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(Ints((*r)[0]), ElementsAre(1, 2));  // Rows 1 and 2 of part 0 (rows 0-3).
  EXPECT_THAT(Ints((*r)[1]), ElementsAre());      // Nothing of part 1 (rows 4-6).
  EXPECT_THAT(Ints((*r)[2]), ElementsAre(1));     // Row 8 is part 2's row 1.
}

TEST(EmbeddingOpsTest, OnTwoPsEachTaskReceivesOnlyItsPartsIds) {
  constexpr char kPs0[] = "/job:ps/replica:0/task:0/device:CPU:0";
  constexpr char kPs1[] = "/job:ps/replica:0/task:1/device:CPU:0";
  constexpr char kWorker[] = "/job:worker/replica:0/task:0/device:CPU:0";
  auto next = std::make_shared<int>(0);
  Scope root = Scope::NewRootScope().WithDeviceFunction([next](const NodeSpec& spec) {
    if (spec.op != "VarHandleOp") return spec.device;
    return std::string(((*next)++ % 2) == 0 ? "/job:ps/task:0" : "/job:ps/task:1");
  });
  Output ids = ops::Placeholder(root.WithOpName("ids"), DType::kInt64, PartialShape({-1}));
  ops::PartitionedVariable pv(root, "table", TensorShape({10, 4}), DType::kFloat,
                              ops::ZerosInitializer(), ops::FixedSizePartitioner(2));
  Output rows = ops::PartitionedRows(root.NewSubScope("lookup"), pv.parts(), ids, "div");
  ASSERT_TRUE(root.ok()) << root.status();
  ASSERT_TRUE(rows.valid());
  PlacerOptions placer;
  placer.default_device = "/job:worker/replica:0/task:0";
  const std::vector<std::string> devices = {kPs0, kPs1, kWorker};
  ASSERT_TRUE(PlaceGraph(root.graph(), devices, placer).ok());
  PartitionOptions po;
  po.node_to_loc = SplitByTask;
  for (const std::string& d : devices) po.incarnations[d] = 1;
  auto parts = PartitionGraph(*root.graph(), po);
  ASSERT_TRUE(parts.ok()) << parts.status();
  const proto::GraphDef& worker = parts->at("/job:worker/replica:0/task:0");
  // Every tensor the lookup sends to a ps is that ps's own ids (PartitionIds output p).
  // (The parts' initial values, made where the initializer runs, are sent once, at
  // initialisation.)
  int sends_to_ps = 0;
  for (const auto& n : worker.node()) {
    if (n.op() != "_Send") continue;
    const std::string to = n.attr().at("recv_device").s();
    if (to.find("/job:ps/") == std::string::npos) continue;
    if (n.input(0).rfind("table/", 0) == 0 && n.input(0).find("/Initializer/") != std::string::npos) {
      continue;
    }
    ++sends_to_ps;
    const int p = to.find("task:1") != std::string::npos ? 1 : 0;
    EXPECT_EQ(n.input(0), "lookup/partition_ids:" + std::to_string(p)) << to;
  }
  EXPECT_EQ(sends_to_ps, 2);
}

}  // namespace
}  // namespace tandem

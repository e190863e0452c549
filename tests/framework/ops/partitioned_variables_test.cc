// Tests of partitioned variables: each partitioner against TensorFlow's documented
// cases, the split rule, part names, offsets and collections, parts placed round-robin
// by the replica device setter's rule (a device function, as the estimator installs),
// AsTensor against the unpartitioned value, and the partitioned embedding lookup
// ("mod" and "div") against a dense Gather, with its gradients w.r.t. the parts, all
// run in a DirectSession (which ignores job and task in device names).
#include "framework/ops/partitioned_variables.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "framework/ops/array_ops.h"
#include "framework/ops/gradients.h"
#include "framework/ops/math_ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/ops/training_test_util.h"

namespace tandem {
namespace {

using ::tandem::testing::FetchFloats;
using ::tandem::testing::StartSession;
using ::tandem::testing::ToFloats;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

std::vector<int> Parts(const ops::Partitioner& p, const TensorShape& shape,
                       DType dtype = DType::kFloat) {
  absl::StatusOr<std::vector<int>> r = p(shape, dtype);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : std::vector<int>{};
}

// A [rows, cols] table with value 10 * row + col.
Tensor Table(int64_t rows, int64_t cols) {
  std::vector<float> v;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) v.push_back(static_cast<float>(10 * r + c));
  return Tensor::FromVector<float>(v, TensorShape({rows, cols}));
}

// A round-robin ps device function: what the replica device setter does for
// variables (framework/distributed/replica_device_setter.h, a layer above ops).
DeviceFunction RoundRobinPs(int tasks) {
  auto next = std::make_shared<int>(0);
  return [tasks, next](const NodeSpec& spec) {
    if (spec.op != "VarHandleOp") return spec.device;
    std::string d = "/job:ps/task:" + std::to_string(*next);
    *next = (*next + 1) % tasks;
    return d;
  };
}

TEST(PartitionedVariablesTest, SplitRuleGivesTheExtraRowsToTheFirstParts) {
  EXPECT_THAT(ops::PartitionSizes(10, 3), ElementsAre(4, 3, 3));
  EXPECT_THAT(ops::PartitionSizes(11, 3), ElementsAre(4, 4, 3));
  EXPECT_THAT(ops::PartitionSizes(9, 3), ElementsAre(3, 3, 3));
  EXPECT_THAT(ops::PartitionSizes(5, 1), ElementsAre(5));
}

TEST(PartitionedVariablesTest, FixedSizePartitioner) {
  EXPECT_THAT(Parts(ops::FixedSizePartitioner(3), TensorShape({10, 4})), ElementsAre(3, 1));
  EXPECT_THAT(Parts(ops::FixedSizePartitioner(20), TensorShape({10, 4})), ElementsAre(10, 1));
  EXPECT_THAT(Parts(ops::FixedSizePartitioner(3, 1), TensorShape({10, 4})), ElementsAre(1, 3));
  EXPECT_EQ(ops::FixedSizePartitioner(0)(TensorShape({10}), DType::kFloat).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ops::FixedSizePartitioner(2, 1)(TensorShape({10}), DType::kFloat).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// TensorFlow's partitioned_variables_test.testVariableAxisSizePartitioner: a float
// variable of shape (4, 8, 16, 32).
TEST(PartitionedVariablesTest, VariableAxisSizePartitionerMatchesTensorFlow) {
  const TensorShape shape({4, 8, 16, 32});
  auto axis_shards = [&](int axis, int64_t max_bytes, int max_shards = 0) {
    return Parts(ops::VariableAxisSizePartitioner(max_bytes, axis, 16, max_shards), shape)[axis];
  };
  EXPECT_EQ(axis_shards(0, 131072), 1);  // 16384 B per slice, 65536 B in all.
  EXPECT_EQ(axis_shards(1, 65536), 1);   // Exactly one shard's worth.
  EXPECT_EQ(axis_shards(2, 32768), 2);   // 4096 B per slice: 8 slices per shard.
  EXPECT_EQ(axis_shards(3, 2048), 32);   // One 2048 B slice per shard.
  EXPECT_EQ(axis_shards(3, 1024), 32);   // Slices larger than a shard: still one each.
  EXPECT_EQ(axis_shards(3, 1024, 33), 32);
  EXPECT_EQ(axis_shards(3, 1024, 2), 2);  // Capped by max_shards.
  // 2048 B per slice, 16 slices per 32768 B shard: 2 shards (TF's formula).
  EXPECT_THAT(Parts(ops::VariableAxisSizePartitioner(32768, 3), shape), ElementsAre(1, 1, 1, 2));
  EXPECT_EQ(ops::VariableAxisSizePartitioner(0)(shape, DType::kFloat).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// TensorFlow's partitioned_variables_test.testMinMaxVariablePartitioner.
TEST(PartitionedVariablesTest, MinMaxVariablePartitionerMatchesTensorFlow) {
  auto parts = [](int max_partitions, int axis, int64_t min_slice, const TensorShape& shape) {
    return Parts(ops::MinMaxVariablePartitioner(max_partitions, axis, min_slice), shape);
  };
  EXPECT_THAT(parts(100, 0, 2 << 10, TensorShape({2048})), ElementsAre(4));
  EXPECT_THAT(parts(100, 0, 256 << 10, TensorShape({2048, 1024})), ElementsAre(32, 1));
  EXPECT_THAT(parts(16, 0, 256 << 10, TensorShape({2048, 1024})), ElementsAre(16, 1));
  EXPECT_THAT(parts(1, 0, 256 << 10, TensorShape({2048, 1024})), ElementsAre(1, 1));
  EXPECT_THAT(parts(100, 0, 128 << 10, TensorShape({2048, 1024})), ElementsAre(64, 1));
  EXPECT_THAT(parts(100, 0, 512 << 10, TensorShape({2048, 1024})), ElementsAre(16, 1));
  EXPECT_THAT(parts(100, 1, 256 << 10, TensorShape({64, 1024, 1, 3})), ElementsAre(1, 3, 1, 1));
  EXPECT_THAT(parts(100, 3, 256 << 10, TensorShape({64, 1024, 1, 3})), ElementsAre(1, 1, 1, 3));
  EXPECT_THAT(parts(100, 0, 256 << 10, TensorShape({16, 128, 1024})), ElementsAre(16, 1, 1));
  EXPECT_THAT(parts(100, 0, 256 << 10, TensorShape({4, 512, 1024})), ElementsAre(4, 1, 1));
  // A small variable stays whole.
  EXPECT_THAT(parts(100, 0, 256 << 10, TensorShape({10, 4})), ElementsAre(1, 1));
  EXPECT_EQ(
      ops::MinMaxVariablePartitioner(4, 2)(TensorShape({8, 8}), DType::kFloat).status().code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(PartitionedVariablesTest, PartsNamesShapesOffsetsAndCollections) {
  Scope root = Scope::NewRootScope();
  Scope model = root.NewSubScope("model");
  ops::PartitionedVariable emb(model, "emb", TensorShape({10, 4}), DType::kFloat,
                               ops::ConstantInitializer(0.5f), ops::FixedSizePartitioner(3));
  ASSERT_TRUE(root.ok()) << root.status();
  ASSERT_EQ(emb.num_parts(), 3);
  EXPECT_EQ(emb.name(), "model/emb");
  EXPECT_EQ(emb.axis(), 0);
  std::vector<std::string> names;
  std::vector<PartialShape> shapes;
  for (const ops::Variable& v : emb.parts()) {
    names.push_back(v.name());
    shapes.push_back(v.shape());
  }
  EXPECT_THAT(names, ElementsAre("model/emb/part_0", "model/emb/part_1", "model/emb/part_2"));
  EXPECT_THAT(shapes,
              ElementsAre(PartialShape({4, 4}), PartialShape({3, 4}), PartialShape({3, 4})));
  EXPECT_THAT(emb.offsets(), ElementsAre(Dims{0, 0}, Dims{4, 0}, Dims{7, 0}));
  EXPECT_THAT(root.graph()->GetCollection(ops::kTrainableVariables), Contains("model/emb/part_1"));
  std::map<std::string, ops::SaveSliceInfo> slices = emb.PartitionMap();
  ASSERT_EQ(slices.size(), 3u);
  EXPECT_EQ(slices["model/emb/part_2"].full_name, "model/emb");
  EXPECT_EQ(slices["model/emb/part_2"].full_shape, (Dims{10, 4}));
  EXPECT_EQ(slices["model/emb/part_2"].offset, (Dims{7, 0}));

  // A second "emb" gets a unique logical name.
  ops::PartitionedVariable again(model, "emb", TensorShape({4}), DType::kFloat,
                                 ops::ZerosInitializer(), ops::FixedSizePartitioner(2));
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(again.name(), "model/emb_1");
  EXPECT_EQ(again.parts()[1].name(), "model/emb_1/part_1");

  Output whole = emb.AsTensor(root);  // Built before the session takes the graph.
  auto session = StartSession(root);
  ASSERT_TRUE(session.ok()) << session.status();
  absl::StatusOr<std::vector<float>> all = FetchFloats(**session, whole);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(*all, std::vector<float>(40, 0.5f));
}

TEST(PartitionedVariablesTest, PartsArePlacedOneByOneByTheDeviceFunction) {
  Scope root = Scope::NewRootScope();
  Scope s = root.WithDeviceFunction(RoundRobinPs(2));
  ops::PartitionedVariable emb(s, "emb", ops::Const(s, Table(10, 4)), ops::FixedSizePartitioner(3));
  ASSERT_TRUE(root.ok()) << root.status();
  std::vector<std::string> devices;
  for (const ops::Variable& v : emb.parts()) devices.push_back(v.handle().node->requested_device());
  EXPECT_THAT(devices, ElementsAre("/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:0"));
}

TEST(PartitionedVariablesTest, AsTensorEqualsTheUnpartitionedValueOnEitherAxis) {
  Scope root = Scope::NewRootScope();
  Scope s = root.WithDeviceFunction(RoundRobinPs(2));
  Output init = ops::Const(s.WithOpName("table"), Table(10, 4));
  ops::PartitionedVariable rows(s, "rows", init, ops::FixedSizePartitioner(3));
  ops::PartitionedVariable cols(s, "cols", init, ops::FixedSizePartitioner(3, 1));
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(cols.axis(), 1);
  EXPECT_THAT(cols.offsets(), ElementsAre(Dims{0, 0}, Dims{0, 2}, Dims{0, 3}));
  EXPECT_EQ(cols.parts()[0].shape(), PartialShape({10, 2}));
  Output rows_value = rows.AsTensor(root), cols_value = cols.AsTensor(root);
  auto session = StartSession(root);  // Ignores the ps job and tasks.
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<float> want = ToFloats(Table(10, 4));
  auto got_rows = FetchFloats(**session, rows_value);
  auto got_cols = FetchFloats(**session, cols_value);
  ASSERT_TRUE(got_rows.ok() && got_cols.ok()) << got_rows.status() << got_cols.status();
  EXPECT_EQ(*got_rows, want);
  EXPECT_EQ(*got_cols, want);
}

TEST(PartitionedVariablesTest, CreationErrorsAreRecordedInTheScope) {
  Scope root = Scope::NewRootScope();
  ops::PartitionedVariable bad(root, "bad", TensorShape({10}), DType::kFloat,
                               ops::ZerosInitializer(), ops::FixedSizePartitioner(2, 3));
  EXPECT_FALSE(bad.valid());
  EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(root.status().message(), HasSubstr("'bad'"));

  Scope root2 = Scope::NewRootScope();
  ops::PartitionedVariable two_axes(
      root2, "two", TensorShape({4, 4}), DType::kFloat, ops::ZerosInitializer(),
      [](const TensorShape&, DType) -> absl::StatusOr<std::vector<int>> {
        return std::vector<int>{2, 2};
      });
  EXPECT_THAT(root2.status().message(), HasSubstr("more than one dimension"));

  Scope root3 = Scope::NewRootScope();
  Output unknown = ops::Placeholder(root3, DType::kFloat, PartialShape({-1, 4}));
  ops::PartitionedVariable ragged(root3, "ragged", unknown, ops::FixedSizePartitioner(2));
  EXPECT_THAT(root3.status().message(), HasSubstr("fully defined"));
}

// The lookup of `ids` (shape [2, 6], hitting every part, with repeats) in a [10, 3]
// table split in 3 parts, for `strategy`; compared with a dense Gather of the table
// laid out as the strategy reads it, and its gradient w.r.t. each part with the
// segment sums of the upstream weights.
void CheckLookup(const std::string& strategy, DType id_dtype) {
  SCOPED_TRACE(strategy);
  constexpr int kRows = 10, kCols = 3, kParts = 3;
  const std::vector<int64_t> ids = {0, 9, 3, 3, 5, 1, 7, 7, 2, 8, 4, 6};
  Scope root = Scope::NewRootScope();
  Scope s = root.WithDeviceFunction(RoundRobinPs(2));
  Tensor table = Table(kRows, kCols);
  ops::PartitionedVariable emb(s, "emb", ops::Const(s.WithOpName("init"), table),
                               ops::FixedSizePartitioner(kParts));
  ASSERT_TRUE(root.ok()) << root.status();
  // Which (part, row) holds id, by the strategy.
  std::vector<int64_t> sizes = ops::PartitionSizes(kRows, kParts);
  auto locate = [&](int64_t id, int* part, int64_t* row) {
    if (strategy == "mod") {
      *part = static_cast<int>(id % kParts);
      *row = id / kParts;
      return;
    }
    int64_t start = 0;
    for (int p = 0; p < kParts; ++p) {
      if (id < start + sizes[p]) {
        *part = p;
        *row = id - start;
        return;
      }
      start += sizes[p];
    }
  };
  // The dense table in id order: id -> row of its part (parts hold contiguous slices
  // of `table`, offsets 0, 4, 7).
  const std::vector<float> flat_table = ToFloats(table);
  std::vector<float> dense;
  for (int64_t id = 0; id < kRows; ++id) {
    int part = 0;
    int64_t row = 0;
    locate(id, &part, &row);
    int64_t full_row = emb.offsets()[part][0] + row;
    for (int c = 0; c < kCols; ++c) dense.push_back(flat_table[full_row * kCols + c]);
  }
  Tensor id_tensor = id_dtype == DType::kInt64
                         ? Tensor::FromVector<int64_t>(ids, TensorShape({2, 6}))
                         : Tensor::FromVector<int32_t>(std::vector<int32_t>(ids.begin(), ids.end()),
                                                       TensorShape({2, 6}));
  Output id_out = ops::Const(s.WithOpName("ids"), id_tensor);
  Output got = ops::EmbeddingLookup(s, emb, id_out, strategy);
  Output want = ops::Gather(
      s, ops::Const(s, Tensor::FromVector<float>(dense, TensorShape({kRows, kCols}))), id_out);
  // loss = sum(lookup * w), w[i, j, c] = i * 6 + j + 1 (distinct per id occurrence).
  std::vector<float> w;
  for (int i = 0; i < 12; ++i)
    for (int c = 0; c < kCols; ++c) w.push_back(static_cast<float>(i + 1) + 0.25f * c);
  Output loss = ops::ReduceSumAll(
      s, ops::Mul(s, got, ops::Const(s, Tensor::FromVector<float>(w, TensorShape({2, 6, kCols})))));
  std::vector<Output> handles;
  for (const ops::Variable& v : emb.parts()) handles.push_back(v.handle());
  absl::StatusOr<std::vector<Output>> grads = Gradients(s, {loss}, handles);
  ASSERT_TRUE(grads.ok()) << grads.status();
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(got.shape(), PartialShape({2, 6, kCols}));

  auto session = StartSession(root);
  ASSERT_TRUE(session.ok()) << session.status();
  absl::StatusOr<std::vector<float>> got_v = FetchFloats(**session, got);
  ASSERT_TRUE(got_v.ok()) << got_v.status();
  EXPECT_THAT(*got_v, ElementsAreArray(*FetchFloats(**session, want)));
  // Expected gradients: each occurrence's weights added to its (part, row).
  for (int p = 0; p < kParts; ++p) {
    std::vector<float> expect(sizes[p] * kCols, 0.0f);
    for (size_t i = 0; i < ids.size(); ++i) {
      int part = 0;
      int64_t row = 0;
      locate(ids[i], &part, &row);
      if (part != p) continue;
      for (int c = 0; c < kCols; ++c) expect[row * kCols + c] += w[i * kCols + c];
    }
    absl::StatusOr<std::vector<float>> g = FetchFloats(**session, (*grads)[p]);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_THAT(*g, ElementsAreArray(expect)) << "part " << p;
  }
}

TEST(PartitionedVariablesTest, EmbeddingLookupModMatchesDenseGatherAndGradients) {
  CheckLookup("mod", DType::kInt32);
  CheckLookup("mod", DType::kInt64);
}

TEST(PartitionedVariablesTest, EmbeddingLookupDivMatchesDenseGatherAndGradients) {
  CheckLookup("div", DType::kInt32);
  CheckLookup("div", DType::kInt64);
}

TEST(PartitionedVariablesTest, EmbeddingLookupErrors) {
  Scope root = Scope::NewRootScope();
  ops::PartitionedVariable emb(root, "emb", ops::Const(root, Table(10, 2)),
                               ops::FixedSizePartitioner(3));
  Output ids = ops::ConstInt32(root.WithOpName("ids"), std::vector<int32_t>{0, 12});
  Output oob = ops::EmbeddingLookup(root, emb, ids, "div");
  ASSERT_TRUE(root.ok()) << root.status();
  auto session = StartSession(root);
  ASSERT_TRUE(session.ok()) << session.status();
  absl::StatusOr<std::vector<Tensor>> run = (*session)->Run({}, {oob.name()});
  EXPECT_FALSE(run.ok());
  EXPECT_THAT(run.status().message(), HasSubstr("= 12 is not in [0, 10)"));

  // Parts whose sizes the strategy cannot have produced.
  Scope root2 = Scope::NewRootScope();
  ops::Variable a(root2, "a", ops::Const(root2, Table(3, 2)));
  ops::Variable b(root2, "b", ops::Const(root2, Table(4, 2)));
  ops::EmbeddingLookup(root2, {a, b}, ops::ConstInt32(root2, std::vector<int32_t>{1}), "div");
  EXPECT_EQ(root2.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(root2.status().message(), HasSubstr("do not follow the \"div\" layout"));

  Scope root3 = Scope::NewRootScope();
  ops::PartitionedVariable e3(root3, "e", ops::Const(root3, Table(4, 2)),
                              ops::FixedSizePartitioner(2));
  ops::EmbeddingLookup(root3, e3, ops::ConstInt32(root3, std::vector<int32_t>{1}), "hash");
  EXPECT_THAT(root3.status().message(), HasSubstr("partition_strategy"));
}

}  // namespace
}  // namespace tandem

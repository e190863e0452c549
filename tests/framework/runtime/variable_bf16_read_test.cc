// ReadVariablesAsBfloat16 (remapper.h), _ReadVariableAsBfloat16 and the bfloat16 copy
// a Var keeps (resource_mgr.h): which Cast(ReadVariableOp) pairs the pass rewrites, and
// that the fused read equals bfloat16(the variable's value) bit for bit after every
// kind of write: the first read, the optimizers' updates (which write the copy), an
// assignment and an in-place AssignAdd (which leave it stale).
#include <string>
#include <vector>

#include "framework/graph/graph.h"
#include "framework/kernels/resource_mgr.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/standard_ops.h"
#include "framework/ops/state_ops.h"
#include "framework/ops/training_ops.h"
#include "framework/runtime/prepare_graph.h"
#include "framework/runtime/remapper.h"
#include "framework/runtime/session.h"
#include "gtest/gtest.h"
#include "tests/util/def_of.h"
#include "tests/util/ramp.h"

namespace tandem {
namespace {

using ::tandem::testing::DefOf;
using ::tandem::testing::Ramp;

// w (float32 [64, 33]) and "out" = Identity(Cast(ReadVariableOp(w), bfloat16)), plus
// "value" = ReadVariableOp(w) to fetch the float32 value, and the writes.
struct Net {
  Scope root = Scope::NewRootScope();
  Output w, read, cast, out, value;
  Node* init = nullptr;
  Node* adam = nullptr;
  Node* momentum = nullptr;
  Output assign, assign_add;

  explicit Net(const std::string& read_device = "", const std::string& cast_device = "") {
    ops::EnsureStandardOps();
    const TensorShape shape({64, 33});
    w = ops::VarHandleOp(root.WithOpName("w"), DType::kFloat, PartialShape({64, 33}));
    init = ops::AssignVariableOp(root.WithOpName("init"), w,
                                 ops::Const(root, Ramp(shape, 0.37f, -5.0f)))
               .node;
    read = ops::ReadVariableOp(root.WithOpName("read").WithDevice(read_device), w, DType::kFloat);
    cast = ops::Cast(root.WithOpName("cast").WithDevice(cast_device), read, DType::kBFloat16);
    out = ops::Identity(root.WithOpName("out"), cast);
    value = ops::ReadVariableOp(root.WithOpName("value"), w, DType::kFloat);
    // Adam's slots and a momentum accumulator, each a variable of w's shape.
    std::vector<Output> slots;
    for (const char* name : {"m", "v", "accum"}) {
      Output slot = ops::VarHandleOp(root.WithOpName(name), DType::kFloat, PartialShape({64, 33}));
      ops::AssignVariableOp(root.WithOpName(std::string(name) + "_init"), slot,
                            ops::Const(root, Tensor::Filled(DType::kFloat, shape, 0.0)));
      slots.push_back(slot);
    }
    auto scalar = [&](float v) { return ops::Const(root, Tensor::Scalar<float>(v)); };
    Output grad = ops::Const(root, Ramp(shape, 0.11f, -1.7f));
    adam = ops::ResourceApplyAdam(root.WithOpName("adam"), w, slots[0], slots[1], scalar(0.9f),
                                  scalar(0.999f), scalar(0.01f), scalar(0.9f), scalar(0.999f),
                                  scalar(1e-7f), grad);
    momentum = ops::ResourceApplyMomentum(root.WithOpName("momentum"), w, slots[2], scalar(0.05f),
                                          grad, scalar(0.9f));
    assign = ops::AssignVariableOp(root.WithOpName("assign"), w,
                                   ops::Const(root, Ramp(shape, -0.23f, 3.0f)));
    assign_add = ops::AssignAddVariableOp(root.WithOpName("assign_add"), w,
                                          ops::Const(root, Ramp(shape, 0.013f, 0.5f)));
  }
};

const proto::NodeDef* Find(const proto::GraphDef& def, const std::string& name) {
  for (const auto& n : def.node()) {
    if (n.name() == name) return &n;
  }
  return nullptr;
}

TEST(ReadVariablesAsBfloat16Test, ReplacesTheCastOfARead) {
  Net net;
  RemapReport report;
  auto out = ReadVariablesAsBfloat16(DefOf(net.root), OpRegistry::Global(), &report);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(report.variables_read_as_bfloat16, 1);
  const proto::NodeDef* fused = Find(*out, "cast/from_variable");
  ASSERT_NE(fused, nullptr);
  EXPECT_EQ(fused->op(), "_ReadVariableAsBfloat16");
  ASSERT_EQ(fused->input_size(), 1);
  EXPECT_EQ(fused->input(0), "w");
  // The cast's reader reads the fused node; the pair stays, fetchable by name.
  ASSERT_NE(Find(*out, "out"), nullptr);
  EXPECT_EQ(Find(*out, "out")->input(0), "cast/from_variable");
  EXPECT_NE(Find(*out, "cast"), nullptr);
  EXPECT_NE(Find(*out, "read"), nullptr);
}

TEST(ReadVariablesAsBfloat16Test, LeavesReadsOrderedBeforeAWriteOrOnAnotherDevice) {
  {
    // An assignment ordered after the read: the fused read could run after it.
    Net net;
    ops::AssignVariableOp(net.root.WithOpName("after").WithControlDependencies({net.read}), net.w,
                          net.value);
    RemapReport report;
    auto out = ReadVariablesAsBfloat16(DefOf(net.root), OpRegistry::Global(), &report);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(report.variables_read_as_bfloat16, 0);
  }
  {
    Net net("/job:ps/task:0", "/job:worker/task:0");
    RemapReport report;
    auto out = ReadVariablesAsBfloat16(DefOf(net.root), OpRegistry::Global(), &report);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(report.variables_read_as_bfloat16, 0);
  }
  {
    // A session with a GPU keeps its variables there: PrepareGraph leaves the pair.
    Net net;
    auto out = PrepareGraph(DefOf(net.root), Precision::kFloat32, /*variables_on_cpu=*/false);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(Find(*out, "cast/from_variable"), nullptr);
    auto cpu = PrepareGraph(DefOf(net.root), Precision::kFloat32);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    EXPECT_NE(Find(*cpu, "cast/from_variable"), nullptr);
  }
}

// Fetches "out" (the fused read) and "value", and checks out == bfloat16(value) bit
// for bit.
void ExpectCopyOfValue(Session* session, const std::string& after) {
  SCOPED_TRACE(after);
  auto got = session->Run({}, {"out:0", "value:0"});
  ASSERT_TRUE(got.ok()) << got.status();
  const Tensor &out = (*got)[0], &value = (*got)[1];
  ASSERT_EQ(out.dtype(), DType::kBFloat16);
  ASSERT_EQ(out.shape(), value.shape());
  for (int64_t i = 0; i < value.NumElements(); ++i) {
    const bfloat16 want(value.data<float>()[i]);
    ASSERT_EQ(out.data<bfloat16>()[i].bits, want.bits) << "element " << i;
  }
}

TEST(ReadVariableAsBfloat16Test, EqualsTheCastOfTheValueAfterEveryWrite) {
  Net net;
  auto session = NewDirectSession(DefOf(net.root), SessionOptions{});
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Run({}, {}, {"init", "m_init", "v_init", "accum_init"}).ok());
  ExpectCopyOfValue(session->get(), "the first read");
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE((*session)->Run({}, {}, {"adam"}).ok());
    ExpectCopyOfValue(session->get(), "Adam");
  }
  // An update while a fetched copy is still held: the update writes a new buffer.
  auto held = (*session)->Run({}, {"out:0"});
  ASSERT_TRUE(held.ok()) << held.status();
  const std::vector<uint16_t> before = [&] {
    std::vector<uint16_t> bits;
    for (int64_t i = 0; i < (*held)[0].NumElements(); ++i)
      bits.push_back((*held)[0].data<bfloat16>()[i].bits);
    return bits;
  }();
  ASSERT_TRUE((*session)->Run({}, {}, {"momentum"}).ok());
  ExpectCopyOfValue(session->get(), "Momentum");
  for (int64_t i = 0; i < (*held)[0].NumElements(); ++i) {
    ASSERT_EQ((*held)[0].data<bfloat16>()[i].bits, before[i]) << "the held copy changed";
  }
  ASSERT_TRUE((*session)->Run({}, {}, {"assign_add"}).ok());
  ExpectCopyOfValue(session->get(), "AssignAdd (in place)");
  ASSERT_TRUE((*session)->Run({}, {}, {"adam"}).ok());
  ExpectCopyOfValue(session->get(), "Adam after AssignAdd");
  ASSERT_TRUE((*session)->Run({}, {}, {"assign"}).ok());
  ExpectCopyOfValue(session->get(), "Assign");
}

TEST(VarBf16CopyTest, AnyWriteButTheMarkedOneLeavesItStale) {
  Var var(DType::kFloat);
  absl::MutexLock lock(var.mu());
  var.Assign(Ramp(TensorShape({5}), 0.5f, 0.0f));
  EXPECT_FALSE(var.Bf16CopyWanted());
  var.RequestBf16Copy();
  EXPECT_TRUE(var.Bf16CopyWanted());
  EXPECT_EQ(var.CurrentBf16Copy(), nullptr);
  Tensor* copy = var.MutableBf16Copy();
  EXPECT_EQ(copy->shape(), TensorShape({5}));
  var.MarkBf16CopyCurrent();
  ASSERT_NE(var.CurrentBf16Copy(), nullptr);
  const Tensor snapshot = *var.CurrentBf16Copy();
  var.MutableValue();
  EXPECT_EQ(var.CurrentBf16Copy(), nullptr);
  // A snapshot of the copy keeps its buffer: the next copy gets another.
  EXPECT_NE(var.MutableBf16Copy()->raw_data(), snapshot.raw_data());
  var.MarkBf16CopyCurrent();
  var.Assign(Ramp(TensorShape({2, 3}), 1.0f, 0.0f));
  EXPECT_EQ(var.CurrentBf16Copy(), nullptr);
  EXPECT_EQ(var.MutableBf16Copy()->shape(), TensorShape({2, 3}));
}

}  // namespace
}  // namespace tandem

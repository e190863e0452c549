// Scaffold::Finalize: the default init ops, readiness check and saver it adds, the
// ops it looks up by name, idempotence, and graphs without variables.
#include "hooks/scaffold.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/hooks/hooks_test_util.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using testing_util::TempDir;
using testing_util::TrainGraph;

std::unique_ptr<Session> NewSession(Graph* graph) {
  proto::GraphDef def;
  graph->ToGraphDef(&def);
  absl::StatusOr<std::unique_ptr<Session>> s = NewDirectSession(def);
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(s).value();
}

TEST(ScaffoldTest, FinalizeAddsInitOpsReadinessAndSaver) {
  TrainGraph g;
  ops::Variable local(g.root, "local_count", ops::Const(g.root, 7.0f),
                      ops::VariableOptions{.trainable = false, .local = true});
  Scaffold scaffold;
  EXPECT_FALSE(scaffold.finalized());
  ASSERT_TRUE(scaffold.Finalize(g.graph()).ok());
  EXPECT_TRUE(scaffold.finalized());
  ASSERT_NE(g.graph()->FindNode(scaffold.init_op()), nullptr);
  ASSERT_NE(g.graph()->FindNode(scaffold.local_init_op()), nullptr);
  EXPECT_NE(scaffold.init_op(), scaffold.local_init_op());
  EXPECT_THAT(scaffold.ready_variable_names(), ElementsAre("w", "global_step"));
  EXPECT_EQ(scaffold.ready_tensors().size(), 2u);
  ASSERT_NE(scaffold.saver(), nullptr);
  EXPECT_THAT(scaffold.saver()->VariableNames(), UnorderedElementsAre("w", "global_step"));

  std::unique_ptr<Session> session = NewSession(g.graph());
  absl::StatusOr<std::vector<std::string>> missing = scaffold.UninitializedVariables(session.get());
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_THAT(*missing, ElementsAre("w", "global_step"));

  // The global init op leaves local variables alone; the local one initialises them.
  ASSERT_TRUE(session->Run({}, {}, {scaffold.init_op()}).ok());
  missing = scaffold.UninitializedVariables(session.get());
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_THAT(*missing, IsEmpty());
  EXPECT_FALSE(session->Run({}, {local.value().name()}).ok());
  ASSERT_TRUE(session->Run({}, {}, {scaffold.local_init_op()}).ok());
  absl::StatusOr<std::vector<Tensor>> v = session->Run({}, {local.value().name()});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)[0].scalar<float>(), 7.0f);
}

TEST(ScaffoldTest, FinalizeIsIdempotentAndBoundToOneGraph) {
  TrainGraph g;
  Scaffold scaffold;
  ASSERT_TRUE(scaffold.Finalize(g.graph()).ok());
  const int nodes = g.graph()->num_nodes();
  const std::string init = scaffold.init_op();
  ASSERT_TRUE(scaffold.Finalize(g.graph()).ok());
  EXPECT_EQ(g.graph()->num_nodes(), nodes);
  EXPECT_EQ(scaffold.init_op(), init);

  TrainGraph other;
  absl::Status s = scaffold.Finalize(other.graph());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ScaffoldTest, GivenOpsAreLookedUpByName) {
  TrainGraph g;
  Node* my_init = ops::NoOp(g.root.WithOpName("my_init"));
  ASSERT_NE(my_init, nullptr);
  Scaffold scaffold(ScaffoldOptions{.init_op = "my_init", .local_init_op = "my_init"});
  ASSERT_TRUE(scaffold.Finalize(g.graph()).ok());
  EXPECT_EQ(scaffold.init_op(), "my_init");
  EXPECT_EQ(scaffold.local_init_op(), "my_init");

  TrainGraph g2;
  Scaffold bad(ScaffoldOptions{.init_op = "no_such_op"});
  absl::Status s = bad.Finalize(g2.graph());
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("no_such_op"));
  EXPECT_FALSE(bad.finalized());
}

TEST(ScaffoldTest, UninitializedVariablesNeedsFinalize) {
  TrainGraph g;
  Scaffold scaffold;
  std::unique_ptr<Session> session = NewSession(g.graph());
  EXPECT_EQ(scaffold.UninitializedVariables(session.get()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ScaffoldTest, GraphWithoutVariablesWorks) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DType::kFloat, PartialShape({}));
  ops::Mul(root.WithOpName("y"), x, x);
  ASSERT_TRUE(root.ok()) << root.status();
  Scaffold scaffold;
  ASSERT_TRUE(scaffold.Finalize(root.graph()).ok());
  EXPECT_THAT(scaffold.ready_tensors(), IsEmpty());
  // The saver exists and saves an empty checkpoint.
  ASSERT_NE(scaffold.saver(), nullptr);
  std::unique_ptr<Session> session = NewSession(root.graph());
  absl::StatusOr<std::vector<std::string>> missing = scaffold.UninitializedVariables(session.get());
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_THAT(*missing, IsEmpty());
  ASSERT_TRUE(session->Run({}, {}, {scaffold.init_op()}).ok());
  TempDir dir;
  absl::StatusOr<std::string> prefix = scaffold.saver()->Save(session.get(), dir.path(), 0);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  EXPECT_TRUE(scaffold.saver()->Restore(session.get(), *prefix).ok());
}

}  // namespace
}  // namespace tandem

// The strategy objects Estimator::Train runs through: which one an Estimator's options
// choose, and what each says about recovery, signals, placement and session options.
#include "estimator/internal/training_strategy.h"

#include <memory>
#include <string>

#include "estimator/run_config.h"
#include "framework/graph/scope.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/optimizer.h"
#include "framework/ops/optimizers.h"
#include "gtest/gtest.h"

namespace tandem::internal {
namespace {

EstimatorOptions OnCluster(const std::string& tf_config_json) {
  absl::StatusOr<TfConfig> tf = ParseTfConfig(tf_config_json);
  EXPECT_TRUE(tf.ok()) << tf.status();
  RunConfigOptions ro;
  ro.model_dir = "/tmp/unused";
  absl::StatusOr<RunConfig> config = RunConfig::Create(ro, *tf);
  EXPECT_TRUE(config.ok()) << config.status();
  EstimatorOptions o;
  o.config = *config;
  return o;
}

constexpr char kPsCluster[] =
    R"({"cluster": {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"], "ps": ["127.0.0.1:3"]},
        "task": {"type": "worker", "index": 0}})";
constexpr char kWorkersOnly[] =
    R"({"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]},
        "task": {"type": "worker", "index": 1}})";

TEST(TrainingStrategyTest, ChosenOnceFromTheOptions) {
  EstimatorOptions local;  // No cluster: local whatever else is set.
  local.collective = CollectiveSettings{};
  local.strategy = Strategy::kParameterServer;
  EXPECT_EQ(ChooseStrategy(local), Strategy::kLocal);

  EstimatorOptions ps = OnCluster(kPsCluster);
  EXPECT_EQ(ChooseStrategy(ps), Strategy::kParameterServer);
  EstimatorOptions collective = OnCluster(kWorkersOnly);
  collective.collective = CollectiveSettings{};
  EXPECT_EQ(ChooseStrategy(collective), Strategy::kCollective);
  collective.collective.reset();
  collective.strategy = Strategy::kCollective;  // Named, with the default settings.
  EXPECT_EQ(ChooseStrategy(collective), Strategy::kCollective);
}

TEST(TrainingStrategyTest, EachSaysWhatItChanges) {
  EstimatorOptions ps_options = OnCluster(kPsCluster);
  StrategyEnv env;
  env.options = &ps_options;
  std::unique_ptr<TrainingStrategy> ps = MakeTrainingStrategy(Strategy::kParameterServer, env);
  EXPECT_EQ(ps->kind(), Strategy::kParameterServer);
  EXPECT_TRUE(ps->RecoversLostTasks());
  EXPECT_TRUE(ps->StopsAtSignal());
  MonitoredTrainingSessionOptions mts;
  ps->Configure(mts);
  EXPECT_EQ(mts.session_options.target, ps_options.config.master());
  EXPECT_FALSE(mts.session_options.target.empty());
  EXPECT_TRUE(mts.keep_ready_variables);
  EXPECT_TRUE(mts.hooks.empty());  // Asynchronous: no SyncReplicasHook.
  // Variables go to the ps task.
  Scope root = Scope::NewRootScope();
  absl::StatusOr<Scope> placed = ps->Place(root);
  ASSERT_TRUE(placed.ok()) << placed.status();
  ops::Variable step = ops::GetOrCreateGlobalStep(*placed);
  ASSERT_TRUE(step.valid()) << placed->status();
  EXPECT_EQ(step.handle().node->requested_device().rfind("/job:ps/", 0), 0u)
      << step.handle().node->requested_device();

  EstimatorOptions c_options = OnCluster(kWorkersOnly);
  env.options = &c_options;
  std::unique_ptr<TrainingStrategy> collective = MakeTrainingStrategy(Strategy::kCollective, env);
  EXPECT_EQ(collective->kind(), Strategy::kCollective);
  EXPECT_TRUE(collective->RecoversLostTasks());
  EXPECT_FALSE(collective->StopsAtSignal());  // The replicas agree a last step.

  EstimatorOptions l_options;
  env.options = &l_options;
  std::unique_ptr<TrainingStrategy> local = MakeTrainingStrategy(Strategy::kLocal, env);
  EXPECT_EQ(local->kind(), Strategy::kLocal);
  EXPECT_FALSE(local->RecoversLostTasks());
  EXPECT_TRUE(local->StopsAtSignal());
  MonitoredTrainingSessionOptions lmts;
  local->Configure(lmts);
  EXPECT_TRUE(lmts.session_options.target.empty());
  EXPECT_FALSE(lmts.keep_ready_variables);
  EXPECT_TRUE(local->AfterClose(5).ok());
}

TEST(TrainingStrategyTest, HybridKeepsTablesOnThePsAndMirrorsTheRest) {
  EstimatorOptions options = OnCluster(kPsCluster);
  StrategyEnv env;
  env.options = &options;
  std::unique_ptr<TrainingStrategy> hybrid = MakeTrainingStrategy(Strategy::kHybrid, env);
  EXPECT_EQ(hybrid->kind(), Strategy::kHybrid);
  EXPECT_TRUE(hybrid->RecoversLostTasks());
  EXPECT_FALSE(hybrid->StopsAtSignal());  // The replicas agree a last step.
  Scope root = Scope::NewRootScope();
  absl::StatusOr<Scope> placed = hybrid->Place(root);
  ASSERT_TRUE(placed.ok()) << placed.status();
  ops::Variable step = ops::GetOrCreateGlobalStep(*placed);
  ops::Variable dense(*placed, "dense", ops::Const(*placed, Tensor::Scalar<float>(1)));
  ops::VariableOptions table_options;
  table_options.table = true;
  ops::Variable table(*placed, "table",
                      ops::Const(*placed, Tensor(DType::kFloat, TensorShape({4, 2}))),
                      table_options);
  ASSERT_TRUE(placed->ok()) << placed->status();
  const std::string worker = options.config.task_device_name();
  EXPECT_EQ(step.handle().node->requested_device(), worker);
  EXPECT_EQ(dense.handle().node->requested_device(), worker);
  EXPECT_EQ(table.handle().node->requested_device().rfind("/job:ps/", 0), 0u)
      << table.handle().node->requested_device();
  EXPECT_TRUE(ops::IsTableHandle(*table.handle().node));
  EXPECT_FALSE(ops::IsTableHandle(*dense.handle().node));
  // An optimizer's slots of a table are tables, beside it; those of a dense variable
  // are not, and Adam's beta powers go with the dense variable although "table" sorts
  // first by name (TensorFlow's rule), so every replica keeps its own.
  Output loss = ops::Add(*placed, ops::ReduceSumAll(*placed, table.value()),
                         ops::Mul(*placed, dense.value(), dense.value()));
  ops::AdamOptimizer adam(0.1f);
  ASSERT_TRUE(adam.Minimize(*placed, loss).ok()) << placed->status();
  Graph* g = root.graph();
  auto is_table = [g](const std::string& name) {
    const Node* n = g->FindNode(name);
    EXPECT_NE(n, nullptr) << name;
    return n != nullptr && ops::IsTableHandle(*n);
  };
  EXPECT_TRUE(is_table("table/Adam"));
  EXPECT_TRUE(is_table("table/Adam_1"));
  EXPECT_FALSE(is_table("dense/Adam"));
  EXPECT_FALSE(is_table("beta1_power"));
  EXPECT_EQ(GetAttrOr<std::vector<std::string>>(g->FindNode("beta1_power")->attrs(), "_class", {}),
            std::vector<std::string>{"loc:@dense"});
}

TEST(TrainingStrategyTest, NamesAreTheConfigValues) {
  EXPECT_EQ(StrategyName(Strategy::kLocal), "local");
  EXPECT_EQ(StrategyName(Strategy::kParameterServer), "parameter_server");
  EXPECT_EQ(StrategyName(Strategy::kCollective), "collective");
  EXPECT_EQ(StrategyName(Strategy::kHybrid), "hybrid");
}

}  // namespace
}  // namespace tandem::internal

// The strategy objects Estimator::Train runs through: which one an Estimator's options
// choose, and what each says about recovery, signals, placement and session options.
#include "estimator/internal/training_strategy.h"

#include <memory>
#include <string>

#include "estimator/run_config.h"
#include "framework/graph/scope.h"
#include "framework/ops/optimizer.h"
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

TEST(TrainingStrategyTest, NamesAreTheConfigValues) {
  EXPECT_EQ(StrategyName(Strategy::kLocal), "local");
  EXPECT_EQ(StrategyName(Strategy::kParameterServer), "parameter_server");
  EXPECT_EQ(StrategyName(Strategy::kCollective), "collective");
}

}  // namespace
}  // namespace tandem::internal

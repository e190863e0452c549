// estimator/internal/training_strategy.h
//
// TrainingStrategy: what one Strategy (estimator/strategy.h) changes in a run of
// Estimator::Train, asked for at fixed points of the run so that the run itself holds
// no strategy flag:
//
//   Place / EnableUpdates  where the TRAIN graph's nodes go (the ps strategy's replica
//                          device setter) and how its optimizers update (sync replicas'
//                          accumulators, the collective all-reduce);
//   SetUp                  what must exist before the session: this task's server, the
//                          collective group, the session factory, the watch of peers;
//   Configure              its hooks and MonitoredTrainingSession settings;
//   RecoversLostTasks      whether a lost task (a ps restarting) is waited for and the
//                          session re-created;
//   StopsAtSignal          whether SIGTERM stops this task before its next step, or the
//                          strategy's hook agrees a last step with the other replicas;
//   AfterClose             what the run returns when the strategy ended it.
//
// MakeTrainingStrategy builds the one of a Strategy value; a new strategy is one more
// value and one more class (a file beside ps_strategy.cc, collective_strategy.cc and
// hybrid_strategy.cc; the last two share ReplicaGroupStrategy).
//
// Thread safety: used by one Train call at a time.
#ifndef TANDEM_ESTIMATOR_INTERNAL_TRAINING_STRATEGY_H_
#define TANDEM_ESTIMATOR_INTERNAL_TRAINING_STRATEGY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "estimator/estimator.h"
#include "estimator/internal/mode_graph.h"
#include "estimator/strategy.h"
#include "framework/graph/scope.h"
#include "hooks/monitored_session.h"

namespace tandem {

class PeerWatch;
class Server;

namespace internal {

// How long creating a session on a cluster waits for its tasks to answer.
inline constexpr int64_t kWaitForClusterMs = 300000;

// Options of a session in this process, or (`cluster_master`) of one to this task's
// master that sees the devices the RunConfig's filters name and waits for the cluster.
SessionOptions SessionOptionsFor(const RunConfig& config, bool cluster_master);

// What a strategy may use of the Estimator and of the Train call it serves.
struct StrategyEnv {
  const EstimatorOptions* options = nullptr;  // Not owned.
  // This task's server, started at the first call and kept by the Estimator.
  std::function<absl::StatusOr<Server*>()> server;
  // True once the checkpoint at max_steps exists (training ended on another task);
  // empty when the Train call has no max_steps.
  std::function<bool()> finished_elsewhere;
  std::string input_pipeline;  // "input pipeline 0 of 2", for the log.
};

class TrainingStrategy {
 public:
  explicit TrainingStrategy(StrategyEnv env) : env_(std::move(env)) {}
  virtual ~TrainingStrategy() = default;

  virtual Strategy kind() const = 0;
  // The scope the TRAIN graph is built under.
  virtual absl::StatusOr<Scope> Place(const Scope& root) const { return root; }
  // Marks the graph so that its optimizers update as the strategy does.
  virtual void EnableUpdates(const Scope& root) const {}
  // Starts what the session needs; may replace `*factory` (the session factory of
  // the EstimatorOptions, possibly empty). `g` is the built TRAIN graph.
  virtual absl::Status SetUp(ModeGraph& g, SessionFactory* factory) { return absl::OkStatus(); }
  // Adds the strategy's hooks and sets its session options.
  virtual void Configure(MonitoredTrainingSessionOptions& mts) const;
  virtual bool RecoversLostTasks() const { return false; }
  virtual bool StopsAtSignal() const { return true; }
  // After the session closed at `global_step`: an error to return instead of it.
  virtual absl::Status AfterClose(int64_t global_step) const { return absl::OkStatus(); }

 protected:
  const RunConfig& config() const { return env_.options->config; }
  const StrategyEnv env_;
};

// What the cluster strategies share (ps_strategy.cc):
//
// `base`, waiting for the cluster's tasks in slices: between them, once `over()` says
// training ended elsewhere (a task thawed or restarted after the chief saved the final
// checkpoint and shut the ps tasks down), the wait ends UNAVAILABLE saying so, and the
// caller's max_steps check ends training.
SessionFactory WaitingInSlices(SessionFactory base, std::function<bool()> over);
// `factory` (GrpcSessions to this task's master when empty), waiting in slices when
// the Train call has max_steps.
SessionFactory ClusterSessionFactory(const StrategyEnv& env, SessionFactory factory);
// Names the tasks a training task of a ps cluster waits on when they stop answering:
// the ps tasks, and the chief (a worker) or the workers (the chief).
std::unique_ptr<PeerWatch> WatchPeers(const RunConfig& config, const TransportSecurity& security);

// The strategy of `kind` (kLocal for any Estimator not on a cluster).
std::unique_ptr<TrainingStrategy> MakeTrainingStrategy(Strategy kind, StrategyEnv env);
std::unique_ptr<TrainingStrategy> NewParameterServerStrategy(StrategyEnv env);
std::unique_ptr<TrainingStrategy> NewCollectiveStrategy(StrategyEnv env);
std::unique_ptr<TrainingStrategy> NewHybridStrategy(StrategyEnv env);

// The Strategy an Estimator with `options` trains with: kLocal off a cluster, else
// options.strategy, else kCollective when options.collective is set and
// kParameterServer otherwise.
Strategy ChooseStrategy(const EstimatorOptions& options);

}  // namespace internal
}  // namespace tandem

#endif  // TANDEM_ESTIMATOR_INTERNAL_TRAINING_STRATEGY_H_

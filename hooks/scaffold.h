// hooks/scaffold.h
//
// Scaffold (tf.train.Scaffold): the pieces a monitored session needs to create a ready
// session for a graph: the op that initialises global variables, the op that
// initialises local variables (metrics), the readiness check, and the Saver. Anything
// not given is created by Finalize(graph) from the graph's collections:
//
//   init_op        a NoOp on every global variable's initializer
//   local_init_op  a NoOp on every local variable's initializer
//   ready tensors  one VarIsInitializedOp per global variable ("is it initialised?")
//   saver          checkpoint::Saver::Create(graph, saver_options)
//
// Finalize must run before the graph is turned into a session (session creators call
// it); it is idempotent. After it, the accessors are valid.
//
// Thread safety: Finalize is called once from one thread; afterwards read-only.
#ifndef TANDEM_HOOKS_SCAFFOLD_H_
#define TANDEM_HOOKS_SCAFFOLD_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "checkpoint/saver.h"
#include "framework/graph/graph.h"
#include "framework/runtime/session.h"

namespace tandem {

struct ScaffoldOptions {
  std::string init_op;        // Node name; "" = GlobalVariablesInitializer.
  FeedMap init_feed;          // Fed when init_op runs.
  std::string local_init_op;  // Node name; "" = LocalVariablesInitializer.
  // Runs after init_op when variables were initialised (not restored), e.g. warm start.
  std::function<absl::Status(Session*)> init_fn;
  checkpoint::SaverOptions saver_options;
};

class Scaffold {
 public:
  explicit Scaffold(ScaffoldOptions options = {});
  Scaffold(const Scaffold&) = delete;
  Scaffold& operator=(const Scaffold&) = delete;

  // Adds the missing ops and the saver to `graph` (not owned). Idempotent for the same
  // graph; FAILED_PRECONDITION for another graph.
  absl::Status Finalize(Graph* graph);
  bool finalized() const { return graph_ != nullptr; }

  const std::string& init_op() const { return init_op_; }
  const FeedMap& init_feed() const { return options_.init_feed; }
  const std::string& local_init_op() const { return local_init_op_; }
  const std::function<absl::Status(Session*)>& init_fn() const { return options_.init_fn; }
  // Bool scalar tensors, one per global variable, and the variables' names.
  const std::vector<std::string>& ready_tensors() const { return ready_tensors_; }
  const std::vector<std::string>& ready_variable_names() const { return ready_names_; }
  checkpoint::Saver* saver() const { return saver_.get(); }

  // Names of the global variables `session` has not initialised yet (empty: ready).
  absl::StatusOr<std::vector<std::string>> UninitializedVariables(Session* session) const;

 private:
  ScaffoldOptions options_;
  Graph* graph_ = nullptr;  // Not owned; set by Finalize.
  std::string init_op_;
  std::string local_init_op_;
  std::vector<std::string> ready_tensors_;
  std::vector<std::string> ready_names_;
  std::unique_ptr<checkpoint::Saver> saver_;
};

}  // namespace tandem

#endif  // TANDEM_HOOKS_SCAFFOLD_H_

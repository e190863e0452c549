// tests/serving/tiny_export.h
//
// A tiny model to export in tests: input "x" [batch, 3] float32, logits = x W + b with
// W[i][j] = scale * (i + 1) * (j + 1 - 1.5) and b = (0.1, -0.1); outputs
// "probabilities" (softmax of the logits) and "classes" (argmax, int64). TinyLogits
// computes the same in plain C++ for the tests to compare against.
#ifndef TANDEM_TESTS_SERVING_TINY_EXPORT_H_
#define TANDEM_TESTS_SERVING_TINY_EXPORT_H_

#include <array>
#include <cmath>
#include <string>

#include "absl/status/statusor.h"
#include "checkpoint/saver.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/nn_ops.h"
#include "framework/ops/state_ops.h"
#include "serving/export_writer.h"

namespace tandem::serving::testing {

inline float TinyWeight(float scale, int i, int j) { return scale * (i + 1) * (j - 0.5f); }

inline std::array<float, 2> TinyLogits(float scale, const float x[3]) {
  std::array<float, 2> logits = {0.1f, -0.1f};
  for (int j = 0; j < 2; ++j) {
    for (int i = 0; i < 3; ++i) logits[j] += x[i] * TinyWeight(scale, i, j);
  }
  return logits;
}

struct TinyGraph {
  Scope root = Scope::NewRootScope();
  Output x;
  Output probabilities;
  Output classes;
  Node* init = nullptr;
};

inline void BuildTiny(float scale, int64_t step, TinyGraph* g) {
  Tensor w(DType::kFloat, TensorShape({3, 2}));
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 2; ++j) w.data<float>()[i * 2 + j] = TinyWeight(scale, i, j);
  }
  ops::Variable step_var(g->root, "global_step", ops::Const(g->root, Tensor::Scalar<int64_t>(step)),
                         {.trainable = false});
  Scope dense = g->root.NewSubScope("dense");
  ops::Variable kernel(dense, "kernel", ops::Const(dense, w));
  ops::Variable bias(dense, "bias", ops::Const(dense, {0.1f, -0.1f}, TensorShape({2})));
  g->x = ops::Placeholder(g->root.WithOpName("input/x"), DType::kFloat, PartialShape({-1, 3}));
  Output logits = ops::BiasAdd(g->root, ops::MatMul(g->root, g->x, kernel.value()), bias.value());
  g->probabilities = ops::Softmax(g->root, logits);
  g->classes = ops::ArgMax(g->root, logits, 1);
  g->init = ops::GlobalVariablesInitializer(g->root);
}

// Writes a checkpoint of the tiny model (step `step`) under `model_dir` and exports it
// to `export_base`; returns the version directory.
inline absl::StatusOr<std::string> ExportTinyModel(const std::string& model_dir,
                                                   const std::string& export_base, float scale,
                                                   int64_t step = 7) {
  std::string prefix;
  {
    TinyGraph g;
    BuildTiny(scale, step, &g);
    TANDEM_ASSIGN_OR_RETURN(auto saver, checkpoint::Saver::Create(g.root.graph()));
    TANDEM_RETURN_IF_ERROR(g.root.status());
    proto::GraphDef def;
    g.root.graph()->ToGraphDef(&def);
    TANDEM_ASSIGN_OR_RETURN(auto session, NewDirectSession(def));
    TANDEM_RETURN_IF_ERROR(session->Run({}, {}, {g.init->name()}).status());
    TANDEM_ASSIGN_OR_RETURN(prefix, saver->Save(session.get(), model_dir, step));
  }
  TinyGraph g;  // Initial values of zero: the export must take the checkpoint's.
  BuildTiny(0.0f, 0, &g);
  TANDEM_RETURN_IF_ERROR(g.root.status());
  ExportGraphOptions o;
  o.model_name = "tiny";
  o.inputs = {{"x", g.x}};
  o.outputs = {{"probabilities", g.probabilities}, {"classes", g.classes}};
  o.checkpoint_prefix = prefix;
  return ExportGraph(g.root.graph(), o, export_base);
}

}  // namespace tandem::serving::testing

#endif  // TANDEM_TESTS_SERVING_TINY_EXPORT_H_

// Gradient-check cases for the resource-variable ops (gradients with respect to
// variable handles flow through reads and gathers), the embedding bag's combine and the
// partitioned lookup's stitch.
#include "framework/ops/array_ops.h"
#include "framework/ops/embedding_ops.h"
#include "framework/ops/feature_ops.h"
#include "framework/ops/state_ops.h"
#include "tests/framework/ops/gradient_check.h"

namespace tandem::testing {

std::vector<GradCheckCase> StateGradCheckCases() {
  std::vector<GradCheckCase> cases;
  {
    GradCheckCase c;
    c.op = "ReadVariableOp";
    c.label = "read";
    c.inputs = {RandomTensor({2, 3}, 1)};
    c.as_variables = true;
    c.build = [](const Scope& s, const std::vector<Output>& xs) {
      return ops::ReadVariableOp(s, xs[0], DType::kFloat);
    };
    cases.push_back(c);
  }
  {
    GradCheckCase c;
    c.op = "ResourceGather";
    c.label = "repeated_rows";
    c.inputs = {RandomTensor({4, 3}, 2)};
    c.as_variables = true;
    c.build = [](const Scope& s, const std::vector<Output>& xs) {
      return ops::ResourceGather(s, xs[0], ops::ConstInt32(s, std::vector<int32_t>{2, 0, 2}),
                                 DType::kFloat);
    };
    cases.push_back(c);
  }
  {
    // The embedding bag's rows: three distinct ids (0, 2, 1) over two rows of a batch,
    // one repeated, weighted and combined by mean.
    GradCheckCase c;
    c.op = "BagCombine";
    c.label = "weighted_mean";
    c.inputs = {RandomTensor({3, 2}, 3)};
    c.build = [](const Scope& s, const std::vector<Output>& xs) {
      Output ids = ops::ConstInt64(s, {0, 2, -1, 1, 1, 0});
      ids = ops::Reshape(s, ids, std::vector<int64_t>{2, 3});
      Output w = ops::Const(s, Tensor::FromVector<float>({1, .5f, 2, 1, 3, .25f}, {2, 3}));
      return ops::BagCombine(s, xs[0], ops::PrepareBag(s, ids, w, ops::Combiner::kMean));
    };
    cases.push_back(c);
  }
  {
    // Rows gathered from two parts of a table put back in the ids' order: part 0's rows
    // go to positions 2 and 0, part 1's to position 1.
    GradCheckCase c;
    c.op = "StitchRows";
    c.label = "two_parts";
    c.inputs = {RandomTensor({2, 3}, 4), RandomTensor({1, 3}, 5)};
    c.build = [](const Scope& s, const std::vector<Output>& xs) {
      return ops::StitchRows(s, {ops::ConstInt32(s, std::vector<int32_t>{2, 0}),
                                ops::ConstInt32(s, std::vector<int32_t>{1})},
                             {xs[0], xs[1]});
    };
    cases.push_back(c);
  }
  return cases;
}

}  // namespace tandem::testing

#include "framework/ops/layers.h"

#include <initializer_list>
#include <utility>

#include "absl/strings/str_cat.h"
#include "framework/ops/array_ops.h"
#include "framework/ops/math_ops.h"
#include "framework/ops/nn_ops.h"
#include "framework/ops/state_ops.h"

namespace tandem::ops {
namespace {

// A trainable variable of a fully known shape, initialised by `init`.
Variable MakeVariable(const Scope& scope, absl::string_view name, const TensorShape& shape,
                      DType dtype, const Initializer& init, bool trainable = true) {
  // Initial values, like the variable, ignore the caller's control dependencies.
  Output initial =
      init(scope.WithNoControlDependencies().NewSubScope(absl::StrCat(name, "/Initializer")), shape,
           dtype);
  VariableOptions options;
  options.trainable = trainable;
  return Variable(scope, name, initial, options);
}

// The known last dimension of x, or an error recorded in `scope` (-1).
int64_t KnownLastDim(const Scope& scope, Output x, absl::string_view layer) {
  if (!x.valid()) return -1;
  const PartialShape& s = x.shape();
  if (!s.known_rank() || s.rank() < 1 || s.dim(s.rank() - 1) < 0) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat(layer, ": the last dimension of the input must be known, input '", x.name(),
                     "' has shape ", s.DebugString())));
    return -1;
  }
  return s.dim(s.rank() - 1);
}

}  // namespace

Output Activate(const Scope& scope, Output x, Activation activation) {
  switch (activation) {
    case Activation::kNone:
      return x;
    case Activation::kRelu:
      return Relu(scope, x);
    case Activation::kRelu6:
      return Relu6(scope, x);
    case Activation::kElu:
      return Elu(scope, x);
    case Activation::kSigmoid:
      return Sigmoid(scope, x);
    case Activation::kTanh:
      return Tanh(scope, x);
    case Activation::kSoftplus:
      return Softplus(scope, x);
  }
  return x;
}

namespace {

// False (with the error recorded in `scope`) unless every size is >= 1: a layer's
// sizes come from configs, and a negative one must be an error, not a crash.
bool PositiveSizes(const Scope& scope, absl::string_view layer,
                   std::initializer_list<std::pair<const char*, int64_t>> sizes) {
  for (const auto& [what, n] : sizes) {
    if (n < 1) {
      scope.UpdateStatus(
          absl::InvalidArgumentError(absl::StrCat(layer, ": ", what, " must be >= 1, got ", n)));
      return false;
    }
  }
  return true;
}

}  // namespace

Output Dense(const Scope& scope, Output x, int64_t units, const DenseOptions& options) {
  if (!PositiveSizes(scope, "Dense", {{"units", units}})) return Output();
  int64_t in = KnownLastDim(scope, x, "Dense");
  if (in < 0) return Output();
  Scope s = scope.NewSubScope(options.name);
  Variable kernel =
      MakeVariable(s, "kernel", TensorShape({in, units}), x.dtype(), options.kernel_initializer);
  Output y = MatMul(s, x, kernel.value());
  if (options.use_bias) {
    Variable bias =
        MakeVariable(s, "bias", TensorShape({units}), x.dtype(), options.bias_initializer);
    y = BiasAdd(s, y, bias.value());
  }
  if (options.kernel_l2 > 0 && kernel.valid()) {
    Output reg = Mul(s, Const(s, options.kernel_l2), L2Loss(s, kernel.value()));
    if (reg.valid()) s.graph()->AddToCollection(kRegularizationLosses, reg.node->name());
  }
  return Activate(s, y, options.activation);
}

Output Conv2DLayer(const Scope& scope, Output x, int64_t filters,
                   std::array<int64_t, 2> kernel_size, const Conv2DLayerOptions& options) {
  if (!PositiveSizes(scope, "Conv2D layer",
                     {{"filters", filters},
                      {"kernel height", kernel_size[0]},
                      {"kernel width", kernel_size[1]}})) {
    return Output();
  }
  int64_t in = KnownLastDim(scope, x, "Conv2D layer");
  if (in < 0) return Output();
  Scope s = scope.NewSubScope(options.name);
  Variable kernel =
      MakeVariable(s, "kernel", TensorShape({kernel_size[0], kernel_size[1], in, filters}),
                   x.dtype(), options.kernel_initializer);
  Conv2DAttrs attrs;
  attrs.strides = {1, options.strides[0], options.strides[1], 1};
  attrs.padding = options.padding;
  attrs.dilations = {1, options.dilation_rate[0], options.dilation_rate[1], 1};
  Output y = Conv2D(s, x, kernel.value(), attrs);
  if (options.use_bias) {
    Variable bias =
        MakeVariable(s, "bias", TensorShape({filters}), x.dtype(), options.bias_initializer);
    y = BiasAdd(s, y, bias.value());
  }
  return Activate(s, y, options.activation);
}

namespace {
PoolAttrs MakePoolAttrs(std::array<int64_t, 2> pool, std::array<int64_t, 2> strides,
                        const std::string& padding) {
  PoolAttrs a;
  a.ksize = {1, pool[0], pool[1], 1};
  a.strides = {1, strides[0], strides[1], 1};
  a.padding = padding;
  return a;
}
}  // namespace

Output MaxPool2D(const Scope& scope, Output x, std::array<int64_t, 2> pool_size,
                 std::array<int64_t, 2> strides, const std::string& padding) {
  return MaxPool(scope.NewSubScope("max_pooling2d"), x, MakePoolAttrs(pool_size, strides, padding));
}

Output AvgPool2D(const Scope& scope, Output x, std::array<int64_t, 2> pool_size,
                 std::array<int64_t, 2> strides, const std::string& padding) {
  return AvgPool(scope.NewSubScope("average_pooling2d"), x,
                 MakePoolAttrs(pool_size, strides, padding));
}

Output Flatten(const Scope& scope, Output x) {
  if (!x.valid()) return Output();
  const PartialShape& s = x.shape();
  int64_t inner = 1;
  bool known = s.known_rank() && s.rank() >= 1;
  for (int i = 1; known && i < s.rank(); ++i) {
    if (s.dim(i) < 0) known = false;
    inner *= s.dim(i);
  }
  if (!known) {
    scope.UpdateStatus(
        absl::InvalidArgumentError(absl::StrCat("Flatten: non-batch dimensions of '", x.name(),
                                                "' must be known, shape is ", s.DebugString())));
    return Output();
  }
  return Reshape(scope.NewSubScope("flatten"), x, std::vector<int64_t>{-1, inner});
}

Output DropoutLayer(const Scope& scope, Output x, float rate, bool training, int64_t seed) {
  if (!training || rate <= 0) return x;
  std::vector<Output> out = Dropout(scope.NewSubScope("dropout"), x, rate, seed);
  return out.empty() ? Output() : out[0];
}

Output BatchNormalization(const Scope& scope, Output x, bool training,
                          const BatchNormOptions& options) {
  int64_t channels = KnownLastDim(scope, x, "BatchNormalization");
  if (channels < 0) return Output();
  Scope s = scope.NewSubScope(options.name);
  TensorShape c({channels});
  DType dt = x.dtype();
  Variable gamma = MakeVariable(s, "gamma", c, dt, OnesInitializer(), options.scale);
  Variable beta = MakeVariable(s, "beta", c, dt, ZerosInitializer(), options.center);
  Variable moving_mean = MakeVariable(s, "moving_mean", c, dt, ZerosInitializer(), false);
  Variable moving_var = MakeVariable(s, "moving_variance", c, dt, OnesInitializer(), false);
  if (!training) {
    std::vector<Output> bn = FusedBatchNorm(s, x, gamma.value(), beta.value(), moving_mean.value(),
                                            moving_var.value(), options.epsilon, false);
    return bn.empty() ? Output() : bn[0];
  }
  Output empty = Const(s.WithOpName("empty"), Tensor(DType::kFloat, TensorShape({0})));
  std::vector<Output> bn =
      FusedBatchNorm(s, x, gamma.value(), beta.value(), empty, empty, options.epsilon, true);
  if (bn.size() < 3) return Output();
  // moving -= (moving - batch) * (1 - momentum)
  Output decay = Const(s.WithOpName("decay"), 1.0f - options.momentum);
  Output upd_mean = AssignSub(s, moving_mean, Mul(s, Sub(s, moving_mean.value(), bn[1]), decay));
  Output upd_var = AssignSub(s, moving_var, Mul(s, Sub(s, moving_var.value(), bn[2]), decay));
  if (upd_mean.valid() && upd_var.valid()) {
    s.graph()->AddToCollection(kUpdateOps, upd_mean.node->name());
    s.graph()->AddToCollection(kUpdateOps, upd_var.node->name());
  }
  return bn[0];
}

Output Embedding(const Scope& scope, Output ids, int64_t vocab_size, int64_t dim,
                 const std::string& name, Initializer initializer) {
  Scope s = scope.NewSubScope(name);
  Variable table =
      MakeVariable(s, "embeddings", TensorShape({vocab_size, dim}), DType::kFloat, initializer);
  if (!table.valid()) return Output();
  return ResourceGather(s.ColocateWith(table.handle().node), table.handle(), ids, DType::kFloat);
}

}  // namespace tandem::ops

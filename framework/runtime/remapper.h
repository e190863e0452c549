// framework/runtime/remapper.h
//
// Rewrites of the GraphDef a session is created with, applied once, never per step,
// after gradients exist (the nodes they add have none):
//
// FuseBiasAndRelu fuses Conv2D or MatMul -> BiasAdd [-> Relu] chains into _FusedConv2D /
// _FusedMatMul nodes (one oneDNN primitive with a bias and a ReLU post-op), as
// TensorFlow's grappler remapper does.
//
// MaskBeforeMaxPoolGrad turns ReluGrad(MaxPoolGrad(a, MaxPool(a), g), a) into
// MaxPoolGrad(a, MaxPool(a), ReluGrad(g, MaxPool(a))): the ReLU's mask on the pooled
// gradient instead of the full-size one (a quarter of the elements under 2x2 windows).
// The two are equal bit for bit: MaxPoolGrad routes each window's gradient to a place p
// where a[p] equals the window's maximum, so a[p] > 0 exactly when the maximum is, and
// every other place gets 0 either way. It applies where the MaxPool and MaxPoolGrad
// share a's tensor and their window geometry, the full-size gradient feeds nothing but
// the ReluGrad, and all three nodes share one device and dtype.
//
// BiasGradBeforeMaxPoolGrad turns BiasAddGrad(MaxPoolGrad(a, m, g)) into BiasAddGrad(g):
// the per-channel sums of the pooled gradient, a quarter of the elements under 2x2
// windows. MaxPoolGrad routes each of g's elements to one place of its channel (added
// up where windows overlap) and writes 0 elsewhere, so both sum the same terms, in
// another order: equal up to float32 rounding of the sum, not bit for bit. (A window
// whose every element is NaN routes its gradient nowhere; its step's loss is NaN
// either way.) It applies where both nodes share one device and the BiasAddGrad reads
// g's dtype, whatever else reads the MaxPoolGrad.
//
// FilterGradOfMaxPoolGrad turns Conv2DBackpropFilter(x, sizes, MaxPoolGrad(a, m, g)) into
// _Conv2DBackpropFilterOfMaxPoolGrad(x, sizes, a, m, g) (the pool's attrs as pool_ksize,
// pool_strides, pool_padding): an image model's first layer, whose output gradient is
// its pool's routed gradient and feeds nothing but the filter gradient (the layer has
// no input gradient, and BiasGradBeforeMaxPoolGrad took the bias gradient to g). The
// kernel routes each image's gradient as it reads it instead of writing the full-size
// gradient and reading it back (fashion_cnn: 5 MB each way a step); equal bit for bit.
// It applies where both share one device and dtype and nothing else takes the
// MaxPoolGrad's output, transitively (a fetched reader of it would run the MaxPoolGrad
// as well: slower, not wrong). CPU only.
//
// FuseConvAndMaxPool turns MaxPool(_FusedConv2D(x, w, b)) with 2x2 windows of stride 2
// into _FusedConv2DWithMaxPool(x, w, b), whose output 0 the convolution's readers read
// and output 1 the pool's: where the AMX forward takes the layer, each image is pooled
// as it leaves the tiles, while in cache, instead of the pool reading the whole output
// back (fashion_cnn's first layer: 5 MB a step). Equal bit for bit. It applies where
// both share one device and dtype and the convolution has no other MaxPool. CPU only.
// It runs after the passes above, which match the MaxPool by its op.
//
// Nothing the caller knows changes meaning. The chain's nodes stay in the graph under
// their names; the fused node ("<last>/fused") takes over every consumer of the
// chain's last node, data and control (the masked MaxPoolGrad, "<ReluGrad>/routed",
// takes over the ReluGrad's). The session prunes each run to what its
// fetches need, so the unfused chain runs only when one of its own tensors is
// fetched. A chain fuses only where that costs nothing: the Conv2D or MatMul feeds
// nothing but the BiasAdd (and the BiasAdd nothing but the Relu, when the Relu is
// taken in), apart from float32 views (Casts, left by the mixed-precision rewrite) that
// nothing reads; all nodes share one device and dtype, none writes a Tout.
//
// Thread safety: pure functions.
#ifndef TANDEM_FRAMEWORK_RUNTIME_REMAPPER_H_
#define TANDEM_FRAMEWORK_RUNTIME_REMAPPER_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "framework/graph/op_registry.h"
#include "framework/protos/graph.pb.h"

namespace tandem {

struct RemapReport {
  std::map<std::string, int> fused;       // "Conv2D+BiasAdd+Relu" -> chains fused
  int masks_before_pool_grad = 0;         // ReluGrads moved before their MaxPoolGrad
  int bias_grads_before_pool_grad = 0;    // BiasAddGrads of the pooled gradient
  int filter_grads_of_pool_grad = 0;      // Conv2DBackpropFilters routing their gradient
  int pools_inside_convs = 0;             // MaxPools computed by their _FusedConv2D
  int pool_argmaxes_kept = 0;             // _FusedConv2DWithMaxPools keeping the argmax
  int variables_read_as_bfloat16 = 0;     // Cast(ReadVariableOp) pairs fused
  int gradients_computed_in_updates = 0;  // MatMuls taken into their dense updates
};

absl::StatusOr<proto::GraphDef> FuseBiasAndRelu(const proto::GraphDef& def,
                                                const OpRegistry* registry,
                                                RemapReport* report = nullptr);

absl::StatusOr<proto::GraphDef> MaskBeforeMaxPoolGrad(const proto::GraphDef& def,
                                                      const OpRegistry* registry,
                                                      RemapReport* report = nullptr);

absl::StatusOr<proto::GraphDef> BiasGradBeforeMaxPoolGrad(const proto::GraphDef& def,
                                                          const OpRegistry* registry,
                                                          RemapReport* report = nullptr);

absl::StatusOr<proto::GraphDef> FilterGradOfMaxPoolGrad(const proto::GraphDef& def,
                                                        const OpRegistry* registry,
                                                        RemapReport* report = nullptr);

absl::StatusOr<proto::GraphDef> FuseConvAndMaxPool(const proto::GraphDef& def,
                                                   const OpRegistry* registry,
                                                   RemapReport* report = nullptr);

// KeepPoolArgmax turns a _FusedConv2DWithMaxPool whose convolution output nothing reads
// but _Conv2DBackpropFilterOfMaxPoolGrad nodes (as their orig_input, its pool as their
// orig_output) into _FusedConv2DWithMaxPoolArgmax, whose output 0 the pool's readers
// read and output 1 holds each window's argmax as a byte (pool_util.h), and those filter
// gradients into _Conv2DBackpropFilterOfMaxPoolArgmax(x, sizes, argmax, g), which route
// by it: an image model's first layer no longer keeps its convolution's output from the
// forward to the backward (fashion_cnn, bfloat16, batch 128: 6.4 MB, against 0.8 MB of
// codes), and the filter gradient reads an eighth of those bytes. An inference graph's
// _FusedConv2DWithMaxPool, whose output 0 nothing reads, takes the argmax form too. Equal
// bit for bit. It applies where the readers share the convolution's device, apart from
// nodes that nothing reads (the unfused originals, pruned unless fetched). CPU only; it
// runs after FuseConvAndMaxPool.
absl::StatusOr<proto::GraphDef> KeepPoolArgmax(const proto::GraphDef& def,
                                               const OpRegistry* registry,
                                               RemapReport* report = nullptr);

// Cast(ReadVariableOp(handle)) from float32 to bfloat16, on one device and with nothing
// ordered after the read, becomes _ReadVariableAsBfloat16(handle) for the cast's
// readers: the variable's bfloat16 copy, which the optimizers write beside each update
// (Var::RequestBf16Copy), so a mixed-precision step casts no weights. It waits for the
// read's and the cast's control inputs; the pair stays, fetchable by name. Only for
// variables on the CPU: the op has no GPU kernel.
absl::StatusOr<proto::GraphDef> ReadVariablesAsBfloat16(const proto::GraphDef& def,
                                                        const OpRegistry* registry,
                                                        RemapReport* report = nullptr);

// A dense update (ResourceApplyAdam and the others of ops::DenseApplyGradientInput)
// whose gradient is a float32 MatMul (of float32 operands, or bfloat16 ones with Tout
// float32) that feeds nothing else, requested on the update's device and on its
// variable's (the update runs where its variable is: a MatMul on a worker for a
// variable on a ps stays there), becomes
// _<op>WithMatMul(..., a, b, ...) with the MatMul's operands and transposes: the kernel
// computes the gradient a block of rows at a time and applies each block while it is in
// cache, so the gradient is never written to memory and read back (fashion_cnn's dense
// layer: 12.8 MB each way a step). It waits for both nodes' control inputs and takes
// over the update's control consumers; the pair stays, fetchable by name. CPU only.
absl::StatusOr<proto::GraphDef> FuseGradientMatMulIntoApply(const proto::GraphDef& def,
                                                            const OpRegistry* registry,
                                                            RemapReport* report = nullptr);

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_RUNTIME_REMAPPER_H_

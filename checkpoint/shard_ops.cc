// checkpoint/shard_ops.cc: see shard_ops.h.
#include "checkpoint/shard_ops.h"

#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_index.h"
#include "checkpoint/load_variables.h"
#include "checkpoint/safetensors.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/graph/device_spec.h"
#include "framework/graph/op_registry.h"
#include "framework/kernels/kernel_registry.h"
#include "framework/runtime/runtime_kernels.h"

namespace tandem::checkpoint {
namespace {

class SaveShardKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(names_, GetAttr<std::vector<std::string>>(node.attrs(), "names"));
    TANDEM_ASSIGN_OR_RETURN(shard_, GetAttr<int64_t>(node.attrs(), "shard"));
    TANDEM_ASSIGN_OR_RETURN(num_shards_, GetAttr<int64_t>(node.attrs(), "num_shards"));
    device_ = GetAttrOr<std::string>(node.attrs(), "device", "");
    if (static_cast<int>(names_.size()) + 2 != node.num_inputs()) {
      return absl::InvalidArgumentError(absl::StrCat("SaveShard: ", names_.size(), " names for ",
                                                     node.num_inputs() - 2, " values"));
    }
    if (shard_ < 0 || shard_ >= num_shards_) {
      return absl::InvalidArgumentError(
          absl::StrCat("SaveShard: shard ", shard_, " is not in [0, ", num_shards_, ")"));
    }
    return absl::OkStatus();
  }

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& prefix_t = ctx.input(0);
    const Tensor& step_t = ctx.input(1);
    if (prefix_t.dtype() != DType::kString || prefix_t.NumElements() != 1 ||
        step_t.dtype() != DType::kInt64 || step_t.NumElements() != 1) {
      return ctx.Error("needs a string prefix and an int64 global step, both scalars");
    }
    const std::string& prefix = prefix_t.StringAt(0);
    std::vector<NamedTensor> tensors;
    int64_t bytes = 0;
    for (size_t i = 0; i < names_.size(); ++i) {
      tensors.emplace_back(names_[i], ctx.input(static_cast<int>(i) + 2));
      bytes += static_cast<int64_t>(tensors.back().second.TotalBytes());
    }
    const std::string dir = env::Dirname(prefix);
    TANDEM_RETURN_IF_ERROR(ctx.Annotate(env::MakeDirs(dir)));
    const std::string path = env::JoinPath(
        dir, ShardFileName(prefix, static_cast<int>(shard_), static_cast<int>(num_shards_)));
    TANDEM_RETURN_IF_ERROR(ctx.Annotate(
        WriteSafetensors(path, tensors,
                         {{"tandem_global_step", absl::StrCat(step_t.data<int64_t>()[0])},
                          {"tandem_device", device_}})));
    ctx.set_output(0, Tensor::Scalar<int64_t>(bytes));
    return absl::OkStatus();
  }

 private:
  std::vector<std::string> names_;
  int64_t shard_ = 0;
  int64_t num_shards_ = 1;
  std::string device_;
};

class RestoreShardKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    const AttrMap& a = node.attrs();
    TANDEM_ASSIGN_OR_RETURN(auto names, GetAttr<std::vector<std::string>>(a, "names"));
    TANDEM_ASSIGN_OR_RETURN(auto dtypes, GetAttr<std::vector<DType>>(a, "dtypes"));
    TANDEM_ASSIGN_OR_RETURN(auto shapes, GetAttr<std::vector<PartialShape>>(a, "shapes"));
    TANDEM_ASSIGN_OR_RETURN(auto full_names, GetAttr<std::vector<std::string>>(a, "full_names"));
    TANDEM_ASSIGN_OR_RETURN(auto full_shapes, GetAttr<std::vector<PartialShape>>(a, "full_shapes"));
    TANDEM_ASSIGN_OR_RETURN(auto offsets, GetAttr<std::vector<int64_t>>(a, "offsets"));
    max_parallel_reads_ = static_cast<int>(GetAttrOr<int64_t>(a, "max_parallel_reads", 8));
    const size_t n = names.size();
    if (dtypes.size() != n || shapes.size() != n || full_names.size() != n ||
        full_shapes.size() != n) {
      return absl::InvalidArgumentError("RestoreShard: attrs of different lengths");
    }
    size_t at = 0;
    for (size_t i = 0; i < n; ++i) {
      VariableToLoad v{names[i], dtypes[i], shapes[i], std::nullopt};
      if (!full_names[i].empty()) {
        const int rank = full_shapes[i].rank();
        if (rank < 0 || at + rank > offsets.size()) {
          return absl::InvalidArgumentError("RestoreShard: offsets do not match full_shapes");
        }
        v.part = PartitionInfo{full_names[i], full_shapes[i].dims(),
                               Dims(offsets.begin() + at, offsets.begin() + at + rank)};
        at += rank;
      }
      vars_.push_back(std::move(v));
    }
    if (static_cast<int>(n) != node.num_outputs()) {
      return absl::InvalidArgumentError("RestoreShard: one output per variable");
    }
    return absl::OkStatus();
  }

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& prefix = ctx.input(0);
    if (prefix.dtype() != DType::kString || prefix.NumElements() != 1) {
      return ctx.Error("needs a string prefix scalar");
    }
    LoadFailure kind;
    TANDEM_ASSIGN_OR_RETURN(std::vector<Tensor> values,
                            LoadVariables(prefix.StringAt(0), vars_, max_parallel_reads_, &kind));
    for (size_t i = 0; i < values.size(); ++i)
      ctx.set_output(static_cast<int>(i), std::move(values[i]));
    return absl::OkStatus();
  }

 private:
  std::vector<VariableToLoad> vars_;
  int max_parallel_reads_ = 8;
};

}  // namespace

void EnsureCheckpointOps() {
  static std::once_flag once;
  std::call_once(once, [] {
    EnsureKernels();  // The standard ops first: the registries exist and are filled.
    OpRegistry::Global()->Register({.name = kSaveShardOp,
                                    .min_inputs = 2,
                                    .max_inputs = -1,
                                    .default_attrs = {{"names", std::vector<std::string>{}},
                                                      {"shard", int64_t{0}},
                                                      {"num_shards", int64_t{1}},
                                                      {"device", std::string()}},
                                    .stateful = true,
                                    .infer = [](InferenceContext& ctx) -> absl::Status {
                                      TANDEM_RETURN_IF_ERROR(ctx.ExpectDType(0, DType::kString));
                                      TANDEM_RETURN_IF_ERROR(ctx.ExpectDType(1, DType::kInt64));
                                      ctx.AddOutput(DType::kInt64, PartialShape({}));
                                      return absl::OkStatus();
                                    },
                                    .strings = true});  // The prefix.
    OpRegistry::Global()->Register(
        {.name = kRestoreShardOp,
         .min_inputs = 1,
         .max_inputs = 1,
         .default_attrs = {{"names", std::vector<std::string>{}},
                           {"dtypes", std::vector<DType>{}},
                           {"shapes", std::vector<PartialShape>{}},
                           {"full_names", std::vector<std::string>{}},
                           {"full_shapes", std::vector<PartialShape>{}},
                           {"offsets", std::vector<int64_t>{}},
                           {"max_parallel_reads", int64_t{8}}},
         .stateful = true,
         .infer = [](InferenceContext& ctx) -> absl::Status {
           TANDEM_RETURN_IF_ERROR(ctx.ExpectDType(0, DType::kString));
           TANDEM_ASSIGN_OR_RETURN(auto dtypes, ctx.GetAttr<std::vector<DType>>("dtypes"));
           TANDEM_ASSIGN_OR_RETURN(auto shapes, ctx.GetAttr<std::vector<PartialShape>>("shapes"));
           if (dtypes.size() != shapes.size())
             return ctx.Error("dtypes and shapes differ in length");
           for (size_t i = 0; i < dtypes.size(); ++i) {
             if (dtypes[i] == DType::kString || dtypes[i] == DType::kResource) {
               return ctx.Error("variables of strings or resources are not restored");
             }
             ctx.AddOutput(dtypes[i], shapes[i]);
           }
           return absl::OkStatus();
         },
         .strings = true});  // The prefix.
    KernelRegistry::Global()->Register<SaveShardKernel>(kSaveShardOp, kDeviceCpu);
    KernelRegistry::Global()->Register<RestoreShardKernel>(kRestoreShardOp, kDeviceCpu);
  });
}

}  // namespace tandem::checkpoint

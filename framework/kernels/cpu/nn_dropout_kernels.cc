// framework/kernels/cpu/nn_dropout_kernels.cc
//
// Dropout(x) -> (y, mask): mask is 1/(1-rate) where a uniform draw u in [0,1) has
// u >= rate, else 0; y = x * mask. The kernel owns a Philox stream seeded from the
// node's (seed, seed2) attrs (both zero: a random seed, as TensorFlow); each run takes
// the next ceil(n/4) blocks of the stream under a mutex, then fills the tensor in
// parallel, each chunk skipping to its own block offset. So a run's mask depends only
// on the seeds and on how many runs came before, never on the thread count.
#include <algorithm>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "framework/core/random.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/nn_kernel_util.h"

namespace tandem::nn {
namespace {

// Philox blocks drawn at a time (PhiloxRandom::Fill computes them 16 side by side).
constexpr int64_t kTileBlocks = 256;

// mask[i] = keep_scale where bits[i] draws u >= rate, else 0; y[i] = x[i] * mask[i].
void ApplyMask(const uint32_t* bits, const float* __restrict x, float rate, float keep_scale,
               int64_t count, float* __restrict mask, float* __restrict y) {
  for (int64_t j = 0; j < count; ++j) {
    const float m = PhiloxRandom::Uint32ToFloat(bits[j]) >= rate ? keep_scale : 0.0f;
    mask[j] = m;
    y[j] = x[j] * m;
  }
}

}  // namespace

absl::StatusOr<DropoutAttrs> ParseDropoutAttrs(const Node& node) {
  DropoutAttrs a;
  TANDEM_ASSIGN_OR_RETURN(a.rate, GetAttr<float>(node.attrs(), "rate"));
  if (!(a.rate >= 0.0f && a.rate < 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("rate must be in [0, 1), got ", a.rate));
  }
  const int64_t seed = GetAttrOr<int64_t>(node.attrs(), "seed", 0);
  const int64_t seed2 = GetAttrOr<int64_t>(node.attrs(), "seed2", 0);
  a.seeds = (seed == 0 && seed2 == 0)
                ? DeriveSeeds(0, 0, 0)
                : SeedPair{static_cast<uint64_t>(seed), static_cast<uint64_t>(seed2)};
  return a;
}

namespace {

class DropoutKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(DropoutAttrs attrs, ParseDropoutAttrs(node));
    rate_ = attrs.rate;
    absl::MutexLock lock(&mu_);
    gen_ = PhiloxRandom(attrs.seeds.seed, attrs.seeds.seed2);
    return absl::OkStatus();
  }

  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_RETURN_IF_ERROR(ExpectFloatInput(ctx, 0));
    const TensorShape shape = ctx.input(0).shape();
    const int64_t n = shape.num_elements();
    const int64_t blocks = (n + 3) / 4;
    PhiloxRandom start(0, 0);
    {
      absl::MutexLock lock(&mu_);
      start = gen_;
      gen_.Skip(static_cast<uint64_t>(blocks));
    }
    const float* x = ctx.input(0).data<float>();
    float* mask = ctx.allocate_output(1, shape)->data<float>();
    float* y = ctx.forward_input_or_allocate_output(0, 0, shape)->data<float>();
    const float rate = rate_;
    const float keep_scale = 1.0f / (1.0f - rate_);
    OmpParallelFor(blocks, kParallelGrain / 4, [=](int64_t b, int64_t e) {
      PhiloxRandom gen = start;
      gen.Skip(static_cast<uint64_t>(b));
      uint32_t bits[4 * kTileBlocks];
      for (int64_t blk = b; blk < e; blk += kTileBlocks) {
        const int64_t nb = std::min(kTileBlocks, e - blk);
        gen.Fill(bits, nb);
        const int64_t first = blk * 4;
        ApplyMask(bits, x + first, rate, keep_scale, std::min(nb * 4, n - first), mask + first,
                  y + first);
      }
    });
    return absl::OkStatus();
  }

 private:
  float rate_ = 0.5f;
  absl::Mutex mu_;
  PhiloxRandom gen_ ABSL_GUARDED_BY(mu_){0, 0};
};

}  // namespace

void RegisterCpuDropoutKernels(KernelRegistry* r) {
  r->Register<DropoutKernel>("Dropout", kDeviceCpu);
}

}  // namespace tandem::nn

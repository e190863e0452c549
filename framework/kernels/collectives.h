// framework/kernels/collectives.h
//
// Collectives: what the collective kernels (CollectiveAllReduce, CollectiveBroadcast,
// CollectiveAllGatherRows; kernels/cpu/collective_kernels.cc) ask of the group their
// step reduces over (StepContext::collective). The distributed runtime's
// CollectiveExecutor (framework/distributed/collective/collective_executor.h)
// implements it across tasks; a test may implement it in process.
//
// Every operation is asynchronous: `done` is called once, possibly on another thread,
// possibly before the call returns. Each instance_key runs once per step on every
// member, in any order relative to other instances.
//
// Thread safety: implementations are thread-safe.
#ifndef TANDEM_FRAMEWORK_KERNELS_COLLECTIVES_H_
#define TANDEM_FRAMEWORK_KERNELS_COLLECTIVES_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "framework/tensor/tensor.h"

namespace tandem {

class Collectives {
 public:
  using Done = std::function<void(const absl::Status&)>;
  virtual ~Collectives() = default;

  // The number of members.
  virtual int size() const = 0;
  // Sums the float32 `data` over the group, in place, and multiplies the sum by
  // `scale` (1 / size(): the mean). Every member ends with the same bits.
  virtual void AllReduceSum(int64_t instance_key, Tensor data, Done done, float scale) = 0;
  // Every member's `data` (same byte size everywhere) ends with the source's bytes.
  virtual void Broadcast(int64_t instance_key, Tensor data, Done done) = 0;
  // Every member's `data`, in rank order, as bytes. With `same_size`, a member whose
  // byte size differs from this one's fails the collective (different graphs); without,
  // each member may bring any size.
  virtual void AllGather(int64_t instance_key, Tensor data,
                         std::function<void(absl::StatusOr<std::vector<Tensor>>)> done,
                         bool same_size) = 0;
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_KERNELS_COLLECTIVES_H_

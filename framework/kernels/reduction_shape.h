// framework/kernels/reduction_shape.h
//
// The shape of a reduction (Sum, Mean, Prod, Max, Min), shared by every device's
// kernels: the output's shape and the input's dimensions merged into alternating runs
// of kept and reduced dimensions, size-1 dimensions dropped, so that a kernel sees
// [reduced], [kept, reduced], [reduced, kept] or a longer alternation instead of the
// user's rank.
//
// Thread safety: a pure function.
#ifndef TANDEM_FRAMEWORK_KERNELS_REDUCTION_SHAPE_H_
#define TANDEM_FRAMEWORK_KERNELS_REDUCTION_SHAPE_H_

#include <cstdint>
#include <vector>

#include "framework/tensor/tensor_shape.h"

namespace tandem {

struct ReductionShape {
  TensorShape out;    // The input's shape less the reduced axes (size 1 with keep_dims).
  int64_t count = 1;  // Input elements per output element (0 when a reduced axis is).
  Dims dims;          // The merged runs of the input's dimensions of size > 1...
  std::vector<bool> dim_reduced;  // ...and whether each run is reduced.

  // The reduction of a tensor of shape `in` over the axes `reduced` marks (one flag
  // per axis: in.rank() of them).
  static ReductionShape Make(const TensorShape& in, const std::vector<bool>& reduced,
                             bool keep_dims);
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_KERNELS_REDUCTION_SHAPE_H_

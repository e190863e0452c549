// framework/kernels/reduction_shape.cc
#include "framework/kernels/reduction_shape.h"

namespace tandem {

ReductionShape ReductionShape::Make(const TensorShape& in, const std::vector<bool>& reduced,
                                    bool keep_dims) {
  ReductionShape r;
  for (int i = 0; i < in.rank(); ++i) {
    const int64_t d = in.dim(i);
    if (reduced[i]) {
      r.count *= d;
      if (keep_dims) r.out.AddDim(1);
    } else {
      r.out.AddDim(d);
    }
    if (d == 1) continue;
    if (!r.dims.empty() && r.dim_reduced.back() == reduced[i]) {
      r.dims.back() *= d;
    } else {
      r.dims.push_back(d);
      r.dim_reduced.push_back(reduced[i]);
    }
  }
  return r;
}

}  // namespace tandem

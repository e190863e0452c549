// framework/runtime/feeds.h
//
// ArrangeFeeds: what every session does with the values a step is fed (DirectSession,
// MasterSession): puts them in the step's order, its feed names sorted, and checks each
// against the graph's tensor of that name, its dtype and, where the graph knows it, its
// shape. INVALID_ARGUMENT naming the tensor for a name fed twice or not among the step's
// feeds, a dtype or a shape that does not match.
//
// Thread safety: a pure function.
#ifndef TANDEM_FRAMEWORK_RUNTIME_FEEDS_H_
#define TANDEM_FRAMEWORK_RUNTIME_FEEDS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/runtime/session.h"
#include "framework/tensor/tensor.h"
#include "framework/tensor/tensor_shape.h"

namespace tandem {

// A fed tensor of the graph.
struct FeedEndpoint {
  std::string name;
  DType dtype = DType::kInvalid;
  PartialShape shape;
};

// `endpoints` sorted by name, distinct; the result has one value per endpoint.
absl::StatusOr<std::vector<Tensor>> ArrangeFeeds(const std::vector<FeedEndpoint>& endpoints,
                                                 const FeedMap& fed);

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_RUNTIME_FEEDS_H_

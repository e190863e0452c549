// framework/runtime/feeds.cc: see feeds.h.
#include "framework/runtime/feeds.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tandem {

absl::StatusOr<std::vector<Tensor>> ArrangeFeeds(const std::vector<FeedEndpoint>& endpoints,
                                                 const FeedMap& fed) {
  std::vector<Tensor> values(endpoints.size());
  for (const auto& [name, value] : fed) {
    auto it =
        std::lower_bound(endpoints.begin(), endpoints.end(), name,
                         [](const FeedEndpoint& e, const std::string& n) { return e.name < n; });
    const size_t k = static_cast<size_t>(it - endpoints.begin());
    if (it == endpoints.end() || it->name != name) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", name, "' is not fed by this step"));
    }
    if (values[k].IsInitialized()) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' is fed twice"));
    }
    if (value.dtype() != it->dtype) {
      return absl::InvalidArgumentError(absl::StrCat("cannot feed a ", DTypeName(value.dtype()),
                                                     " value to tensor '", name,
                                                     "', which has dtype ", DTypeName(it->dtype)));
    }
    if (!it->shape.IsCompatibleWith(PartialShape(value.shape()))) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot feed a value of shape ", value.shape().DebugString(), " to tensor '",
                       name, "', which has shape ", it->shape.DebugString()));
    }
    values[k] = value;
  }
  return values;
}

}  // namespace tandem

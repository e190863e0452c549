// estimator/internal/did_you_mean.h
//
// Suggestions for misspelt names in config and registry errors: the closest candidate
// by edit distance, when it is close enough to be a typo.
//
// Thread safety: pure functions.
#ifndef TANDEM_ESTIMATOR_INTERNAL_DID_YOU_MEAN_H_
#define TANDEM_ESTIMATOR_INTERNAL_DID_YOU_MEAN_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace tandem::internal {

// Levenshtein distance (insertions, deletions, substitutions).
int EditDistance(absl::string_view a, absl::string_view b);

// " (did you mean 'x'?)" for the closest candidate within max(2, |word| / 3) edits, or
// "" when none is that close.
std::string DidYouMean(absl::string_view word, const std::vector<std::string>& candidates);

}  // namespace tandem::internal

#endif  // TANDEM_ESTIMATOR_INTERNAL_DID_YOU_MEAN_H_

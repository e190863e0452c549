// estimator/internal/did_you_mean.cc
#include "estimator/internal/did_you_mean.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace tandem::internal {

int EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diag = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      int up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string DidYouMean(absl::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  int best_distance = std::numeric_limits<int>::max();
  for (const std::string& c : candidates) {
    int d = EditDistance(word, c);
    if (d < best_distance) best_distance = d, best = c;
  }
  int limit = std::max<int>(2, static_cast<int>(word.size()) / 3);
  if (best.empty() || best_distance > limit) return "";
  return absl::StrCat(" (did you mean '", best, "'?)");
}

}  // namespace tandem::internal
